package auth

import (
	"encoding/json"
	"fmt"
	"log/slog"
)

// Redacted is what a set Secret prints instead of its value.
const Redacted = "[redacted]"

// Secret holds a password, a client secret or a bearer token. Every way of
// printing or encoding it (String, %v, %+v, %#v, %s, %q, %x, JSON, text,
// log/slog) yields Redacted, or "" when the secret is empty, so a Secret can
// sit in structs that get logged or returned in errors. Reveal returns the
// value; call it only where the value is handed to the code that sends it.
//
// fmt cannot call methods on unexported struct fields: printing a struct
// that holds a Secret in an unexported field prints the value. Such types
// implement fmt.Formatter themselves (see authtest.Leaks to check).
//
// The zero Secret is empty. Secrets are comparable with ==.
type Secret struct {
	value string
}

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{value: s} }

// Reveal returns the secret value.
func (s Secret) Reveal() string { return s.value }

// IsSet reports whether the secret is non-empty.
func (s Secret) IsSet() bool { return s.value != "" }

// String returns Redacted, or "" for an empty secret.
func (s Secret) String() string {
	if s.value == "" {
		return ""
	}
	return Redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return fmt.Sprintf("auth.Secret(%q)", s.String()) }

// Format prints the redacted form for every verb and flag.
func (s Secret) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'q':
		_, _ = fmt.Fprintf(f, "%q", s.String())
	case verb == 'v' && f.Flag('#'):
		_, _ = f.Write([]byte(s.GoString()))
	default:
		_, _ = f.Write([]byte(s.String()))
	}
}

// LogValue keeps log/slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON encodes the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalText encodes the redacted form (used by YAML, TOML and others).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText takes the secret from text, so that plugin configurations
// can be decoded into structs holding Secrets. It refuses Redacted itself:
// decoding a configuration that was printed by kmirror would otherwise set
// the literal "[redacted]" as a password.
func (s *Secret) UnmarshalText(b []byte) error {
	if string(b) == Redacted {
		return fmt.Errorf("auth: secret is the placeholder %q, not a value; the configuration was copied from redacted output", Redacted)
	}
	s.value = string(b)
	return nil
}

// UnmarshalJSON decodes a JSON string like UnmarshalText. null leaves the
// secret unchanged.
func (s *Secret) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		// The decoder's message may quote the input; do not pass it on.
		return fmt.Errorf("auth: secret must be a JSON string")
	}
	return s.UnmarshalText([]byte(v))
}
