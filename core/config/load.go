package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kmirror/kmirror/core/failpoint"

	"github.com/kmirror/kmirror/core/config/raw"
	"github.com/kmirror/kmirror/core/config/value"
)

// EnvPrefix starts every environment variable Load reads.
const EnvPrefix = raw.EnvPrefix

// Section names of the file.
const (
	sectionDestination = raw.Destination
	sectionState       = raw.State
	sectionMirrors     = raw.Mirrors
	sectionPlugins     = raw.Plugins
)

// Source says where a configuration comes from. Later layers override
// earlier ones: the file, then Env, then Sets.
type Source struct {
	// Path of the YAML (.yaml, .yml) or TOML (.toml) file. Empty: no file;
	// the configuration comes from Env and Sets alone.
	Path string
	// Env is the process environment as os.Environ returns it. Variables
	// starting with KMIRROR_ must each name a key; see EnvName.
	Env []string
	// Sets are --set flags, "key=value" each: "mirror.num.replica.fetchers=2",
	// "destination.bootstrap.servers=h:9092",
	// "mirrors.dc1-to-dc2.sasl.password=...".
	Sets []string
	// Reserved lists KMIRROR_ variables the caller uses for itself (for
	// example KMIRROR_CONFIG naming the file); Load ignores them.
	Reserved []string
	// Data, when not nil, is the configuration's content, already read (for
	// example from standard input for `--config -`); Path then only labels
	// it, and its extension (default YAML) gives the format.
	Data []byte
}

// read returns the configuration's bytes and format: Data, or the file.
func (src Source) read() ([]byte, string, error) {
	if src.Data == nil {
		return raw.ReadFile(src.Path)
	}
	format := "yaml"
	if strings.EqualFold(filepath.Ext(src.Path), ".toml") {
		format = "toml"
	}
	return src.Data, format, nil
}

// Load reads, overrides, decodes and validates a configuration. A failure to
// read the file is returned wrapped (errors.Is(err, fs.ErrNotExist) works);
// every problem with the content is returned together as *Errors.
func Load(src Source) (*Config, error) {
	data, format, err := src.read()
	if err != nil {
		return nil, err
	}
	return load(data, format, src.Path, src.Env, src.Sets, src.Reserved)
}

// Parse is Load for configuration bytes already in memory; format is "yaml"
// or "toml".
func Parse(data []byte, format string, env []string, sets []string) (*Config, error) {
	return load(data, format, "", env, sets, nil)
}

func load(data []byte, format, path string, env, sets, reserved []string) (*Config, error) {
	return loadWith(decode, data, format, path, env, sets, reserved)
}

// loadWith is load with the decoding step given: decode for the whole
// configuration, decodeForPlugins for the plugin commands. core/config/raw
// reads the file and layers the environment and the flags over it.
func loadWith(decode func(*raw.Document, *collector) *Config, data []byte, format, path string, env, sets, reserved []string) (*Config, error) {
	label := path
	if label == "" {
		label = "configuration"
	}
	if err := value.CheckSize(label, data, MaxFileBytes); err != nil {
		return nil, err
	}
	c := &collector{}
	doc, err := raw.Parse(data, format, label, c.add)
	if err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, c.err()
	}
	// The crash points of the e2e tests are armed through the environment
	// too; they are no configuration key.
	raw.ApplyEnv(doc, env, append([]string{failpoint.Env}, reserved...), envIndex, c.add)
	raw.ApplySets(doc, sets, c.add)
	if !checkCounts(doc, c) {
		return nil, c.err()
	}
	cfg := decode(doc, c)
	if err := c.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EnvName returns the environment variable that overrides a key:
// KMIRROR_<KEY> for a daemon key, KMIRROR_DESTINATION__<KEY>,
// KMIRROR_STATE__<KEY> and KMIRROR_MIRRORS__<NAME>__<KEY>, where KEY and NAME
// are upper-cased with dots and dashes turned into underscores. For mirror
// keys pass the mirror name (or "<NAME>" for documentation); for plugin keys
// (KMIRROR_PLUGINS__<NAME>__<KEY>) the plugin name.
func EnvName(scope Scope, key, mirror string) string {
	switch scope {
	case ScopePlugin:
		return EnvPrefix + "PLUGINS__" + envNorm(mirror) + "__" + envNorm(key)
	case ScopeDaemon:
		return EnvPrefix + envNorm(key)
	case ScopeState:
		return EnvPrefix + "STATE__" + envNorm(key)
	case ScopeMirror:
		return EnvPrefix + "MIRRORS__" + envNorm(mirror) + "__" + envNorm(key)
	}
	if mirror != "" {
		return EnvPrefix + "MIRRORS__" + envNorm(mirror) + "__" + envNorm(key)
	}
	return EnvPrefix + "DESTINATION__" + envNorm(key)
}

func envNorm(s string) string { return raw.EnvNorm(s) }

// envIndex maps normalised key names to key names, per section kind. It
// includes unsupported keys, so that setting one through the environment
// gets the same "not supported" reason as in the file.
var envIndex = func() raw.EnvIndex {
	idx := raw.EnvIndex{"daemon": {}, "destination": {}, "state": {}, "mirror": {}, "plugin": {}}
	add := func(scope Scope, name string) {
		switch scope {
		case ScopeDaemon:
			idx["daemon"][envNorm(name)] = name
		case ScopeState:
			idx["state"][envNorm(name)] = name
		case ScopePlugin:
			if name != "config" { // the plugin's block: its types are the plugin's
				idx["plugin"][envNorm(name)] = name
			}
		case ScopeCluster:
			idx["destination"][envNorm(name)] = name
			idx["mirror"][envNorm(name)] = name
		case ScopeMirror:
			if name != "name" { // renaming through the environment is not allowed
				idx["mirror"][envNorm(name)] = name
			}
		}
	}
	for _, k := range Keys {
		add(k.Scope, k.Name)
	}
	for _, u := range Unsupported {
		add(u.Scope, u.Name)
	}
	return idx
}()

// decode turns the document into a Config, reporting every problem.
func decode(d *raw.Document, c *collector) *Config {
	cfg := &Config{}
	failed := decodeSection(d.Daemon, "", []Scope{ScopeDaemon}, func(Scope) any { return cfg }, c)
	validateDaemon(cfg, failed, c)

	if !d.Destination.Present {
		c.add(sectionDestination, "required: the destination cluster's client keys (at least bootstrap.servers)")
	} else {
		failed := decodeSection(d.Destination, sectionDestination, []Scope{ScopeCluster}, func(Scope) any { return &cfg.Destination }, c)
		validateCluster(&cfg.Destination, sectionDestination, d.Destination, failed, c)
	}

	failed = decodeSection(d.State, sectionState, []Scope{ScopeState}, func(Scope) any { return &cfg.State }, c)
	validateState(&cfg.State, failed, c)
	decodePlugins(d, cfg, c)

	seen := map[string]int{}
	for i, sec := range d.Mirrors {
		m := Mirror{}
		label := fmt.Sprintf("mirrors[%d]", i)
		if rv, ok := sec.Vals["name"]; !ok {
			c.add(label+".name", "required: every mirror needs a name")
		} else if err := keyByName(ScopeMirror, "name").decode(&m, rv.V); err != nil {
			c.add(label+".name", reason(keyByName(ScopeMirror, "name"), rv, err))
		} else if j, dup := seen[m.Name]; dup {
			c.add(label+".name", fmt.Sprintf("duplicate mirror name %s (also mirrors[%d]); mirror names must be unique", value.Quote(m.Name), j))
		} else {
			seen[m.Name] = i
			label = fmt.Sprintf("mirrors[%s]", m.Name)
		}
		rest := raw.Section{Vals: map[string]raw.Value{}, Present: true}
		for k, v := range sec.Vals {
			if k != "name" {
				rest.Vals[k] = v
			}
		}
		failed := decodeSection(rest, label, []Scope{ScopeCluster, ScopeMirror}, func(s Scope) any {
			if s == ScopeCluster {
				return &m.Source
			}
			return &m
		}, c)
		validateCluster(&m.Source, label, rest, failed, c)
		cfg.Mirrors = append(cfg.Mirrors, m)
	}
	validatePluginRefs(cfg, c)
	return cfg
}

// decodeSection applies defaults and then the section's values to the
// targets of the given scopes. It returns the keys that failed to decode,
// so that cross-key checks do not pile onto them.
func decodeSection(sec raw.Section, prefix string, scopes []Scope, target func(Scope) any, c *collector) map[string]bool {
	failed := map[string]bool{}
	allowed := map[string]*Key{}
	for i := range Keys {
		k := &Keys[i]
		if !hasScope(scopes, k.Scope) || (k.Scope == ScopeMirror && k.Name == "name") {
			continue
		}
		allowed[k.Name] = k
		if k.HasDefault {
			if err := k.decode(target(k.Scope), k.Default); err != nil {
				panic(fmt.Sprintf("config: default of %s does not decode: %v", k.Name, err))
			}
		}
	}
	for _, name := range sortedKeys(sec.Vals) {
		if _, ok := allowed[name]; !ok {
			failed[name] = true
			why := "unknown key"
			if !c.full() { // wording the reason (a "did you mean") costs
				why = withOrigin(unknownReason(name, scopes), sec.Vals[name])
			}
			c.add(keyPath(prefix, name), why)
		}
	}
	for i := range Keys {
		k := &Keys[i]
		if allowed[k.Name] != k {
			continue
		}
		rv, ok := sec.Vals[k.Name]
		if !ok {
			if k.Required {
				failed[k.Name] = true
				c.add(keyPath(prefix, k.Name), "required, and not set")
			}
			continue
		}
		if err := k.decode(target(k.Scope), rv.V); err != nil {
			failed[k.Name] = true
			var le *value.ListError
			if errors.As(err, &le) && !k.Secret {
				// One problem per bad entry, so that all are fixed in one pass.
				for _, e := range le.Entries {
					c.add(fmt.Sprintf("%s[%d]", keyPath(prefix, k.Name), e.Index), withOrigin(e.Err.Error(), rv))
				}
				continue
			}
			c.add(keyPath(prefix, k.Name), reason(k, rv, err))
		}
	}
	return failed
}

func hasScope(scopes []Scope, s Scope) bool {
	for _, x := range scopes {
		if x == s {
			return true
		}
	}
	return false
}

func keyPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// reason words a decode error, never showing a secret value.
func reason(k *Key, rv raw.Value, err error) string {
	msg := err.Error()
	if k.Secret {
		var te *value.TypeError
		if errors.As(err, &te) {
			msg = te.Redacted()
		} else {
			msg = "invalid value"
		}
	}
	return withOrigin(msg, rv)
}

func withOrigin(msg string, rv raw.Value) string {
	if rv.From == "" {
		return msg
	}
	return msg + " (from " + rv.From + ")"
}

func keyByName(scope Scope, name string) *Key {
	for i := range Keys {
		if Keys[i].Scope == scope && Keys[i].Name == name {
			return &Keys[i]
		}
	}
	panic("config: no key " + name + " in scope " + scope.String())
}

// unknownReason explains an unknown key: not supported, in the wrong
// section, or a likely typo.
func unknownReason(name string, scopes []Scope) string {
	for _, u := range Unsupported {
		if u.Name == name && hasScope(scopes, u.Scope) {
			return "not supported: " + u.Reason
		}
	}
	for _, k := range Keys {
		if k.Name != name || hasScope(scopes, k.Scope) {
			continue
		}
		switch k.Scope {
		case ScopeDaemon:
			return "unknown key here: " + name + " is a daemon-wide key; set it at the top level of the file"
		case ScopeCluster:
			return "unknown key here: " + name + " is a client key; set it under destination or in a mirrors entry"
		case ScopeMirror:
			return "unknown key here: " + name + " is a per-mirror key; set it in a mirrors entry"
		case ScopeState:
			return "unknown key here: " + name + " belongs under state"
		case ScopePlugin:
			return "unknown key here: " + name + " belongs in a plugins entry"
		}
	}
	if hasScope(scopes, ScopeDaemon) {
		for _, sec := range []string{sectionDestination, sectionState, sectionMirrors, sectionPlugins} {
			if strings.HasPrefix(name, sec+".") {
				return "unknown key: nest it under the " + sec + " section instead of writing " + value.Quote(name) + " as one key"
			}
		}
		if head, tail, ok := strings.Cut(name, "."); ok {
			for _, sec := range []string{sectionDestination, sectionState} {
				if head != sec && raw.Distance(head, sec) <= 2 {
					return "unknown key; did you mean " + sec + "." + tail + "?"
				}
			}
		}
	}
	var candidates []string
	for _, k := range Keys {
		if hasScope(scopes, k.Scope) {
			candidates = append(candidates, k.Name)
		}
	}
	if hasScope(scopes, ScopeDaemon) {
		candidates = append(candidates, sectionDestination, sectionState, sectionMirrors, sectionPlugins)
	}
	if s := raw.Suggest(name, candidates); s != "" {
		return "unknown key; did you mean " + s + "?"
	}
	return "unknown key"
}
