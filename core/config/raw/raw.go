package raw

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"

	"github.com/kmirror/kmirror/core/config/value"
)

// Section names of the file. Any other top-level name is a daemon key.
const (
	Destination = "destination"
	State       = "state"
	Mirrors     = "mirrors"
	Plugins     = "plugins"
)

// Report records one problem: the key path (or variable, or "--set") and
// the reason.
type Report func(path, reason string)

// Value is one value before decoding, with where it came from.
type Value struct {
	V    any
	From string // "" for the file, else the environment variable or "--set"
}

// Section is the flattened keys of one part of the file.
type Section struct {
	Vals    map[string]Value
	Present bool // the section is in the file, or a variable or flag set a key of it
}

// NewSection returns an empty section.
func NewSection() Section { return Section{Vals: map[string]Value{}} }

// MirrorName returns the name a mirror section declares, if it is a string.
func (s Section) MirrorName() (string, bool) {
	rv, ok := s.Vals["name"]
	if !ok {
		return "", false
	}
	name, ok := rv.V.(string)
	return name, ok
}

// Plugin is one entry of the plugins map before decoding.
type Plugin struct {
	Name    string
	Section Section
}

// Document is the configuration split into its parts, before decoding.
type Document struct {
	Daemon, Destination, State Section
	Mirrors                    []Section
	Plugins                    []Plugin
}

// MaxFileBytes caps the configuration: a file, standard input or bytes
// given to Parse. A real configuration is a few KiB; even a thousand
// mirrors fit in well under a MiB.
const MaxFileBytes = 4 << 20

// ReadFile reads a configuration file and says its format from its
// extension (.yaml, .yml or .toml). An empty path is no file: no data, in
// YAML. A path that is not a regular file (a directory, a named pipe,
// /dev/zero) or is larger than MaxFileBytes is refused before it is read,
// with an error naming the path and the limit (errors.Is with
// value.ErrNotRegular or value.ErrTooLarge). A failure to read the file is
// returned wrapped, so that errors.Is(err, fs.ErrNotExist) works.
func ReadFile(path string) (data []byte, format string, err error) {
	if path == "" {
		return nil, "yaml", nil
	}
	// The file's kind first: "not a regular file" says more about
	// /dev/zero than "unknown extension".
	if fi, err := os.Stat(path); err == nil {
		if err := value.CheckFile(path, fi, MaxFileBytes); err != nil {
			return nil, "", fmt.Errorf("configuration file %w", err)
		}
	}
	if format, err = formatOf(path); err != nil {
		return nil, "", err
	}
	if data, err = value.ReadFile(path, MaxFileBytes); err != nil {
		if errors.Is(err, value.ErrNotRegular) || errors.Is(err, value.ErrTooLarge) {
			return nil, "", fmt.Errorf("configuration file %w", err)
		}
		return nil, "", fmt.Errorf("read configuration file: %w", err)
	}
	return data, format, nil
}

// ReadAll reads a configuration from r (standard input, for `--config -`),
// refusing more than MaxFileBytes; label names r in the error.
func ReadAll(r io.Reader, label string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read configuration from %s: %w", label, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("configuration from %s is larger than %s: %w", label, value.FormatBytes(MaxFileBytes), value.ErrTooLarge)
	}
	return data, nil
}

func formatOf(path string) (string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		return "yaml", nil
	case ".toml":
		return "toml", nil
	}
	return "", fmt.Errorf("configuration file %s: unknown extension %q; use .yaml, .yml or .toml", path, filepath.Ext(path))
}

// Parse parses data in format ("yaml" or "toml") and splits it into
// sections, reporting each problem of its shape. A format that is neither
// is returned as an error; data that does not parse is reported under
// label (the file's path, or "configuration") and Parse returns nil.
func Parse(data []byte, format, label string, report Report) (*Document, error) {
	var top map[string]any
	switch strings.ToLower(format) {
	case "yaml", "yml":
		m, err := parseYAML(data)
		if err != nil {
			report(label, fmt.Sprintf("cannot parse YAML: %v", err))
			return nil, nil
		}
		top = m
	case "toml":
		// The delimiter is not "." so that Kafka-style keys such as
		// bootstrap.servers stay whole.
		k := koanf.NewWithConf(koanf.Conf{Delim: "/"})
		if len(strings.TrimSpace(string(data))) > 0 {
			if err := k.Load(rawbytes.Provider(data), toml.Parser()); err != nil {
				report(label, fmt.Sprintf("cannot parse TOML: %v", err))
				return nil, nil
			}
		}
		top = k.Raw()
	default:
		return nil, fmt.Errorf("configuration format %q is not yaml or toml", format)
	}
	return split(top, report), nil
}

// split sorts the top level of the file into sections. Nested maps below a
// section (or at the top level, outside sections) are flattened with "."
// so that TOML's dotted keys (bootstrap.servers = "…" is a nested table in
// TOML) and quoted keys mean the same.
func split(raw map[string]any, report Report) *Document {
	d := &Document{Daemon: NewSection(), Destination: NewSection(), State: NewSection()}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		v := raw[k]
		switch k {
		case Destination, State:
			sec := &d.Destination
			if k == State {
				sec = &d.State
			}
			sec.Present = true
			switch m := v.(type) {
			case map[string]any:
				flatten(m, "", k, sec.Vals, report)
			case nil:
			default:
				report(k, "expected a map of keys, got "+value.Describe(v, false))
			}
		case Plugins:
			d.Plugins = splitPlugins(v, report)
		case Mirrors:
			list, ok := v.([]any)
			if !ok && v != nil {
				report(k, "expected a list of mirrors, got "+value.Describe(v, false))
				continue
			}
			for i, it := range list {
				sec := NewSection()
				sec.Present = true
				m, ok := it.(map[string]any)
				if !ok {
					report(fmt.Sprintf("mirrors[%d]", i), "expected a map of keys, got "+value.Describe(it, false))
				} else {
					flatten(m, "", fmt.Sprintf("mirrors[%d]", i), sec.Vals, report)
				}
				d.Mirrors = append(d.Mirrors, sec)
			}
		default:
			if m, ok := v.(map[string]any); ok {
				flatten(m, k, "", d.Daemon.Vals, report)
			} else if v != nil {
				if _, dup := d.Daemon.Vals[k]; dup {
					report(k, "given twice (once as a dotted name and once nested); keep one")
					continue
				}
				d.Daemon.Vals[k] = Value{V: v}
			}
		}
	}
	return d
}

// flatten copies the leaves of m into out under dotted names. A name that
// is reached twice (written once whole and once nested, e.g.
// "mirror.topics.include" next to mirror: {topics.include: …}) is an error:
// which one wins would otherwise depend on map order.
func flatten(m map[string]any, prefix, section string, out map[string]Value, report Report) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if prefix != "" {
			k = prefix + "." + k
		}
		switch t := v.(type) {
		case map[string]any:
			flatten(t, k, section, out, report)
		case nil:
			// A key with no value ("key:" in YAML) is treated as unset.
		default:
			if _, dup := out[k]; dup {
				report(keyPath(section, k), "given twice (once as a dotted name and once nested); keep one")
				continue
			}
			out[k] = Value{V: v}
		}
	}
}

// splitPlugins reads the plugins map. Each entry's config block is kept
// whole (it belongs to the plugin); its other keys are flattened like any
// section's.
func splitPlugins(v any, report Report) []Plugin {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		report(Plugins, "expected a map of plugins keyed by name (plugins: {sso: {kind: auth, …}}), got "+value.Describe(v, false))
		return nil
	}
	var out []Plugin
	for _, name := range slices.Sorted(maps.Keys(m)) {
		ps := Plugin{Name: name, Section: NewSection()}
		ps.Section.Present = true
		switch e := m[name].(type) {
		case map[string]any:
			rest := map[string]any{}
			for k, v := range e {
				if k == "config" {
					if v != nil {
						ps.Section.Vals[k] = Value{V: v}
					}
					continue
				}
				rest[k] = v
			}
			flatten(rest, "", Plugins+"."+name, ps.Section.Vals, report)
		case nil:
		default:
			report(Plugins+"."+name, "expected a map of keys (kind, path or builtin, sha256, config), got "+value.Describe(e, false))
		}
		out = append(out, ps)
	}
	return out
}

// findPlugin returns the entry named name, matched as is (--set) or after
// environment normalisation (norm true).
func (d *Document) findPlugin(name string, norm bool) []*Section {
	var out []*Section
	for i := range d.Plugins {
		n := d.Plugins[i].Name
		if n == name || norm && EnvNorm(n) == name {
			out = append(out, &d.Plugins[i].Section)
		}
	}
	return out
}

func (d *Document) pluginNames() string {
	var names []string
	for _, p := range d.Plugins {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

func keyPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}
