package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kmirror/kmirror/sdk/internal/lazy"
)

// Errors of plugin configuration. Both travel over the RPC.
var (
	// ErrInvalidConfig: a plugin's configuration does not fit its schema,
	// or the plugin refused a value. The error is a *ConfigError naming
	// each key.
	ErrInvalidConfig = errors.New("plugin: invalid configuration")
	// ErrNotConfigured: the plugin was used before the host configured it.
	ErrNotConfigured = lazy.ErrNotConfigured
)

// FieldType is the type of one configuration key.
type FieldType string

// The configuration key types.
const (
	FieldString FieldType = "string"
	FieldInt    FieldType = "int"
	FieldBool   FieldType = "bool"
	// FieldDuration is a Go duration string such as "30s" or "1h30m".
	FieldDuration   FieldType = "duration"
	FieldStringList FieldType = "string_list"
	// FieldObject is any JSON object.
	FieldObject FieldType = "object"
)

var fieldTypes = []FieldType{FieldString, FieldInt, FieldBool, FieldDuration, FieldStringList, FieldObject}

var fieldName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)

// Field is one key a plugin accepts in its `config:` block.
type Field struct {
	Name     string
	Type     FieldType
	Required bool
	// Secret: the host never logs or prints the value.
	Secret bool
	// Default is the value used when the key is absent, as text
	// (documentation only: the plugin applies its own default).
	Default     string
	Description string
}

// Schema is the configuration a plugin declares. An empty schema: the
// plugin takes no configuration, and any key is an error.
type Schema []Field

// Check reports a schema that a host cannot use: a bad or repeated name, an
// unknown type.
func (s Schema) Check() error {
	seen := map[string]bool{}
	for i, f := range s {
		switch {
		case !fieldName.MatchString(f.Name):
			return fmt.Errorf("plugin: schema field %d: name %q does not match %s", i, f.Name, fieldName)
		case seen[f.Name]:
			return fmt.Errorf("plugin: schema field %q declared twice", f.Name)
		case !slices.Contains(fieldTypes, f.Type):
			return fmt.Errorf("plugin: schema field %q: unknown type %q (known: %v)", f.Name, f.Type, fieldTypes)
		}
		seen[f.Name] = true
	}
	return nil
}

// Problem is one thing wrong with one key.
type Problem struct {
	Key    string
	Reason string
}

// ConfigError lists what is wrong with a plugin's configuration, key by
// key. It matches ErrInvalidConfig. Its text never holds a value.
type ConfigError struct {
	// Prefix is put before each key in the text (for example
	// "plugins.vault.config"); empty for none.
	Prefix   string
	Problems []Problem
}

func (e *ConfigError) Error() string {
	parts := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		key := p.Key
		if e.Prefix != "" {
			key = e.Prefix + "." + key
		}
		parts = append(parts, key+": "+p.Reason)
	}
	return "invalid plugin configuration: " + strings.Join(parts, "; ")
}

// Is makes a ConfigError match ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// WithPrefix returns a copy of e whose keys read prefix.<key>.
func (e *ConfigError) WithPrefix(prefix string) *ConfigError {
	c := *e
	c.Prefix = prefix
	return &c
}

// Validate checks a configuration block against the schema and returns a
// *ConfigError naming every unknown, missing or mistyped key, or nil.
func (s Schema) Validate(cfg Config) error {
	var problems []Problem
	known := map[string]Field{}
	for _, f := range s {
		known[f.Name] = f
	}
	for _, k := range sortedKeys(cfg) {
		f, ok := known[k]
		if !ok {
			reason := "unknown key"
			if len(s) == 0 {
				reason += " (this plugin takes no configuration)"
			} else {
				reason += fmt.Sprintf(" (known: %s)", strings.Join(s.names(), ", "))
			}
			problems = append(problems, Problem{Key: k, Reason: reason})
			continue
		}
		if reason := checkType(f.Type, cfg[k]); reason != "" {
			problems = append(problems, Problem{Key: k, Reason: reason})
		}
	}
	for _, f := range s {
		if _, ok := cfg[f.Name]; f.Required && !ok {
			problems = append(problems, Problem{Key: f.Name, Reason: "required"})
		}
	}
	if len(problems) > 0 {
		return &ConfigError{Problems: problems}
	}
	return nil
}

func (s Schema) names() []string {
	out := make([]string, 0, len(s))
	for _, f := range s {
		out = append(out, f.Name)
	}
	sort.Strings(out)
	return out
}

// checkType returns why v is not of type t, or "". It never quotes v.
func checkType(t FieldType, v any) string {
	switch t {
	case FieldString:
		if _, ok := v.(string); !ok {
			return "must be a string"
		}
	case FieldInt:
		switch n := v.(type) {
		case int, int32, int64:
		case float64:
			if n != math.Trunc(n) || math.IsInf(n, 0) {
				return "must be a whole number"
			}
		case json.Number:
			if _, err := n.Int64(); err != nil {
				return "must be a whole number"
			}
		default:
			return "must be a whole number"
		}
	case FieldBool:
		if _, ok := v.(bool); !ok {
			return "must be true or false"
		}
	case FieldDuration:
		s, ok := v.(string)
		if !ok {
			return `must be a duration such as "30s"`
		}
		if _, err := time.ParseDuration(s); err != nil {
			return `must be a duration such as "30s" or "1h30m"`
		}
	case FieldStringList:
		switch l := v.(type) {
		case []string:
		case []any:
			for i, e := range l {
				if _, ok := e.(string); !ok {
					return fmt.Sprintf("must be a list of strings (item %d is not)", i)
				}
			}
		default:
			return "must be a list of strings"
		}
	case FieldObject:
		if _, ok := v.(map[string]any); !ok {
			return "must be an object"
		}
	}
	return ""
}

// Config is a plugin's `config:` block, as decoded from JSON (numbers are
// float64 or json.Number, lists []any, objects map[string]any).
type Config map[string]any

// Decode fills v, a pointer to a struct with json tags, from c; a key v
// does not have is an error.
func (c Config) Decode(v any) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("plugin: encode configuration: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return nil
}

func sortedKeys(c Config) []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
