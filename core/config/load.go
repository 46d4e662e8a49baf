package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"

	"github.com/kmirror/kmirror/core/failpoint"

	"github.com/kmirror/kmirror/core/config/value"
)

// EnvPrefix starts every environment variable Load reads.
const EnvPrefix = "KMIRROR_"

// Section names of the file.
const (
	sectionDestination = "destination"
	sectionState       = "state"
	sectionMirrors     = "mirrors"
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
}

// Load reads, overrides, decodes and validates a configuration. A failure to
// read the file is returned wrapped (errors.Is(err, fs.ErrNotExist) works);
// every problem with the content is returned together as *Errors.
func Load(src Source) (*Config, error) {
	data, format, err := readSource(src)
	if err != nil {
		return nil, err
	}
	return load(data, format, src.Path, src.Env, src.Sets, src.Reserved)
}

// readSource reads src's file, if any, and says its format.
func readSource(src Source) (data []byte, format string, err error) {
	if src.Path == "" {
		return nil, "yaml", nil
	}
	if format, err = formatOf(src.Path); err != nil {
		return nil, "", err
	}
	if data, err = os.ReadFile(src.Path); err != nil {
		return nil, "", fmt.Errorf("read configuration file: %w", err)
	}
	return data, format, nil
}

// Parse is Load for configuration bytes already in memory; format is "yaml"
// or "toml".
func Parse(data []byte, format string, env []string, sets []string) (*Config, error) {
	return load(data, format, "", env, sets, nil)
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

// rawVal is one value before decoding, with where it came from.
type rawVal struct {
	v    any
	from string // "" for the file, else the environment variable or "--set"
}

// section is the flattened keys of one part of the file.
type section struct {
	vals    map[string]rawVal
	present bool
}

func newSection() section { return section{vals: map[string]rawVal{}} }

// document is the file split into its parts, before decoding.
type document struct {
	daemon, destination, state section
	mirrors                    []section
	plugins                    []pluginSection
}

func load(data []byte, format, path string, env, sets, reserved []string) (*Config, error) {
	return loadWith(decode, data, format, path, env, sets, reserved)
}

// loadWith is load with the decoding step given: decode for the whole
// configuration, decodeForPlugins for the plugin commands.
func loadWith(decode func(*document, *collector) *Config, data []byte, format, path string, env, sets, reserved []string) (*Config, error) {
	var parser koanf.Parser
	switch strings.ToLower(format) {
	case "yaml", "yml":
		parser = yaml.Parser()
	case "toml":
		parser = toml.Parser()
	default:
		return nil, fmt.Errorf("configuration format %q is not yaml or toml", format)
	}
	label := path
	if label == "" {
		label = "configuration"
	}
	c := &collector{}
	// The delimiter is not "." so that Kafka-style keys such as
	// bootstrap.servers stay whole.
	k := koanf.NewWithConf(koanf.Conf{Delim: "/"})
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := k.Load(rawbytes.Provider(data), parser); err != nil {
			c.add(label, fmt.Sprintf("cannot parse %s: %v", strings.ToUpper(format), err))
			return nil, c.err()
		}
	}
	doc := split(k.Raw(), c)
	applyEnv(doc, env, reserved, c)
	applySets(doc, sets, c)
	cfg := decode(doc, c)
	if err := c.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// split sorts the top level of the file into sections. Nested maps below a
// section (or at the top level, outside sections) are flattened with "."
// so that TOML's dotted keys (bootstrap.servers = "…" is a nested table in
// TOML) and quoted keys mean the same.
func split(raw map[string]any, c *collector) *document {
	d := &document{daemon: newSection(), destination: newSection(), state: newSection()}
	for _, k := range sortedKeys(raw) {
		v := raw[k]
		switch k {
		case sectionDestination, sectionState:
			sec := &d.destination
			if k == sectionState {
				sec = &d.state
			}
			sec.present = true
			switch m := v.(type) {
			case map[string]any:
				flatten(m, "", k, sec.vals, c)
			case nil:
			default:
				c.add(k, "expected a map of keys, got "+value.Describe(v, false))
			}
		case sectionPlugins:
			d.plugins = splitPlugins(v, c)
		case sectionMirrors:
			list, ok := v.([]any)
			if !ok && v != nil {
				c.add(k, "expected a list of mirrors, got "+value.Describe(v, false))
				continue
			}
			for i, it := range list {
				sec := newSection()
				sec.present = true
				m, ok := it.(map[string]any)
				if !ok {
					c.add(fmt.Sprintf("mirrors[%d]", i), "expected a map of keys, got "+value.Describe(it, false))
				} else {
					flatten(m, "", fmt.Sprintf("mirrors[%d]", i), sec.vals, c)
				}
				d.mirrors = append(d.mirrors, sec)
			}
		default:
			if m, ok := v.(map[string]any); ok {
				flatten(m, k, "", d.daemon.vals, c)
			} else if v != nil {
				if _, dup := d.daemon.vals[k]; dup {
					c.add(k, "given twice (once as a dotted name and once nested); keep one")
					continue
				}
				d.daemon.vals[k] = rawVal{v: v}
			}
		}
	}
	return d
}

// flatten copies the leaves of m into out under dotted names. A name that
// is reached twice (written once whole and once nested, e.g.
// "mirror.topics.include" next to mirror: {topics.include: …}) is an error:
// which one wins would otherwise depend on map order.
func flatten(m map[string]any, prefix, section string, out map[string]rawVal, c *collector) {
	for _, k := range sortedKeys(m) {
		v := m[k]
		if prefix != "" {
			k = prefix + "." + k
		}
		switch t := v.(type) {
		case map[string]any:
			flatten(t, k, section, out, c)
		case nil:
			// A key with no value ("key:" in YAML) is treated as unset.
		default:
			if _, dup := out[k]; dup {
				c.add(keyPath(section, k), "given twice (once as a dotted name and once nested); keep one")
				continue
			}
			out[k] = rawVal{v: v}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// mirrorName returns the name a mirror section declares, if it is a string.
func (s section) mirrorName() (string, bool) {
	rv, ok := s.vals["name"]
	if !ok {
		return "", false
	}
	name, ok := rv.v.(string)
	return name, ok
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

func envNorm(s string) string {
	if s == "<NAME>" {
		return s
	}
	return strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(s))
}

// envIndex maps normalised key names to key names, per section kind. It
// includes unsupported keys, so that setting one through the environment
// gets the same "not supported" reason as in the file.
var envIndex = func() map[string]map[string]string {
	idx := map[string]map[string]string{"daemon": {}, "destination": {}, "state": {}, "mirror": {}, "plugin": {}}
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

func applyEnv(d *document, env, reserved []string, c *collector) {
	// The crash points of the e2e tests are armed through the environment
	// too; they are no configuration key.
	skip := map[string]bool{failpoint.Env: true}
	for _, r := range reserved {
		skip[r] = true
	}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || skip[name] {
			continue
		}
		rest := strings.TrimPrefix(name, EnvPrefix)
		var (
			kind, norm string
			sec        *section
		)
		switch {
		case strings.HasPrefix(rest, "DESTINATION__"):
			kind, norm, sec = "destination", strings.TrimPrefix(rest, "DESTINATION__"), &d.destination
		case strings.HasPrefix(rest, "STATE__"):
			kind, norm, sec = "state", strings.TrimPrefix(rest, "STATE__"), &d.state
		case strings.HasPrefix(rest, "PLUGINS__"):
			body := strings.TrimPrefix(rest, "PLUGINS__")
			i := strings.LastIndex(body, "__")
			if i <= 0 {
				c.add(name, "unknown environment variable: expected KMIRROR_PLUGINS__<NAME>__<KEY>")
				continue
			}
			kind, norm = "plugin", body[i+2:]
			found := findPlugin(d, body[:i], true)
			if len(found) != 1 {
				if len(found) == 0 {
					c.add(name, fmt.Sprintf("no plugin matches %s; the plugins are %s (upper-case the name and replace '-' with '_'; the environment can override plugins of the file, not add them)", body[:i], listOrNone(pluginNames(d))))
				} else {
					c.add(name, fmt.Sprintf("%s matches several plugins; rename one so that their upper-cased names differ", body[:i]))
				}
				continue
			}
			sec = found[0]
		case strings.HasPrefix(rest, "MIRRORS__"):
			// Key names never hold "__", so the key is after the last one;
			// everything before it is the (normalised) mirror name.
			body := strings.TrimPrefix(rest, "MIRRORS__")
			i := strings.LastIndex(body, "__")
			if i <= 0 {
				c.add(name, "unknown environment variable: expected KMIRROR_MIRRORS__<NAME>__<KEY>")
				continue
			}
			kind, norm = "mirror", body[i+2:]
			var ok bool
			if sec, ok = envMirror(d, name, body[:i], c); !ok {
				continue
			}
		default:
			kind, norm, sec = "daemon", rest, &d.daemon
		}
		key, ok := envIndex[kind][norm]
		if !ok {
			reason := "unknown environment variable: it names no configuration key (docs/config.md lists each key's variable)"
			if norm == "CONFIG" && kind == "plugin" {
				reason = "a plugin's config block cannot be overridden: only the plugin knows the types of its keys; change it in the file"
			} else if norm == "NAME" && kind == "mirror" {
				reason = "a mirror cannot be renamed through the environment; change name in the file"
			} else if s := suggest(norm, sortedKeys(envIndex[kind])); s != "" {
				reason += "; did you mean " + envPrefixFor(name, norm) + s + "?"
			}
			c.add(name, reason)
			continue
		}
		sec.present = true
		sec.vals[key] = rawVal{v: value, from: name}
	}
}

// envPrefixFor returns the part of an environment variable name before its
// key part.
func envPrefixFor(name, norm string) string { return strings.TrimSuffix(name, norm) }

// envMirror finds the mirror whose normalised name is norm.
func envMirror(d *document, variable, norm string, c *collector) (*section, bool) {
	var found []int
	var names []string
	for i, m := range d.mirrors {
		name, ok := m.mirrorName()
		if !ok {
			continue
		}
		names = append(names, name)
		if envNorm(name) == norm {
			found = append(found, i)
		}
	}
	switch len(found) {
	case 1:
		return &d.mirrors[found[0]], true
	case 0:
		if len(names) == 0 {
			c.add(variable, fmt.Sprintf("no mirror matches %s: the configuration has no mirrors (the environment can override mirrors of the file, not add them)", norm))
		} else {
			c.add(variable, fmt.Sprintf("no mirror matches %s; the mirrors are %s (upper-case the name and replace '-' with '_')", norm, strings.Join(names, ", ")))
		}
	default:
		var both []string
		for _, i := range found {
			n, _ := d.mirrors[i].mirrorName()
			both = append(both, n)
		}
		c.add(variable, fmt.Sprintf("%s matches several mirrors (%s); rename one so that their upper-cased names differ", norm, strings.Join(both, ", ")))
	}
	return nil, false
}

func applySets(d *document, sets []string, c *collector) {
	for i, s := range sets {
		key, val, ok := strings.Cut(s, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			// The text may be a secret typed without its key: do not echo it.
			c.add("--set", fmt.Sprintf("flag %d: expected key=value", i+1))
			continue
		}
		rv := rawVal{v: val, from: "--set"}
		switch {
		case strings.HasPrefix(key, sectionDestination+"."):
			d.destination.present = true
			d.destination.vals[strings.TrimPrefix(key, sectionDestination+".")] = rv
		case strings.HasPrefix(key, sectionState+"."):
			d.state.present = true
			d.state.vals[strings.TrimPrefix(key, sectionState+".")] = rv
		case strings.HasPrefix(key, sectionPlugins+"."):
			name, k, ok := strings.Cut(strings.TrimPrefix(key, sectionPlugins+"."), ".")
			if !ok || name == "" || k == "" {
				c.add("--set", fmt.Sprintf("flag %d: %s: expected plugins.<name>.<key>=value", i+1, value.Quote(key)))
				continue
			}
			if k == "config" || strings.HasPrefix(k, "config.") {
				c.add("--set", fmt.Sprintf("flag %d: %s: a plugin's config block cannot be overridden (only the plugin knows the types of its keys); change it in the file", i+1, value.Quote(key)))
				continue
			}
			found := findPlugin(d, name, false)
			if len(found) == 0 {
				c.add("--set", fmt.Sprintf("flag %d: %s: no plugin named %s in the configuration (--set can override plugins, not add them)", i+1, value.Quote(key), value.Quote(name)))
				continue
			}
			found[0].vals[k] = rv
		case strings.HasPrefix(key, sectionMirrors+"."):
			name, k, ok := strings.Cut(strings.TrimPrefix(key, sectionMirrors+"."), ".")
			if !ok || name == "" || k == "" {
				c.add("--set", fmt.Sprintf("flag %d: %s: expected mirrors.<name>.<key>=value", i+1, value.Quote(key)))
				continue
			}
			if k == "name" {
				c.add("--set", fmt.Sprintf("flag %d: %s: a mirror cannot be renamed with --set; change name in the file", i+1, value.Quote(key)))
				continue
			}
			sec := setMirror(d, name)
			if sec == nil {
				c.add("--set", fmt.Sprintf("flag %d: %s: no mirror named %s in the configuration (--set can override mirrors, not add them)", i+1, value.Quote(key), value.Quote(name)))
				continue
			}
			sec.vals[k] = rv
		default:
			d.daemon.vals[key] = rv
		}
	}
}

func setMirror(d *document, name string) *section {
	for i := range d.mirrors {
		if n, ok := d.mirrors[i].mirrorName(); ok && n == name {
			return &d.mirrors[i]
		}
	}
	return nil
}

// decode turns the document into a Config, reporting every problem.
func decode(d *document, c *collector) *Config {
	cfg := &Config{}
	failed := decodeSection(d.daemon, "", []Scope{ScopeDaemon}, func(Scope) any { return cfg }, c)
	validateDaemon(cfg, failed, c)

	if !d.destination.present {
		c.add(sectionDestination, "required: the destination cluster's client keys (at least bootstrap.servers)")
	} else {
		failed := decodeSection(d.destination, sectionDestination, []Scope{ScopeCluster}, func(Scope) any { return &cfg.Destination }, c)
		validateCluster(&cfg.Destination, sectionDestination, d.destination, failed, c)
	}

	failed = decodeSection(d.state, sectionState, []Scope{ScopeState}, func(Scope) any { return &cfg.State }, c)
	validateState(&cfg.State, failed, c)
	decodePlugins(d, cfg, c)

	seen := map[string]int{}
	for i, sec := range d.mirrors {
		m := Mirror{}
		label := fmt.Sprintf("mirrors[%d]", i)
		if rv, ok := sec.vals["name"]; !ok {
			c.add(label+".name", "required: every mirror needs a name")
		} else if err := keyByName(ScopeMirror, "name").decode(&m, rv.v); err != nil {
			c.add(label+".name", reason(keyByName(ScopeMirror, "name"), rv, err))
		} else if j, dup := seen[m.Name]; dup {
			c.add(label+".name", fmt.Sprintf("duplicate mirror name %s (also mirrors[%d]); mirror names must be unique", value.Quote(m.Name), j))
		} else {
			seen[m.Name] = i
			label = fmt.Sprintf("mirrors[%s]", m.Name)
		}
		rest := section{vals: map[string]rawVal{}, present: true}
		for k, v := range sec.vals {
			if k != "name" {
				rest.vals[k] = v
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
func decodeSection(sec section, prefix string, scopes []Scope, target func(Scope) any, c *collector) map[string]bool {
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
	for _, name := range sortedKeys(sec.vals) {
		if _, ok := allowed[name]; !ok {
			failed[name] = true
			rv := sec.vals[name]
			c.add(keyPath(prefix, name), withOrigin(unknownReason(name, scopes), rv))
		}
	}
	for i := range Keys {
		k := &Keys[i]
		if allowed[k.Name] != k {
			continue
		}
		rv, ok := sec.vals[k.Name]
		if !ok {
			if k.Required {
				failed[k.Name] = true
				c.add(keyPath(prefix, k.Name), "required, and not set")
			}
			continue
		}
		if err := k.decode(target(k.Scope), rv.v); err != nil {
			failed[k.Name] = true
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
func reason(k *Key, rv rawVal, err error) string {
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

func withOrigin(msg string, rv rawVal) string {
	if rv.from == "" {
		return msg
	}
	return msg + " (from " + rv.from + ")"
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
				if head != sec && levenshtein(head, sec) <= 2 {
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
	if s := suggest(name, candidates); s != "" {
		return "unknown key; did you mean " + s + "?"
	}
	return "unknown key"
}

// suggest returns the candidate closest to s, if it is close enough to be a
// typo.
func suggest(s string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := levenshtein(strings.ToLower(s), strings.ToLower(c))
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	limit := 2
	if l := len(s) / 5; l > limit {
		limit = l
	}
	if bestDist >= 0 && bestDist <= limit {
		return best
	}
	return ""
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
