// Package value parses the values of configuration keys: what a YAML or
// TOML file yields (strings, integers, floats, booleans, lists) and the
// strings that environment variables and --set flags carry, turned into
// typed values and checked (ranges, enums, durations in milliseconds,
// socket buffer sizes, host:port lists, URLs, ACL include rules). A
// [Codec] also renders a value back to file syntax and describes its type
// and constraint for the reference. core/config binds one codec to each key
// of its declaration table.
//
// The files keys name (and the configuration file itself) are read with
// [ReadFile]: regular files only, each kind with a size limit.
//
// Messages quote the value at fault; a [TypeError] can also be worded
// without it ([TypeError.Redacted]) for a secret key.
package value

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/core/aclrule"
	"github.com/kmirror/kmirror/sdk/auth"
)

// Codec parses one type of value. Parse accepts what a YAML or TOML file
// yields (string, integers, floats, bools, lists, maps) and the strings that
// environment variables and --set carry.
type Codec[V any] struct {
	Type       string                   // human-readable type, for the reference
	Constraint string                   // human-readable range or allowed values, for the reference
	Values     []string                 // the allowed values of an enum
	Parse      func(raw any) (V, error) // check and convert a raw value
	Format     func(V) string           // render a value back to file syntax
}

// TypeError reports a value of the wrong type. Its message quotes the value
// unless the key is secret (see Redacted).
type TypeError struct {
	want string
	raw  any
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("expected %s, got %s", e.want, Describe(e.raw, true))
}

// Redacted words the error without the value, for a secret key.
func (e *TypeError) Redacted() string {
	return fmt.Sprintf("expected %s, got %s", e.want, Describe(e.raw, false))
}

// Describe renders a raw value for an error message: the value itself when
// show is true, only its kind otherwise.
func Describe(raw any, show bool) string {
	kind := "a value"
	switch v := raw.(type) {
	case string:
		if show {
			return Quote(v)
		}
		kind = "a string"
	case bool:
		kind = "a boolean"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		kind = "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	case nil:
		return "nothing"
	}
	if show {
		return fmt.Sprintf("%v (%s)", raw, kind)
	}
	return kind
}

// Quote quotes s for a message, shortening very long values.
func Quote(s string) string {
	const max = 200
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}

// toInt accepts an integer, an integral float, or a decimal string.
func toInt(raw any) (int64, error) {
	switch v := raw.(type) {
	case int:
		return int64(v), nil
	case int64:
		return v, nil
	case uint64:
		if v > math.MaxInt64 {
			return 0, fmt.Errorf("%d is too large (the maximum is %d)", v, int64(math.MaxInt64))
		}
		return int64(v), nil
	case float64:
		if v == math.Trunc(v) && v >= math.MinInt64 && v < math.MaxInt64 {
			return int64(v), nil
		}
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err == nil {
			return n, nil
		}
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("%s is out of range for a 64-bit integer", Quote(v))
		}
	}
	return 0, &TypeError{want: "an integer", raw: raw}
}

func toString(raw any) (string, error) {
	if s, ok := raw.(string); ok {
		return s, nil
	}
	switch raw.(type) {
	case int, int64, uint64, float64, bool:
		return "", fmt.Errorf("%w (quote the value in the file)", &TypeError{want: "a string", raw: raw})
	}
	return "", &TypeError{want: "a string", raw: raw}
}

// MaxListEntries caps the entries of one list value (core/config's
// documented limit): a regex list is compiled into one expression, and a
// list of millions of entries is a mistake, not a configuration.
const MaxListEntries = 1000

// ParseList accepts a comma-separated string or a list of strings. A string is
// split on commas; a list gives one entry per item, taken whole (so a regex
// may hold a comma). Entries are trimmed; empty entries are an error, since
// "a,,b" or a trailing comma is almost always an editing slip. Every bad
// entry is reported, together, as a *ListError; more than MaxListEntries
// entries are refused at once.
func ParseList(raw any) ([]string, error) {
	var items []any
	switch v := raw.(type) {
	case string:
		if strings.TrimSpace(v) == "" {
			return nil, nil
		}
		if n := strings.Count(v, ",") + 1; n > MaxListEntries {
			return nil, tooMany(n)
		}
		for _, s := range strings.Split(v, ",") {
			items = append(items, s)
		}
	case []any:
		if len(v) > MaxListEntries {
			return nil, tooMany(len(v))
		}
		items = v
	default:
		return nil, &TypeError{want: "a comma-separated string or a list", raw: raw}
	}
	out := make([]string, 0, len(items))
	var errs ListError
	for i, it := range items {
		s, ok := it.(string)
		switch {
		case !ok:
			errs.add(i, &TypeError{want: "a string", raw: it})
		case strings.TrimSpace(s) == "":
			errs.add(i, errors.New("empty (remove the extra comma)"))
		}
		out = append(out, strings.TrimSpace(s))
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return out, nil
}

func tooMany(n int) error {
	return fmt.Errorf("%d entries, more than the limit of %d per key", n, MaxListEntries)
}

// EntryError is one bad entry of a list value.
type EntryError struct {
	Index int // position in the list, from 0
	Err   error
}

func (e *EntryError) Error() string { return fmt.Sprintf("entry %d: %v", e.Index+1, e.Err) }

// Unwrap returns Err.
func (e *EntryError) Unwrap() error { return e.Err }

// ListError is every bad entry of one list value, in order. core/config
// reports each as a problem of its own, named key[index].
type ListError struct {
	Entries []*EntryError
}

func (e *ListError) Error() string {
	parts := make([]string, len(e.Entries))
	for i, x := range e.Entries {
		parts[i] = x.Error()
	}
	return strings.Join(parts, "; ")
}

// Unwrap returns the entries' errors, so that errors.Is and errors.As see
// each of them.
func (e *ListError) Unwrap() []error {
	out := make([]error, len(e.Entries))
	for i, x := range e.Entries {
		out[i] = x
	}
	return out
}

func (e *ListError) add(i int, err error) {
	e.Entries = append(e.Entries, &EntryError{Index: i, Err: err})
}

func (e *ListError) err() error {
	if len(e.Entries) == 0 {
		return nil
	}
	return e
}

func formatInt[T int | int64](v T) string { return strconv.FormatInt(int64(v), 10) }

// Int is a 32-bit integer (Kafka's int) in [min, max].
func Int(min, max int64) Codec[int] {
	return Codec[int]{
		Type:       "int",
		Constraint: rangeText(min, max),
		Parse: func(raw any) (int, error) {
			n, err := toInt(raw)
			if err != nil {
				return 0, err
			}
			if n < min || n > max {
				return 0, fmt.Errorf("%d is out of range: must be %s", n, rangeText(min, max))
			}
			return int(n), nil
		},
		Format: formatInt[int],
	}
}

// Buffer is a socket buffer size: -1 (use the OS default) or positive.
func Buffer() Codec[int] {
	return Codec[int]{
		Type:       "int (bytes)",
		Constraint: "-1 (OS default) or 1 … 2147483647",
		Parse: func(raw any) (int, error) {
			n, err := toInt(raw)
			if err != nil {
				return 0, err
			}
			if n != -1 && (n < 1 || n > math.MaxInt32) {
				return 0, fmt.Errorf("%d is out of range: must be -1 (OS default) or 1 … 2147483647", n)
			}
			return int(n), nil
		},
		Format: formatInt[int],
	}
}

// Bool is true or false (a YAML boolean, or the words in any case, as
// an environment variable or a flag gives them).
func Bool() Codec[bool] {
	return Codec[bool]{
		Type:       "boolean",
		Constraint: "true, false",
		Parse: func(raw any) (bool, error) {
			switch v := raw.(type) {
			case bool:
				return v, nil
			case string:
				switch strings.ToLower(strings.TrimSpace(v)) {
				case "true":
					return true, nil
				case "false":
					return false, nil
				}
			}
			return false, &TypeError{want: "true or false", raw: raw}
		},
		Format: strconv.FormatBool,
	}
}

// Long is a 64-bit integer (Kafka's long) at least min.
func Long(min int64) Codec[int64] {
	return Codec[int64]{
		Type:       "long",
		Constraint: rangeText(min, math.MaxInt64),
		Parse: func(raw any) (int64, error) {
			n, err := toInt(raw)
			if err != nil {
				return 0, err
			}
			if n < min {
				return 0, fmt.Errorf("%d is out of range: must be %s", n, rangeText(min, math.MaxInt64))
			}
			return n, nil
		},
		Format: formatInt[int64],
	}
}

// Ms is a duration written in milliseconds, at least min ms.
func Ms(min int64) Codec[time.Duration] {
	const max = math.MaxInt64 / int64(time.Millisecond)
	return Codec[time.Duration]{
		Type:       "long (ms)",
		Constraint: rangeText(min, max),
		Parse: func(raw any) (time.Duration, error) {
			n, err := toInt(raw)
			if err != nil {
				return 0, err
			}
			if n < min || n > max {
				return 0, fmt.Errorf("%d is out of range: must be %s milliseconds", n, rangeText(min, max))
			}
			return time.Duration(n) * time.Millisecond, nil
		},
		Format: func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) },
	}
}

func rangeText(min, max int64) string {
	switch {
	case min == 0 && max >= math.MaxInt32:
		return "≥ 0"
	case min == 1 && max >= math.MaxInt32:
		return "≥ 1 (must be positive)"
	case max >= math.MaxInt32:
		return fmt.Sprintf("≥ %d", min)
	}
	return fmt.Sprintf("%d … %d", min, max)
}

// String is free text, optionally checked.
func String(typ string, check func(string) error) Codec[string] {
	return Codec[string]{
		Type: typ,
		Parse: func(raw any) (string, error) {
			s, err := toString(raw)
			if err != nil {
				return "", err
			}
			if check != nil {
				if err := check(s); err != nil {
					return "", err
				}
			}
			return s, nil
		},
		Format: func(s string) string { return s },
	}
}

// Secret is a secret string.
func Secret() Codec[auth.Secret] {
	return Codec[auth.Secret]{
		Type: "string (secret)",
		Parse: func(raw any) (auth.Secret, error) {
			s, err := toString(raw)
			if err != nil {
				return auth.Secret{}, err
			}
			return auth.NewSecret(s), nil
		},
		Format: func(s auth.Secret) string { return s.String() },
	}
}

// Enum accepts one of values, ignoring case, and stores the canonical
// spelling. rejected maps known-but-unsupported values (upper case) to the
// reason they are refused.
func Enum(values []string, rejected map[string]string) Codec[string] {
	shown := make([]string, len(values))
	for i, v := range values {
		shown[i] = v
		if v == "" {
			shown[i] = `"" (empty)`
		}
	}
	list := strings.Join(shown, ", ")
	return Codec[string]{
		Type:       "enum",
		Constraint: list,
		Values:     values,
		Parse: func(raw any) (string, error) {
			s, err := toString(raw)
			if err != nil {
				return "", err
			}
			t := strings.TrimSpace(s)
			for _, v := range values {
				if strings.EqualFold(t, v) {
					return v, nil
				}
			}
			if why, ok := rejected[strings.ToUpper(t)]; ok {
				return "", fmt.Errorf("%s is not supported: %s", Quote(s), why)
			}
			return "", fmt.Errorf("unknown value %s; valid values: %s", Quote(s), list)
		},
		Format: func(s string) string { return s },
	}
}

// StringList is a list of strings, each checked; every entry that fails
// its check is reported.
func StringList(typ string, check func(string) error) Codec[[]string] {
	return Codec[[]string]{
		Type: typ,
		Parse: func(raw any) ([]string, error) {
			items, err := ParseList(raw)
			if err != nil {
				return nil, err
			}
			var errs ListError
			for i, it := range items {
				if check != nil {
					if err := check(it); err != nil {
						errs.add(i, err)
					}
				}
			}
			if err := errs.err(); err != nil {
				return nil, err
			}
			return items, nil
		},
		Format: func(v []string) string { return strings.Join(v, ",") },
	}
}

// ACL is a list of mirror.acl.include rules. A string is parsed as the
// KIP's comma-separated list; a list gives one rule per item. Every bad
// rule is reported.
func ACL() Codec[aclrule.Rules] {
	return Codec[aclrule.Rules]{
		Type: "ACL include rules",
		Parse: func(raw any) (aclrule.Rules, error) {
			var items []any
			switch v := raw.(type) {
			case string:
				if strings.TrimSpace(v) == "" {
					return aclrule.Rules{}, nil
				}
				for _, p := range strings.Split(v, ",") {
					items = append(items, p)
				}
			case []any:
				items = v
			default:
				return nil, &TypeError{want: "a comma-separated string or a list", raw: raw}
			}
			if len(items) > MaxListEntries {
				return nil, tooMany(len(items))
			}
			rules := make(aclrule.Rules, 0, len(items))
			var errs ListError
			for i, it := range items {
				s, ok := it.(string)
				if !ok {
					errs.add(i, &TypeError{want: "a string", raw: it})
					continue
				}
				r, err := aclrule.ParseRule(s)
				if err != nil {
					errs.add(i, aclError(i, err))
					continue
				}
				rules = append(rules, r)
			}
			if err := errs.err(); err != nil {
				return nil, err
			}
			return rules, nil
		},
		Format: func(r aclrule.Rules) string { return r.String() },
	}
}

// aclError words a rule's error without its position (the path names the
// entry) and adds the RE2 hint to a regex field's error; errors.As still
// finds the *aclrule.ParseError, its Rule set to the entry's position.
func aclError(i int, err error) error {
	var pe *aclrule.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	pe.Rule = i + 1
	if pe.Field == aclrule.FieldResourceName || pe.Field == aclrule.FieldPrincipal {
		pe.Reason += RE2Hint(pe.Text)
	}
	return &aclEntryError{pe}
}

type aclEntryError struct{ pe *aclrule.ParseError }

func (e *aclEntryError) Error() string {
	msg := Quote(e.pe.Text) + ": "
	if e.pe.Field != "" {
		msg += e.pe.Field + ": "
	}
	return msg + e.pe.Reason
}

func (e *aclEntryError) Unwrap() error { return e.pe }
