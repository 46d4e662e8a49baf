package config

import (
	"fmt"
	"log/slog"
)

// Redacted is what a set Secret prints instead of its value.
const Redacted = "[redacted]"

// Secret holds a sensitive string (a password, a private key, a JAAS
// configuration). Every way of printing or encoding it (String, %v, %#v, %q,
// %x, JSON, text, slog) yields Redacted, or "" when the secret is empty, so
// that a Secret can sit in structs that get logged. Use Reveal to read the
// value, only where it is handed to the code that needs it.
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
func (s Secret) GoString() string { return fmt.Sprintf("config.Secret(%q)", s.String()) }

// Format prints the redacted form for every verb.
func (s Secret) Format(f fmt.State, verb rune) {
	switch verb {
	case 'q':
		fmt.Fprintf(f, "%q", s.String())
	case 'v':
		if f.Flag('#') {
			_, _ = f.Write([]byte(s.GoString()))
			return
		}
		_, _ = f.Write([]byte(s.String()))
	default:
		_, _ = f.Write([]byte(s.String()))
	}
}

// MarshalJSON encodes the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf("%q", s.String())), nil }

// MarshalText encodes the redacted form (used by YAML, TOML and others).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue keeps log/slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
