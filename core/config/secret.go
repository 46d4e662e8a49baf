package config

import "github.com/kmirror/kmirror/sdk/auth"

// Redacted is what a set Secret prints instead of its value.
const Redacted = auth.Redacted

// Secret holds a sensitive string (a password, a private key, a JAAS
// configuration). It is the SDK's auth.Secret, so that credentials pass from
// the configuration to credential providers without being unwrapped: every
// way of printing or encoding it (String, %v, %#v, %q, %x, JSON, text, slog)
// yields Redacted, or "" when the secret is empty. Use Reveal to read the
// value, only where it is handed to the code that needs it.
type Secret = auth.Secret

// NewSecret wraps s.
func NewSecret(s string) Secret { return auth.NewSecret(s) }
