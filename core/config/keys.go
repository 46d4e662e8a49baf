package config

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/kmirror/kmirror/core/config/value"
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
	// ScopePlugin keys sit in each entry of plugins (a map keyed by the
	// plugin's name).
	ScopePlugin
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
	case ScopePlugin:
		return "plugin"
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

// declare binds a codec to a field of the scope's struct S.
func declare[S, V any](k Key, field func(*S) *V, c value.Codec[V]) Key {
	k.Type = c.Type
	if k.Constraint == "" {
		k.Constraint = c.Constraint
	}
	k.Values = c.Values
	k.decode = func(target any, raw any) error {
		v, err := c.Parse(raw)
		if err != nil {
			return err
		}
		*field(target.(*S)) = v
		return nil
	}
	k.encode = func(target any) string { return c.Format(*field(target.(*S))) }
	return k
}

// regexListCodec is a list of full-match regular expressions.
func regexListCodec() value.Codec[RegexList] {
	return value.Codec[RegexList]{
		Type: "regex list",
		Parse: func(raw any) (RegexList, error) {
			items, err := value.ParseList(raw)
			if err != nil {
				return RegexList{}, err
			}
			return CompileRegexList(items)
		},
		Format: func(l RegexList) string { return l.String() },
	}
}

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
		return fmt.Errorf("invalid mirror name %s: use letters, digits, '-' and '_' only", value.Quote(s))
	}
	return nil
}
