// Package static is kmirror's built-in credential provider for SASL PLAIN
// and SCRAM: a user name with a password given in its configuration or read
// from a file.
//
// A password file is read again on every call, so rotating the password
// (rewriting the file, or a Kubernetes secret volume swapping it) takes
// effect at the next connection, without a restart. One trailing newline
// ("\n" or "\r\n") is removed from the file's content; everything else,
// spaces included, is part of the password.
//
// The provider refuses OAUTHBEARER with auth.ErrUnsupportedMechanism (use
// plugins/auth/oauth). It never puts the password in an error or in printed
// output.
package static

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/kmirror/kmirror/sdk/auth"
)

// Config is the configuration of a static provider. One provider serves
// one identity: kmirror makes one per cluster that uses it.
type Config struct {
	// Username is the SASL user name. Required.
	Username string
	// Password is the password. Exactly one of Password and PasswordFile
	// is required.
	Password auth.Secret
	// PasswordFile is a file holding the password, re-read on every call.
	PasswordFile string
	// Mechanisms the provider serves. Default (nil or empty): PLAIN,
	// SCRAM-SHA-256 and SCRAM-SHA-512.
	Mechanisms []string
}

// DefaultMechanisms returns the mechanisms a provider serves when Config
// lists none.
func DefaultMechanisms() []string {
	return []string{auth.MechanismPlain, auth.MechanismSCRAMSHA256, auth.MechanismSCRAMSHA512}
}

// Provider implements auth.Provider. It is safe for concurrent use.
type Provider struct {
	username     string
	password     auth.Secret
	passwordFile string
	mechanisms   []string
	closed       atomic.Bool
}

var _ auth.Provider = (*Provider)(nil)

// New validates cfg and returns a provider. A password file must be
// readable and hold a usable password now. Errors wrap auth.ErrInvalidConfig
// and never contain the password.
func New(cfg Config) (*Provider, error) {
	bad := func(format string, args ...any) (*Provider, error) {
		return nil, fmt.Errorf("static auth provider: %w: %s", auth.ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	mechs := slices.Clone(cfg.Mechanisms)
	if len(mechs) == 0 {
		mechs = DefaultMechanisms()
	}
	for i, m := range mechs {
		switch {
		case m == auth.MechanismOAuthBearer:
			return bad("mechanism %s needs tokens, not a password; use the oauth provider", m)
		case !slices.Contains(DefaultMechanisms(), m):
			return bad("unknown mechanism %q; use %s", m, strings.Join(DefaultMechanisms(), ", "))
		case slices.Contains(mechs[:i], m):
			return bad("mechanism %s listed twice", m)
		}
	}
	switch {
	case cfg.Username == "":
		return bad("no username")
	case cfg.Password.IsSet() && cfg.PasswordFile != "":
		return bad("both a password and a password file are set; keep one")
	case !cfg.Password.IsSet() && cfg.PasswordFile == "":
		return bad("no password: set a password or a password file")
	}
	p := &Provider{username: cfg.Username, password: cfg.Password, passwordFile: cfg.PasswordFile, mechanisms: mechs}
	c, err := p.credentials()
	if err == nil {
		err = c.Validate(mechs[0])
	}
	if err != nil {
		return nil, fmt.Errorf("static auth provider: %w: %w", auth.ErrInvalidConfig, err)
	}
	return p, nil
}

// Info implements auth.Provider.
func (p *Provider) Info() auth.Info {
	return auth.Info{Name: "static", ProtocolMajor: auth.ProtocolMajor, ProtocolMinor: auth.ProtocolMinor,
		Mechanisms: slices.Clone(p.mechanisms)}
}

// Credentials implements auth.Provider.
func (p *Provider) Credentials(ctx context.Context, req auth.Request) (auth.Credentials, error) {
	if err := ctx.Err(); err != nil {
		return auth.Credentials{}, fmt.Errorf("static auth provider: %v: %w", req, err)
	}
	if p.closed.Load() {
		return auth.Credentials{}, fmt.Errorf("static auth provider: %v: %w", req, auth.ErrClosed)
	}
	if err := req.Validate(); err != nil {
		return auth.Credentials{}, fmt.Errorf("static auth provider: %w", err)
	}
	if !slices.Contains(p.mechanisms, req.Mechanism) {
		hint := ""
		if req.Mechanism == auth.MechanismOAuthBearer {
			hint = "; use the oauth provider for tokens"
		}
		return auth.Credentials{}, fmt.Errorf("static auth provider: %v: %w: it serves %s%s",
			req, auth.ErrUnsupportedMechanism, strings.Join(p.mechanisms, ", "), hint)
	}
	c, err := p.credentials()
	if err == nil {
		err = c.Validate(req.Mechanism)
	}
	if err != nil {
		// Only the file can change after New: the operator fixes or
		// finishes rotating it, and the next call picks it up.
		return auth.Credentials{}, fmt.Errorf("static auth provider: %v: %w: %w", req, auth.ErrUnavailable, err)
	}
	return c, nil
}

// credentials returns the configured user and password, reading the
// password file if there is one. Errors name the file, not its content.
func (p *Provider) credentials() (auth.Credentials, error) {
	pw := p.password
	if p.passwordFile != "" {
		b, err := readFile(p.passwordFile)
		if err != nil {
			return auth.Credentials{}, err
		}
		s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if s == "" {
			return auth.Credentials{}, fmt.Errorf("password file %s is empty", p.passwordFile)
		}
		pw = auth.NewSecret(s)
	}
	return auth.Credentials{Username: p.username, Password: pw}, nil
}

// maxPasswordFile bounds what is read from a password file, so that a path
// pointing at the wrong file fails instead of reading it whole.
const maxPasswordFile = 64 << 10

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the password file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read the password file %s: %w", path, err)
	}
	if len(b) > maxPasswordFile {
		return nil, fmt.Errorf("password file %s is larger than %d KiB; is it the right file?", path, maxPasswordFile>>10)
	}
	return b, nil
}

// String describes the provider without its password.
func (p *Provider) String() string {
	src := "a configured password"
	if p.passwordFile != "" {
		src = "password file " + p.passwordFile
	}
	return fmt.Sprintf("static auth provider (user %q, %s, %s)", p.username, src, strings.Join(p.mechanisms, ", "))
}

// Format prints String for every verb: fmt would otherwise print the
// unexported password field raw, since it cannot call its methods.
func (p *Provider) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, p.String()) }

// Close implements auth.Provider. It holds no resources; afterwards
// Credentials fails with auth.ErrClosed.
func (p *Provider) Close() error {
	p.closed.Store(true)
	return nil
}
