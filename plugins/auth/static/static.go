// Package static is kmirror's built-in credential provider for SASL PLAIN
// and SCRAM: a user name with a password given in its configuration, read
// from an environment variable, or read from a file.
//
// A password file is re-read when it changes: every call compares the
// file's identity, size, modification time and mode with what it last read,
// so rotating the password (rewriting the file, or a Kubernetes secret
// volume swapping it) takes effect at the next connection, without a
// restart, while an unchanged file costs one stat(2) per call. One trailing
// newline ("\n" or "\r\n") is removed from the file's content; everything
// else, spaces included, is part of the password. A file that becomes
// missing, unreadable, empty or invalid fails every call with
// auth.ErrUnavailable and an error naming the file, until it is fixed.
//
// A password from the environment (PasswordEnv) is read once, by New: a
// process's environment does not change.
//
// The provider refuses OAUTHBEARER with auth.ErrUnsupportedMechanism (use
// plugins/auth/oauth). It never puts the password in an error or in printed
// output.
package static

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kmirror/kmirror/sdk/auth"
)

// Config is the configuration of a static provider. One provider serves
// one identity: kmirror makes one per cluster that uses it.
type Config struct {
	// Username is the SASL user name. Required.
	Username string
	// Password is the password. Exactly one of Password, PasswordFile and
	// PasswordEnv is required.
	Password auth.Secret
	// PasswordFile is a file holding the password, re-read when it
	// changes.
	PasswordFile string
	// PasswordEnv names an environment variable holding the password,
	// read by New.
	PasswordEnv string
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
	passwordEnv  string // for String
	mechanisms   []string
	closed       atomic.Bool

	// The password file as last read: its stat and what it gave.
	mu      sync.Mutex
	seen    fs.FileInfo
	cached  auth.Credentials
	readErr error
	reads   atomic.Int64 // for tests: how often the file was read
}

var _ auth.Provider = (*Provider)(nil)

// problem is one thing wrong with a Config: the field (its plugin key) and
// what is wrong, never the password.
type problem struct {
	key    string
	reason string
}

// check returns what is wrong with c, in a stable order.
func (c Config) check() []problem {
	var probs []problem
	mechs := c.Mechanisms
	if len(mechs) == 0 {
		mechs = DefaultMechanisms()
	}
	for i, m := range mechs {
		switch {
		case m == auth.MechanismOAuthBearer:
			probs = append(probs, problem{key: KeyMechanisms, reason: fmt.Sprintf("mechanism %s needs tokens, not a password; use the oauth provider", m)})
		case !slices.Contains(DefaultMechanisms(), m):
			probs = append(probs, problem{key: KeyMechanisms, reason: fmt.Sprintf("unknown mechanism %q; use %s", m, strings.Join(DefaultMechanisms(), ", "))})
		case slices.Contains(mechs[:i], m):
			probs = append(probs, problem{key: KeyMechanisms, reason: fmt.Sprintf("mechanism %s listed twice", m)})
		}
	}
	if c.Username == "" {
		probs = append(probs, problem{key: KeyUsername, reason: "no username"})
	}
	var sources []string
	if c.Password.IsSet() {
		sources = append(sources, "a password")
	}
	if c.PasswordFile != "" {
		sources = append(sources, "a password file")
	}
	if c.PasswordEnv != "" {
		sources = append(sources, "a password environment variable")
		if _, ok := os.LookupEnv(c.PasswordEnv); !ok {
			probs = append(probs, problem{key: KeyPasswordEnv, reason: fmt.Sprintf("environment variable %s is not set", c.PasswordEnv)})
		}
	}
	switch {
	case len(sources) == 0:
		probs = append(probs, problem{key: KeyPassword, reason: "no password: set a password, a password file or a password environment variable"})
	case len(sources) > 1:
		probs = append(probs, problem{key: KeyPassword, reason: "both " + strings.Join(sources, " and ") + " are set; keep one"})
	}
	return probs
}

// New validates cfg and returns a provider. A password file must be
// readable and hold a usable password now. Errors wrap auth.ErrInvalidConfig
// and never contain the password.
func New(cfg Config) (*Provider, error) {
	if probs := cfg.check(); len(probs) > 0 {
		return nil, fmt.Errorf("static auth provider: %w: %s", auth.ErrInvalidConfig, probs[0].reason)
	}
	mechs := slices.Clone(cfg.Mechanisms)
	if len(mechs) == 0 {
		mechs = DefaultMechanisms()
	}
	pw := cfg.Password
	if cfg.PasswordEnv != "" {
		pw = auth.NewSecret(os.Getenv(cfg.PasswordEnv))
	}
	p := &Provider{username: cfg.Username, password: pw, passwordFile: cfg.PasswordFile, passwordEnv: cfg.PasswordEnv, mechanisms: mechs}
	c, err := p.credentials()
	if err == nil {
		err = c.Validate(mechs[0])
	}
	if err != nil {
		if cfg.PasswordEnv != "" {
			err = fmt.Errorf("environment variable %s: %w", cfg.PasswordEnv, err)
		}
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
		if p.passwordFile != "" && !strings.Contains(err.Error(), p.passwordFile) {
			err = fmt.Errorf("password file %s: %w", p.passwordFile, err)
		}
		return auth.Credentials{}, fmt.Errorf("static auth provider: %v: %w: %w", req, auth.ErrUnavailable, err)
	}
	return c, nil
}

// credentials returns the configured user and password, reading the
// password file again if it changed since the last read. Errors name the
// file, not its content.
func (p *Provider) credentials() (auth.Credentials, error) {
	if p.passwordFile == "" {
		if !p.password.IsSet() {
			return auth.Credentials{}, fmt.Errorf("the password is empty")
		}
		return auth.Credentials{Username: p.username, Password: p.password}, nil
	}
	fi, err := os.Stat(p.passwordFile)
	if err != nil {
		return auth.Credentials{}, fmt.Errorf("cannot read the password file: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen != nil && sameVersion(p.seen, fi) {
		return p.cached, p.readErr
	}
	// Stat before reading: a change during the read is seen at the next
	// call, which reads again.
	p.seen, p.cached, p.readErr = fi, auth.Credentials{}, nil
	p.reads.Add(1)
	b, err := readFile(p.passwordFile)
	if err == nil {
		s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if s == "" {
			err = fmt.Errorf("password file %s is empty", p.passwordFile)
		} else {
			p.cached = auth.Credentials{Username: p.username, Password: auth.NewSecret(s)}
		}
	}
	p.readErr = err
	return p.cached, err
}

// sameVersion reports whether two stats of the password file show the same
// content: the same file (a rename or a swapped symlink gives another), of
// the same size, modification time and mode.
func sameVersion(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && a.Mode() == b.Mode()
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
	switch {
	case p.passwordFile != "":
		src = "password file " + p.passwordFile
	case p.passwordEnv != "":
		src = "password from environment variable " + p.passwordEnv
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
