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

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/auth/authtest"
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
