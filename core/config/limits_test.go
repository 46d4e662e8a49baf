package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/config/value"
)

// loadWithin runs Load in a goroutine and fails the test if it has not
// returned within d: a configuration path that blocks (a named pipe) or
// reads without end (/dev/zero) must be refused at once.
func loadWithin(t *testing.T, d time.Duration, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := Load(Source{Path: path})
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Load(%s) has not returned after %v", path, d)
		return nil
	}
}

func TestConfigFileOverSizeLimitIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "big.yaml")
	data := minimal + "# " + strings.Repeat("x", MaxFileBytes) + "\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	err := loadWithin(t, 10*time.Second, path)
	if !errors.Is(err, value.ErrTooLarge) {
		t.Fatalf("Load of a %d-byte file: %v, want value.ErrTooLarge", len(data), err)
	}
	for _, want := range []string{path, "4 MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// The same bytes given to Parse (standard input) are refused too.
	if _, err := Parse([]byte(data), "yaml", nil, nil); !errors.Is(err, value.ErrTooLarge) {
		t.Errorf("Parse of %d bytes: %v, want value.ErrTooLarge", len(data), err)
	}
}

func TestConfigDevZeroIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	// Directly, and through a link with a configuration extension.
	link := filepath.Join(t.TempDir(), "zero.yaml")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/dev/zero", link} {
		err := loadWithin(t, 10*time.Second, path)
		if !errors.Is(err, value.ErrNotRegular) {
			t.Fatalf("Load(%s) = %v, want value.ErrNotRegular", path, err)
		}
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "a character device") || !strings.Contains(err.Error(), "4 MiB") {
			t.Errorf("error %q should name the path, what it is and the limit", err)
		}
	}
}

func TestConfigFIFODoesNotHang(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "pipe.yaml")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	err := loadWithin(t, 10*time.Second, path)
	if !errors.Is(err, value.ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") {
		t.Fatalf("Load of a FIFO = %v, want value.ErrNotRegular naming a named pipe", err)
	}
}

func TestConfigDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "conf.yaml")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	err := loadWithin(t, 10*time.Second, path)
	if !errors.Is(err, value.ErrNotRegular) || !strings.Contains(err.Error(), "a directory") {
		t.Fatalf("Load of a directory = %v, want value.ErrNotRegular naming a directory", err)
	}
	// A missing file is still fs.ErrNotExist.
	if _, err := Load(Source{Path: filepath.Join(t.TempDir(), "none.yaml")}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file = %v, want fs.ErrNotExist", err)
	}
}

func TestSecretFileLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := writeFile(t, dir, "pw", strings.Repeat("p", value.MaxSecretFileBytes+1))
	errs := parseErrs(t, minimal+"mirrors:\n  - name: m1\n    bootstrap.servers: s:1\n    security.protocol: SASL_PLAINTEXT\n    sasl.username: u\n    sasl.password.file: "+big+"\n", nil, nil)
	if !errs.Has("mirrors[m1].sasl.password.file", "the limit is 64 KiB") {
		t.Errorf("a password file over the limit: got\n%s", indent(errs.Error()))
	}
	errs = parseErrs(t, minimal+"mirrors:\n  - name: m1\n    bootstrap.servers: s:1\n    security.protocol: SSL\n    ssl.truststore.location: /dev/zero\n", nil, nil)
	if !errs.Has("mirrors[m1].ssl.truststore.location", "a character device") {
		t.Errorf("a truststore at /dev/zero: got\n%s", indent(errs.Error()))
	}
}

func TestTooManyMirrorsIsRefused(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(minimal + "mirrors:\n")
	for i := 0; i <= MaxMirrors; i++ {
		fmt.Fprintf(&b, "  - {name: m%d, bootstrap.servers: 's:1'}\n", i)
	}
	errs := parseErrs(t, b.String(), nil, nil)
	if !errs.Has("mirrors", fmt.Sprintf("%d mirrors, more than the limit of %d", MaxMirrors+1, MaxMirrors)) {
		t.Errorf("got\n%s", indent(errs.Error()))
	}
}

func TestTooManyListEntriesIsRefused(t *testing.T) {
	t.Parallel()
	many := strings.TrimSuffix(strings.Repeat("t,", MaxListEntries+1), ",")
	for _, key := range []string{"mirror.topics.include", "mirror.acl.include", "bootstrap.servers"} {
		servers := "    bootstrap.servers: s:1\n"
		if key == "bootstrap.servers" {
			servers = ""
		}
		errs := parseErrs(t, minimal+"mirrors:\n  - name: m1\n"+servers+"    "+key+": \""+many+"\"\n", nil, nil)
		if !errs.Has("mirrors[m1]."+key, fmt.Sprintf("%d entries, more than the limit of %d per key", MaxListEntries+1, MaxListEntries)) {
			t.Errorf("%s: got\n%s", key, indent(errs.Error()))
		}
	}
}

func TestEveryBadListEntryIsReported(t *testing.T) {
	t.Parallel()
	const m = "mirrors[m1]."
	errs := parseErrs(t, minimal+`mirrors:
  - name: m1
    bootstrap.servers: "s:1,nope,s:2,PLAINTEXT://s:3"
    mirror.topics.include: ["orders.(", "ok", "[z-a]", "x{2,1}"]
    mirror.groups.exclude: "a,,b,"
    mirror.acl.include: ["TOPIC;a", "TOPIK", "TOPIC;b;REED"]
`, nil, nil)
	for _, w := range []struct{ path, want string }{
		{m + "bootstrap.servers[1]", `server "nope" is not host:port`},
		{m + "bootstrap.servers[3]", `remove the "PLAINTEXT://" prefix`},
		{m + "mirror.topics.include[0]", `invalid regex "orders.("`},
		{m + "mirror.topics.include[2]", `invalid regex "[z-a]"`},
		{m + "mirror.topics.include[3]", `invalid regex "x{2,1}"`},
		{m + "mirror.groups.exclude[1]", "empty"},
		{m + "mirror.groups.exclude[3]", "empty"},
		{m + "mirror.acl.include[1]", `"TOPIK": resourceType`},
		{m + "mirror.acl.include[2]", `"TOPIC;b;REED": operation`},
	} {
		if !errs.Has(w.path, w.want) {
			t.Errorf("want %s: %s; got\n%s", w.path, w.want, indent(errs.Error()))
		}
	}
	if n := len(errs.List); n != 9 {
		t.Errorf("%d errors, want 9:\n%s", n, indent(errs.Error()))
	}
}

func TestErrorsAreCapped(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(minimal)
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&b, "unknown.key.%d: x\n", i)
	}
	errs := parseErrs(t, b.String(), nil, nil)
	if n := len(errs.List); n != MaxErrors+1 {
		t.Fatalf("%d errors listed, want %d and a count of the rest", n, MaxErrors+1)
	}
	if last := errs.List[MaxErrors].Reason; !strings.Contains(last, "4900 more problems") {
		t.Errorf("last line %q, want a count of the 4900 not listed", last)
	}
}

func TestACLPrincipalNeedsType(t *testing.T) {
	t.Parallel()
	errs := parseErrs(t, minimal+"mirrors:\n  - name: m1\n    bootstrap.servers: s:1\n    mirror.acl.include: [\"*;*;*;*;alice\", \"TOPIC;t;READ;ALLOW;bob|carol\"]\n", nil, nil)
	for i, name := range []string{"alice", "bob|carol"} {
		if !errs.Has(fmt.Sprintf("mirrors[m1].mirror.acl.include[%d]", i), fmt.Sprintf("principal: %q can never match: Kafka principals are Type:name (User:%s", name, name)) {
			t.Errorf("principal %s: got\n%s", name, indent(errs.Error()))
		}
	}
	for _, ok := range []string{"*;*;*;*;User:alice", "*;*;*;*;User:(alice|bob)", "*;*;*;*;.*alice", "*;*;*;*;[A-Za-z]+:svc-.*", "*;*;*;*;*"} {
		mustParse(t, minimal+"mirrors:\n  - name: m1\n    bootstrap.servers: s:1\n    mirror.acl.include: [\""+ok+"\"]\n", nil, nil)
	}
}

func TestRE2Hints(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, pattern, want string }{
		{"mirror.topics.include", `(?!internal-).*`, "no look-ahead or look-behind"},
		{"mirror.topics.include", `(?=orders).*`, "no look-ahead or look-behind"},
		{"mirror.groups.include", `(?<=x)y`, "no look-ahead or look-behind"},
		{"mirror.groups.exclude", `(?<!x)y`, "no look-ahead or look-behind"},
		{"mirror.topics.include", `(a)\\1`, "no back-references"},
		{"mirror.topic.properties.exclude", `(?P<n>a)\\k<n>`, "no back-references"},
	} {
		errs := parseErrs(t, minimal+"mirrors:\n  - name: m1\n    bootstrap.servers: s:1\n    "+tc.key+": [\""+tc.pattern+"\"]\n", nil, nil)
		path := "mirrors[m1]." + tc.key + "[0]"
		if !errs.Has(path, "error parsing regexp") || !errs.Has(path, "RE2") || !errs.Has(path, tc.want) {
			t.Errorf("%s %s: want Go's error and the RE2 hint %q; got\n%s", tc.key, tc.pattern, tc.want, indent(errs.Error()))
		}
	}
	// Look-around in an ACL rule's regex field gets the hint too.
	errs := parseErrs(t, minimal+"mirrors:\n  - name: m1\n    bootstrap.servers: s:1\n    mirror.acl.include: [\"TOPIC;(?!x).*\"]\n", nil, nil)
	if !errs.Has("mirrors[m1].mirror.acl.include[0]", "no look-ahead or look-behind") {
		t.Errorf("ACL look-ahead: got\n%s", indent(errs.Error()))
	}
	// An escaped backslash before a digit is no back-reference.
	if h := value.RE2Hint(`a\\1`); h != "" {
		t.Errorf(`RE2Hint(a\\1) = %q, want none`, h)
	}
}
