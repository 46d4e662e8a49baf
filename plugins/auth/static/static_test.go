package static

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/auth/authtest"
	"github.com/kmirror/kmirror/sdk/plugin"
)

const secret = "s3cret-Pa55 word"

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	// Write next to the file and rename over it, as a rotation does.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func mustNew(t *testing.T, c Config) *Provider {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func req(mech string) auth.Request {
	return auth.Request{Mirror: "dc1", Role: auth.RoleSource, Mechanism: mech}
}

func TestConformanceInlinePassword(t *testing.T) {
	t.Parallel()
	authtest.Run(t, func(t *testing.T) auth.Provider {
		return mustNew(t, Config{Username: "alice", Password: auth.NewSecret(secret)})
	})
}

func TestConformancePasswordFile(t *testing.T) {
	t.Parallel()
	authtest.Run(t, func(t *testing.T) auth.Provider {
		path := filepath.Join(t.TempDir(), "password")
		writeFile(t, path, secret+"\n")
		return mustNew(t, Config{Username: "alice", PasswordFile: path, Mechanisms: []string{auth.MechanismSCRAMSHA512}})
	})
}

func TestServesConfiguredCredentials(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Config{Username: "alice", Password: auth.NewSecret(secret)})
	for _, m := range DefaultMechanisms() {
		c, err := p.Credentials(t.Context(), req(m))
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if c.Username != "alice" || c.Password.Reveal() != secret || c.Token.IsSet() || !c.Expiry.IsZero() || c.Extensions != nil {
			t.Fatalf("%s: got user %q, password %q, token set %v, expiry %v, extensions %v", m, c.Username, c.Password.Reveal(), c.Token.IsSet(), c.Expiry, c.Extensions)
		}
	}
	if got := p.Info(); got.Name != "static" || !slices.Equal(got.Mechanisms, DefaultMechanisms()) {
		t.Fatalf("Info = %+v", got)
	}
}

func TestRefusesOAuthBearer(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Config{Username: "alice", Password: auth.NewSecret(secret)})
	_, err := p.Credentials(t.Context(), req(auth.MechanismOAuthBearer))
	if !errors.Is(err, auth.ErrUnsupportedMechanism) || !strings.Contains(err.Error(), "oauth provider") {
		t.Fatalf("OAUTHBEARER: %v; want ErrUnsupportedMechanism pointing at the oauth provider", err)
	}
}

func TestServesOnlyConfiguredMechanisms(t *testing.T) {
	t.Parallel()
	p := mustNew(t, Config{Username: "alice", Password: auth.NewSecret(secret), Mechanisms: []string{auth.MechanismSCRAMSHA256}})
	if _, err := p.Credentials(t.Context(), req(auth.MechanismSCRAMSHA256)); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{auth.MechanismPlain, auth.MechanismSCRAMSHA512} {
		_, err := p.Credentials(t.Context(), req(m))
		if !errors.Is(err, auth.ErrUnsupportedMechanism) || !strings.Contains(err.Error(), "it serves SCRAM-SHA-256") {
			t.Fatalf("%s: %v", m, err)
		}
	}
}

func TestPasswordFileRotation(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "password")
	writeFile(t, path, "first-password\n")
	p := mustNew(t, Config{Username: "alice", PasswordFile: path})
	want := func(pw string) {
		t.Helper()
		c, err := p.Credentials(t.Context(), req(auth.MechanismSCRAMSHA512))
		if err != nil {
			t.Fatal(err)
		}
		if c.Password.Reveal() != pw {
			t.Fatalf("password %q, want %q", c.Password.Reveal(), pw)
		}
	}
	want("first-password")
	writeFile(t, path, "second-password\r\n")
	want("second-password")
	// Only one trailing newline goes; spaces and inner newlines stay.
	writeFile(t, path, " spaced pass \n\n")
	want(" spaced pass \n")
	if err := os.WriteFile(path, []byte("in-place-write"), 0o600); err != nil {
		t.Fatal(err)
	}
	want("in-place-write")
}

func TestPasswordFileProblemsAreUnavailable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "password")
	writeFile(t, path, "old-password-value\n")
	p := mustNew(t, Config{Username: "alice", PasswordFile: path})

	check := func(what, fragment string, target error) {
		t.Helper()
		_, err := p.Credentials(t.Context(), req(auth.MechanismPlain))
		if !errors.Is(err, auth.ErrUnavailable) || !errors.Is(err, target) {
			t.Fatalf("%s: %v; want ErrUnavailable and %v", what, err, target)
		}
		if !strings.Contains(err.Error(), fragment) || !strings.Contains(err.Error(), `mirror "dc1" source (PLAIN)`) {
			t.Fatalf("%s: error %q does not name %q and the request", what, err, fragment)
		}
		if leak := authtest.Leaks(err, "old-password-value", "pass\x00word-new"); leak != "" {
			t.Fatalf("%s: %s", what, leak)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	check("missing file", path, fs.ErrNotExist)
	writeFile(t, path, "\n")
	check("empty file", path+" is empty", auth.ErrUnavailable)
	writeFile(t, path, "pass\x00word-new")
	check("NUL in password", "NUL", auth.ErrInvalidCredentials)
	writeFile(t, path, strings.Repeat("x", maxPasswordFile+1))
	check("huge file", "larger than 64 KiB", auth.ErrUnavailable)

	// Fixing the file fixes the provider.
	writeFile(t, path, "new-password-value")
	c, err := p.Credentials(t.Context(), req(auth.MechanismPlain))
	if err != nil || c.Password.Reveal() != "new-password-value" {
		t.Fatalf("after fixing the file: %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, "")
	good := filepath.Join(dir, "good")
	writeFile(t, good, secret)
	pw := auth.NewSecret(secret)
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Password: pw}, "no username"},
		{Config{Username: "alice"}, "no password"},
		{Config{Username: "alice", Password: pw, PasswordFile: good}, "both a password and a password file"},
		{Config{Username: "alice", PasswordFile: filepath.Join(dir, "missing")}, "no such file"},
		{Config{Username: "alice", PasswordFile: empty}, "is empty"},
		{Config{Username: "alice", PasswordFile: dir}, "is a directory"},
		{Config{Username: "al\x00ice", Password: pw}, "NUL"},
		{Config{Username: "alice", Password: auth.NewSecret("a\x00" + secret)}, "NUL"},
		{Config{Username: "alice", Password: pw, Mechanisms: []string{auth.MechanismOAuthBearer}}, "use the oauth provider"},
		{Config{Username: "alice", Password: pw, Mechanisms: []string{"GSSAPI"}}, `unknown mechanism "GSSAPI"`},
		{Config{Username: "alice", Password: pw, Mechanisms: []string{auth.MechanismPlain, auth.MechanismPlain}}, "listed twice"},
	}
	for _, c := range cases {
		p, err := New(c.cfg)
		if p != nil || !errors.Is(err, auth.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v; want ErrInvalidConfig mentioning %q", c.cfg, err, c.want)
			continue
		}
		if leak := authtest.Leaks(err, secret); leak != "" {
			t.Errorf("New(%+v): %s", c.cfg, leak)
		}
	}
}

func TestConfigPrintsRedacted(t *testing.T) {
	t.Parallel()
	c := Config{Username: "alice", Password: auth.NewSecret(secret)}
	if leak := authtest.Leaks(c, secret); leak != "" {
		t.Fatal(leak)
	}
	p := mustNew(t, c)
	if leak := authtest.Leaks(p, secret); leak != "" {
		t.Fatalf("Provider: %s", leak)
	}
	if s := fmt.Sprintf("%+v", c); !strings.Contains(s, "alice") {
		t.Fatalf("%%+v = %s", s)
	}
}

// The file is read again when, and only when, it changed: a rotation is
// picked up at the next call without a restart, and an unchanged file is
// not read at every connection.
func TestPasswordFileIsReReadWhenItChanges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "password")
	writeFile(t, path, "first-password\n")
	p := mustNew(t, Config{Username: "alice", PasswordFile: path})
	get := func() (string, error) {
		c, err := p.Credentials(t.Context(), req(auth.MechanismSCRAMSHA256))
		return c.Password.Reveal(), err
	}
	reads := p.reads.Load()
	for range 100 {
		if pw, err := get(); err != nil || pw != "first-password" {
			t.Fatalf("unchanged file: %q, %v", pw, err)
		}
	}
	if n := p.reads.Load() - reads; n != 0 {
		t.Fatalf("an unchanged file was read %d times in 100 calls", n)
	}

	writeFile(t, path, "second-password\n") // rotated by rename
	if pw, err := get(); err != nil || pw != "second-password" {
		t.Fatalf("after a rotation: %q, %v", pw, err)
	}
	// Rewritten in place, same size: the modification time tells.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("third--password\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(path, time.Time{}, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if pw, err := get(); err != nil || pw != "third--password" {
		t.Fatalf("after an in-place rewrite: %q, %v", pw, err)
	}

	// A file that becomes unreadable keeps failing, naming the file, and
	// recovers when fixed.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, err := get()
		if !errors.Is(err, auth.ErrUnavailable) || !strings.Contains(err.Error(), path) {
			t.Fatalf("unreadable file: %v; want ErrUnavailable naming %s", err, path)
		}
		if leak := authtest.Leaks(err, "third--password"); leak != "" {
			t.Fatal(leak)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "pass\x00word\n")
	for range 3 {
		if _, err := get(); !errors.Is(err, auth.ErrInvalidCredentials) || !strings.Contains(err.Error(), "password file "+path) {
			t.Fatalf("invalid file: %v; want ErrInvalidCredentials naming the file", err)
		}
	}
	writeFile(t, path, "fourth-password")
	if pw, err := get(); err != nil || pw != "fourth-password" {
		t.Fatalf("after fixing the file: %q, %v", pw, err)
	}
}

func TestPasswordFromTheEnvironment(t *testing.T) {
	t.Setenv("KMIRROR_STATIC_TEST_PASSWORD", secret)
	p := mustNew(t, Config{Username: "alice", PasswordEnv: "KMIRROR_STATIC_TEST_PASSWORD"})
	c, err := p.Credentials(t.Context(), req(auth.MechanismPlain))
	if err != nil || c.Password.Reveal() != secret {
		t.Fatalf("Credentials = %v", err)
	}
	if s := fmt.Sprint(p); !strings.Contains(s, "environment variable KMIRROR_STATIC_TEST_PASSWORD") || strings.Contains(s, secret) {
		t.Fatalf("String = %s", s)
	}
	t.Setenv("KMIRROR_STATIC_TEST_EMPTY", "")
	for env, want := range map[string]string{"KMIRROR_STATIC_TEST_UNSET": "KMIRROR_STATIC_TEST_UNSET is not set", "KMIRROR_STATIC_TEST_EMPTY": "environment variable KMIRROR_STATIC_TEST_EMPTY: "} {
		if _, err := New(Config{Username: "alice", PasswordEnv: env}); !errors.Is(err, auth.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("New(PasswordEnv %s) = %v, want ErrInvalidConfig mentioning %q", env, err, want)
		}
	}
	if _, err := New(Config{Username: "alice", Password: auth.NewSecret(secret), PasswordEnv: "KMIRROR_STATIC_TEST_PASSWORD"}); err == nil || !strings.Contains(err.Error(), "keep one") {
		t.Errorf("password and environment: %v", err)
	}
}

func TestNewFromConfig(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "password")
	writeFile(t, path, secret+"\n")
	p, err := NewFromConfig(t.Context(), "kafka-creds", plugin.Config{"username": "alice", "password_file": path, "mechanisms": []any{"SCRAM-SHA-512"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c, err := p.Credentials(t.Context(), req(auth.MechanismSCRAMSHA512))
	if err != nil || c.Username != "alice" || c.Password.Reveal() != secret {
		t.Fatalf("Credentials = %+v, %v", c, err)
	}
	if m := p.Info().Mechanisms; !slices.Equal(m, []string{auth.MechanismSCRAMSHA512}) {
		t.Fatalf("mechanisms %v", m)
	}
}

func TestNewFromConfigNamesTheKey(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	for _, c := range []struct {
		cfg  plugin.Config
		want map[string]string
	}{
		{plugin.Config{"password": secret}, map[string]string{"username": "required"}},
		{plugin.Config{"username": "alice"}, map[string]string{"password": "no password: set a password, a password file or a password environment variable"}},
		{plugin.Config{"username": "alice", "password": secret, "password_file": "/x"}, map[string]string{"password": "both a password and a password file are set; keep one"}},
		{plugin.Config{"username": "alice", "password": secret, "mechanisms": []any{"OAUTHBEARER"}}, map[string]string{"mechanisms": "mechanism OAUTHBEARER needs tokens, not a password; use the oauth provider"}},
		{plugin.Config{"username": "alice", "password": 42}, map[string]string{"password": "must be a string"}},
		{plugin.Config{"username": "alice", "password_file": missing}, map[string]string{"password_file": ""}},
	} {
		p, err := NewFromConfig(t.Context(), "creds", c.cfg)
		var ce *plugin.ConfigError
		if p != nil || !errors.As(err, &ce) || len(ce.Problems) != len(c.want) {
			t.Errorf("NewFromConfig(%v) = %v; want a *plugin.ConfigError naming %v", c.cfg, err, c.want)
			continue
		}
		for _, pr := range ce.Problems {
			want, ok := c.want[pr.Key]
			if !ok || want != "" && pr.Reason != want {
				t.Errorf("NewFromConfig(%v): %s: %q, want %q", c.cfg, pr.Key, pr.Reason, want)
			}
		}
		if leak := authtest.Leaks(err, secret); leak != "" {
			t.Errorf("NewFromConfig(%v): %s", c.cfg, leak)
		}
	}
}
