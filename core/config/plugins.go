package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/kmirror/kmirror/core/config/raw"
	"github.com/kmirror/kmirror/core/config/value"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// DefaultPluginDir is the directory, below state.dir, that holds plugin
// binaries when plugin.dir is unset.
const DefaultPluginDir = "plugins"

// Plugin is one entry of the plugins map: a plugin the daemon launches and
// supervises (core/pluginhost).
type Plugin struct {
	Name    string // the map key: [a-z0-9][a-z0-9_-]*
	Kind    string // kind: auth, statestore or filter (sdk/plugin's kinds)
	Path    string // path, as written; see File
	Builtin string // builtin: a plugin shipped inside the kmirror binary
	SHA256  string // sha256, lower-case hex; set exactly when Path is
	// Config is the plugin's own block, as decoded from the file; the
	// plugin's schema says what it may hold. It may hold secrets: never
	// log or print its values.
	Config map[string]any
}

// File returns the plugin's executable: Path, taken from dir when relative.
// It is "" for a built-in.
func (p *Plugin) File(dir string) string {
	if p.Path == "" || filepath.IsAbs(p.Path) {
		return p.Path
	}
	return filepath.Join(dir, p.Path)
}

// PluginDirectory returns the directory relative plugin paths are taken
// from: plugin.dir, else <state.dir>/plugins.
func (c *Config) PluginDirectory() string {
	if c.PluginDir != "" {
		return c.PluginDir
	}
	return filepath.Join(c.State.Dir, DefaultPluginDir)
}

// Plugin returns the plugin with this name.
func (c *Config) Plugin(name string) (*Plugin, bool) {
	for i := range c.Plugins {
		if c.Plugins[i].Name == name {
			return &c.Plugins[i], true
		}
	}
	return nil, false
}

var pluginNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// ReservedPluginPrefix starts the names of the plugins kmirror runs for
// itself: the file state store, the credential providers built from a
// cluster's sasl.* keys (kclient.ImplicitAuth).
const ReservedPluginPrefix = "kmirror-"

// CheckPluginName refuses a plugin (or built-in) name outside
// [a-z0-9][a-z0-9_-]*: names become part of logger and metric names
// (plugin.<kind>.<name>) and of --set paths, so no dots and no upper case.
func CheckPluginName(s string) error {
	if !pluginNameRE.MatchString(s) {
		return fmt.Errorf("invalid plugin name %s: use lower-case letters, digits, '-' and '_', starting with a letter or digit", value.Quote(s))
	}
	return nil
}

// checkBuiltinName accepts "" too, so that an override can clear builtin
// in favour of path.
func checkBuiltinName(s string) error {
	if s == "" {
		return nil
	}
	return CheckPluginName(s)
}

func checkSHA256(s string) error {
	if s == "" {
		return nil
	}
	if b, err := hex.DecodeString(s); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("%s is not a SHA-256 in hex (64 hex digits, as `sha256sum <file>` prints)", value.Quote(s))
	}
	return nil
}

func pluginKinds() []string {
	var out []string
	for _, k := range plugin.Kinds() {
		out = append(out, string(k))
	}
	return out
}

// pluginConfigCodec takes a plugin's config block whole.
func pluginConfigCodec() value.Codec[map[string]any] {
	return value.Codec[map[string]any]{
		Type:       "map",
		Constraint: "the keys the plugin's schema declares",
		Parse: func(raw any) (map[string]any, error) {
			m, ok := raw.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("expected a map of the plugin's keys, got %s", value.Describe(raw, false))
			}
			return m, nil
		},
		// The values may be secrets, and only the plugin knows which: show
		// the keys alone.
		Format: func(m map[string]any) string {
			keys := sortedKeys(m)
			return "{" + strings.Join(keys, ", ") + "}"
		},
	}
}

// decodePlugins decodes and checks every plugins entry; it runs after the
// daemon and state keys, which say where relative paths point.
func decodePlugins(d *raw.Document, cfg *Config, c *collector) { decodePluginEntries(d, cfg, c, true) }

// decodePluginEntries is decodePlugins; with checkFiles false it leaves
// out the check of each file against its sha256.
func decodePluginEntries(d *raw.Document, cfg *Config, c *collector, checkFiles bool) {
	for _, ps := range d.Plugins {
		label := sectionPlugins + "." + ps.Name
		if err := CheckPluginName(ps.Name); err != nil {
			c.add(label, err.Error())
			continue
		}
		if strings.HasPrefix(ps.Name, ReservedPluginPrefix) {
			c.add(label, "names starting with "+ReservedPluginPrefix+" are kept for the plugins kmirror runs itself (its file state store, its clusters' built-in credential providers)")
			continue
		}
		p := Plugin{Name: ps.Name}
		failed := decodeSection(ps.Section, label, []Scope{ScopePlugin}, func(Scope) any { return &p }, c)
		p.SHA256 = strings.ToLower(p.SHA256)
		validatePlugin(&p, cfg.PluginDirectory(), label, failed, checkFiles, c)
		cfg.Plugins = append(cfg.Plugins, p)
	}
	sort.Slice(cfg.Plugins, func(i, j int) bool { return cfg.Plugins[i].Name < cfg.Plugins[j].Name })
}

// validatePlugin checks an entry as a whole: path or builtin, a checksum
// exactly with path, and the file there with that checksum, so that
// `config validate` passing means the plugin can be launched.
func validatePlugin(p *Plugin, dir, label string, failed map[string]bool, checkFiles bool, c *collector) {
	if failed["path"] || failed["builtin"] || failed["sha256"] {
		return
	}
	switch {
	case p.Path == "" && p.Builtin == "":
		c.add(label, "set path (the plugin's executable, relative to plugin.dir) or builtin (a plugin shipped inside kmirror)")
		return
	case p.Path != "" && p.Builtin != "":
		c.add(label+".builtin", "set path or builtin, not both")
		return
	case p.Builtin != "":
		if p.SHA256 != "" {
			c.add(label+".sha256", "only for a plugin given by path: a built-in is part of the kmirror binary")
		}
		return
	case p.SHA256 == "":
		c.add(label+".sha256", fmt.Sprintf("required with path: the SHA-256 of %s in hex (`sha256sum %s`); a plugin is never started unverified", p.File(dir), p.File(dir)))
		return
	case !checkFiles:
		return
	}
	file := p.File(dir)
	got, err := FileSHA256(file)
	if err != nil {
		c.add(label+".path", err.Error())
		return
	}
	if got != p.SHA256 {
		c.add(label+".sha256", fmt.Sprintf("%s has SHA-256 %s, the configuration says %s; the plugin would not be started (replace the file, or update sha256 if the new file is trusted)", file, got, p.SHA256))
	}
}

// FileSHA256 returns the SHA-256 of a plugin file in lower-case hex. Its
// errors name the file; a missing file wraps fs.ErrNotExist.
func FileSHA256(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("plugin file %s does not exist (relative paths are taken from plugin.dir): %w", file, fs.ErrNotExist)
		}
		return "", fmt.Errorf("plugin file %s: %w", file, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return "", fmt.Errorf("plugin file %s is a directory, not an executable", file)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("plugin file %s: %w", file, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
