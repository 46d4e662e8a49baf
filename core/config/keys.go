package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kmirror/kmirror/core/aclrule"
)

// Scope says where a key may appear in the file.
type Scope int

// Scopes of keys.
const (
	// ScopeDaemon keys sit at the top level of the file and apply to the
	// whole daemon (KIP-1279's broker-level keys and kmirror's own).
	ScopeDaemon Scope = iota + 1
	// ScopeCluster keys are client keys, valid under destination and in
	// each mirror (where they describe the source cluster).
	ScopeCluster
	// ScopeMirror keys are valid only in a mirrors entry.
	ScopeMirror
	// ScopeState keys sit under state.
	ScopeState
)

func (s Scope) String() string {
	switch s {
	case ScopeDaemon:
		return "daemon"
	case ScopeCluster:
		return "cluster"
	case ScopeMirror:
		return "mirror"
	case ScopeState:
		return "state"
	}
	return "scope(" + strconv.Itoa(int(s)) + ")"
}

// Origin says where a key's name and default come from.
type Origin int

// Origins of keys.
const (
	// OriginKIP: name and default are KIP-1279's, verbatim.
	OriginKIP Origin = iota + 1
	// OriginKafka: the name is KIP-1279's (or a standard Kafka client
	// key); the KIP gives no default, so Kafka's own default is used.
	OriginKafka
	// OriginKmirror: a key of kmirror's own.
	OriginKmirror
)

func (o Origin) String() string {
	switch o {
	case OriginKIP:
		return "KIP-1279"
	case OriginKafka:
		return "Kafka"
	case OriginKmirror:
		return "kmirror"
	}
	return "origin(" + strconv.Itoa(int(o)) + ")"
}

// Key declares one configuration key. The declaration table (Keys) is the
// only place a key is defined: decoding, defaults, validation, environment
// variable names and the generated reference all read it.
type Key struct {
	Name       string
	Scope      Scope
	Type       string   // human-readable type, for the reference
	Default    string   // as it would be written in the file; "" = empty
	HasDefault bool     // false: the key has no default (required or optional-empty)
	Required   bool     // the key must be set (conditions beyond this are in validate.go)
	Constraint string   // human-readable range or allowed values, for the reference
	Secret     bool     // the value never appears in errors, summaries or dumps
	Origin     Origin   // where name and default come from
	Doc        string   // one paragraph, Markdown
	Values     []string // allowed values of an enum key

	decode func(target any, raw any) error // parse, check and store into *Config, *Cluster, *Mirror or *State
	encode func(target any) string         // render the stored value back to file syntax
}

// UnsupportedKey is a Kafka or KIP-1279 key that kmirror recognises but does
// not implement; setting it is an error that gives the reason.
type UnsupportedKey struct {
	Name   string
	Scope  Scope
	Reason string
}

// codec parses one type of value. parse accepts what a YAML or TOML file
// yields (string, integers, floats, bools, lists, maps) and the strings that
// environment variables and --set carry.
type codec[V any] struct {
	typ        string
	constraint string
	values     []string
	parse      func(raw any) (V, error)
	format     func(V) string
}

// declare binds a codec to a field of the scope's struct S.
func declare[S, V any](k Key, field func(*S) *V, c codec[V]) Key {
	k.Type = c.typ
	if k.Constraint == "" {
		k.Constraint = c.constraint
	}
	k.Values = c.values
	k.decode = func(target any, raw any) error {
		v, err := c.parse(raw)
		if err != nil {
			return err
		}
		*field(target.(*S)) = v
		return nil
	}
	k.encode = func(target any) string { return c.format(*field(target.(*S))) }
	return k
}

// typeError reports a value of the wrong type. Its message quotes the value
// unless the key is secret (see redactError).
type typeError struct {
	want string
	raw  any
}

func (e *typeError) Error() string {
	return fmt.Sprintf("expected %s, got %s", e.want, describe(e.raw, true))
}

func (e *typeError) redacted() string {
	return fmt.Sprintf("expected %s, got %s", e.want, describe(e.raw, false))
}

// describe renders a raw value for an error message: the value itself when
// show is true, only its kind otherwise.
func describe(raw any, show bool) string {
	kind := "a value"
	switch v := raw.(type) {
	case string:
		if show {
			return quote(v)
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

// quote quotes s for a message, shortening very long values.
func quote(s string) string {
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
			return 0, fmt.Errorf("%s is out of range for a 64-bit integer", quote(v))
		}
	}
	return 0, &typeError{want: "an integer", raw: raw}
}

func toString(raw any) (string, error) {
	if s, ok := raw.(string); ok {
		return s, nil
	}
	switch raw.(type) {
	case int, int64, uint64, float64, bool:
		return "", fmt.Errorf("%w (quote the value in the file)", &typeError{want: "a string", raw: raw})
	}
	return "", &typeError{want: "a string", raw: raw}
}

// toList accepts a comma-separated string or a list of strings. A string is
// split on commas; a list gives one entry per item, taken whole (so a regex
// may hold a comma). Entries are trimmed; empty entries are an error, since
// "a,,b" or a trailing comma is almost always an editing slip.
func toList(raw any) ([]string, error) {
	var items []string
	switch v := raw.(type) {
	case string:
		if strings.TrimSpace(v) == "" {
			return nil, nil
		}
		items = strings.Split(v, ",")
	case []any:
		for i, it := range v {
			s, ok := it.(string)
			if !ok {
				return nil, fmt.Errorf("entry %d: %w", i+1, &typeError{want: "a string", raw: it})
			}
			items = append(items, s)
		}
	default:
		return nil, &typeError{want: "a comma-separated string or a list", raw: raw}
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		it = strings.TrimSpace(it)
		if it == "" {
			return nil, fmt.Errorf("entry %d is empty (remove the extra comma)", i+1)
		}
		out = append(out, it)
	}
	return out, nil
}

func formatInt[T int | int64](v T) string { return strconv.FormatInt(int64(v), 10) }

// intCodec is a 32-bit integer (Kafka's int) in [min, max].
func intCodec(min, max int64) codec[int] {
	return codec[int]{
		typ:        "int",
		constraint: rangeText(min, max),
		parse: func(raw any) (int, error) {
			n, err := toInt(raw)
			if err != nil {
				return 0, err
			}
			if n < min || n > max {
				return 0, fmt.Errorf("%d is out of range: must be %s", n, rangeText(min, max))
			}
			return int(n), nil
		},
		format: formatInt[int],
	}
}

// bufferCodec is a socket buffer size: -1 (use the OS default) or positive.
func bufferCodec() codec[int] {
	return codec[int]{
		typ:        "int (bytes)",
		constraint: "-1 (OS default) or 1 … 2147483647",
		parse: func(raw any) (int, error) {
			n, err := toInt(raw)
			if err != nil {
				return 0, err
			}
			if n != -1 && (n < 1 || n > math.MaxInt32) {
				return 0, fmt.Errorf("%d is out of range: must be -1 (OS default) or 1 … 2147483647", n)
			}
			return int(n), nil
		},
		format: formatInt[int],
	}
}

// boolCodec is true or false (a YAML boolean, or the words in any case, as
// an environment variable or a flag gives them).
func boolCodec() codec[bool] {
	return codec[bool]{
		typ:        "boolean",
		constraint: "true, false",
		parse: func(raw any) (bool, error) {
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
			return false, &typeError{want: "true or false", raw: raw}
		},
		format: strconv.FormatBool,
	}
}

// longCodec is a 64-bit integer (Kafka's long) at least min.
func longCodec(min int64) codec[int64] {
	return codec[int64]{
		typ:        "long",
		constraint: rangeText(min, math.MaxInt64),
		parse: func(raw any) (int64, error) {
			n, err := toInt(raw)
			if err != nil {
				return 0, err
			}
			if n < min {
				return 0, fmt.Errorf("%d is out of range: must be %s", n, rangeText(min, math.MaxInt64))
			}
			return n, nil
		},
		format: formatInt[int64],
	}
}

// msCodec is a duration written in milliseconds, at least min ms.
func msCodec(min int64) codec[time.Duration] {
	const max = math.MaxInt64 / int64(time.Millisecond)
	return codec[time.Duration]{
		typ:        "long (ms)",
		constraint: rangeText(min, max),
		parse: func(raw any) (time.Duration, error) {
			n, err := toInt(raw)
			if err != nil {
				return 0, err
			}
			if n < min || n > max {
				return 0, fmt.Errorf("%d is out of range: must be %s milliseconds", n, rangeText(min, max))
			}
			return time.Duration(n) * time.Millisecond, nil
		},
		format: func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) },
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

// stringCodec is free text, optionally checked.
func stringCodec(typ string, check func(string) error) codec[string] {
	return codec[string]{
		typ: typ,
		parse: func(raw any) (string, error) {
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
		format: func(s string) string { return s },
	}
}

// secretCodec is a secret string.
func secretCodec() codec[Secret] {
	return codec[Secret]{
		typ: "string (secret)",
		parse: func(raw any) (Secret, error) {
			s, err := toString(raw)
			if err != nil {
				return Secret{}, err
			}
			return NewSecret(s), nil
		},
		format: func(s Secret) string { return s.String() },
	}
}

// enumCodec accepts one of values, ignoring case, and stores the canonical
// spelling. rejected maps known-but-unsupported values (upper case) to the
// reason they are refused.
func enumCodec(values []string, rejected map[string]string) codec[string] {
	shown := make([]string, len(values))
	for i, v := range values {
		shown[i] = v
		if v == "" {
			shown[i] = `"" (empty)`
		}
	}
	list := strings.Join(shown, ", ")
	return codec[string]{
		typ:        "enum",
		constraint: list,
		values:     values,
		parse: func(raw any) (string, error) {
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
				return "", fmt.Errorf("%s is not supported: %s", quote(s), why)
			}
			return "", fmt.Errorf("unknown value %s; valid values: %s", quote(s), list)
		},
		format: func(s string) string { return s },
	}
}

// stringListCodec is a list of strings, each checked.
func stringListCodec(typ string, check func(string) error) codec[[]string] {
	return codec[[]string]{
		typ: typ,
		parse: func(raw any) ([]string, error) {
			items, err := toList(raw)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				if check != nil {
					if err := check(it); err != nil {
						return nil, err
					}
				}
			}
			return items, nil
		},
		format: func(v []string) string { return strings.Join(v, ",") },
	}
}

// regexListCodec is a list of full-match regular expressions.
func regexListCodec() codec[RegexList] {
	return codec[RegexList]{
		typ: "regex list",
		parse: func(raw any) (RegexList, error) {
			items, err := toList(raw)
			if err != nil {
				return RegexList{}, err
			}
			return CompileRegexList(items)
		},
		format: func(l RegexList) string { return l.String() },
	}
}

// aclCodec is a list of mirror.acl.include rules. A string is parsed as the
// KIP's comma-separated list; a list gives one rule per item.
func aclCodec() codec[aclrule.Rules] {
	return codec[aclrule.Rules]{
		typ: "ACL include rules",
		parse: func(raw any) (aclrule.Rules, error) {
			switch v := raw.(type) {
			case string:
				return aclrule.Parse(v)
			case []any:
				rules := make(aclrule.Rules, 0, len(v))
				for i, it := range v {
					s, ok := it.(string)
					if !ok {
						return nil, fmt.Errorf("rule %d: %w", i+1, &typeError{want: "a string", raw: it})
					}
					r, err := aclrule.ParseRule(s)
					if err != nil {
						var pe *aclrule.ParseError
						if errors.As(err, &pe) {
							pe.Rule = i + 1
						}
						return nil, err
					}
					rules = append(rules, r)
				}
				return rules, nil
			}
			return nil, &typeError{want: "a comma-separated string or a list", raw: raw}
		},
		format: func(r aclrule.Rules) string { return r.String() },
	}
}

// checkHostPort validates one bootstrap server.
func checkHostPort(s string) error {
	if i := strings.Index(s, "://"); i >= 0 {
		return fmt.Errorf("server %s: remove the %q prefix; the protocol is set by security.protocol", quote(s), s[:i+3])
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("server %s is not host:port: %v", quote(s), err)
	}
	if host == "" {
		return fmt.Errorf("server %s has no host", quote(s))
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("server %s: port %q is not a number in 1 … 65535", quote(s), port)
	}
	return nil
}

// checkListenAddress validates http.address: "" or host:port with port in
// 0 … 65535 (0 picks a free port) and an empty host meaning all interfaces.
func checkListenAddress(s string) error {
	if s == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%s is not host:port (or \"\" to disable): %v", quote(s), err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%s: port %q is not a number in 0 … 65535", quote(s), port)
	}
	if host != "" && net.ParseIP(host) == nil && !hostnameRE.MatchString(host) {
		return fmt.Errorf("%s: %q is neither an IP address nor a host name", quote(s), host)
	}
	return nil
}

var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)

// mirrorNameRE is the shape of a mirror name. No dots: --set uses
// mirrors.<name>.<key>, which must stay unambiguous. No '/': state store
// keys hold the name as a path segment.
var mirrorNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// CheckMirrorName refuses a mirror name outside the grammar of the
// configuration's name key: one or more letters, digits, '-' and '_'. Names
// from elsewhere (the admin API's paths and bodies, run-time mirrors) are
// checked with it before they are used.
func CheckMirrorName(s string) error {
	if !mirrorNameRE.MatchString(s) {
		return fmt.Errorf("invalid mirror name %s: use letters, digits, '-' and '_' only", quote(s))
	}
	return nil
}

func checkURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("not a URL: %v", err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%s is not an http(s) URL with a host", quote(s))
	}
	if u.User != nil {
		return fmt.Errorf("the URL must not carry credentials; use sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret")
	}
	return nil
}
