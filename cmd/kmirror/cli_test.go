package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// kmirrorIn runs the binary with stdin and returns its exit code and
// output.
func kmirrorIn(t *testing.T, stdin string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("running kmirror %v: %v", args, err)
	}
	return code, o.String(), e.String()
}

// TestConfigFromKMIRROR_CONFIGAndStdin: without --config the file comes
// from $KMIRROR_CONFIG (which is no configuration key), and --config -
// reads standard input; --config wins over the variable.
func TestConfigFromKMIRROR_CONFIGAndStdin(t *testing.T) {
	t.Parallel()
	text := strings.Replace(validBase, "/var/lib/kmirror", t.TempDir(), 1)
	p := writeFile(t, "kmirror.yaml", text)
	code, out, errOut := kmirror(t, []string{"KMIRROR_CONFIG=" + p}, "config", "validate")
	if code != exitOK || !strings.Contains(out, p+" is valid") {
		t.Fatalf("KMIRROR_CONFIG: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = kmirrorIn(t, text, nil, "config", "validate", "--config", "-")
	if code != exitOK || !strings.Contains(out, "standard input is valid") || !strings.Contains(out, "127.0.0.1:9092") {
		t.Fatalf("--config -: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = kmirrorIn(t, "destination: [", nil, "config", "validate", "--config", "-")
	if code != exitFailure || !strings.Contains(errOut, "standard input is not valid") {
		t.Fatalf("--config - with bad YAML: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = kmirror(t, []string{"KMIRROR_CONFIG=/nonexistent/kmirror.yaml"}, "config", "validate", "--config", p)
	if code != exitOK {
		t.Fatalf("--config must win over KMIRROR_CONFIG: exit %d\n%s", code, errOut)
	}
	code, _, errOut = kmirror(t, []string{"KMIRROR_CONFIG="}, "config", "validate")
	if code != exitUsage || !strings.Contains(errOut, "--config FILE is required (or set KMIRROR_CONFIG)") {
		t.Fatalf("no configuration: exit %d\n%s", code, errOut)
	}
}

// TestAdminCommandsNeedOnlyAddressAndToken: the admin commands run with
// --admin-address and a token from --admin-token-file or
// $KMIRROR_ADMIN_TOKEN, or with a daemon configuration of which they read
// only the admin keys: a destination password file that does not exist
// does not stop them (it stops `config validate`).
func TestAdminCommandsNeedOnlyAddressAndToken(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	addr, tok := d.cfg.AdminAddress, d.token(t)
	tokenFile := d.cfg.AdminTokenPath()
	listed := regexp.MustCompile(`dc1\s+src-a:9092,src-b:9092\s+3\s+`)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"token file", nil, []string{"mirrors", "list", "--admin-address", addr, "--admin-token-file", tokenFile}},
		{"token file, old flag", nil, []string{"mirrors", "list", "--admin-address", addr, "--token-file", tokenFile}},
		{"token in the environment", []string{"KMIRROR_ADMIN_TOKEN=" + tok}, []string{"mirrors", "list", "--admin-address", addr}},
		{"address and token in the environment", []string{"KMIRROR_ADMIN_TOKEN=" + tok, "KMIRROR_ADMIN_ADDRESS=" + addr}, []string{"mirrors", "list"}},
		{"config in the environment", []string{"KMIRROR_CONFIG=" + d.cfgPath}, []string{"mirrors", "list"}},
	} {
		code, out, errOut := kmirror(t, tc.env, tc.args...)
		if code != exitOK || !listed.MatchString(out) {
			t.Errorf("%s: exit %d\n%s%s", tc.name, code, out, errOut)
		}
		d.noSecret(t, out, errOut)
	}
	// A wrong token in the environment is refused (and --admin-token-file
	// wins over it).
	if code, _, errOut := kmirror(t, []string{"KMIRROR_ADMIN_TOKEN=wrong"}, "mirrors", "list", "--admin-address", addr); code != exitUnauthorized || !strings.Contains(errOut, "401") {
		t.Errorf("wrong KMIRROR_ADMIN_TOKEN: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := kmirror(t, []string{"KMIRROR_ADMIN_TOKEN=wrong"}, "mirrors", "list", "--admin-address", addr, "--admin-token-file", tokenFile); code != exitOK {
		t.Errorf("--admin-token-file must win over KMIRROR_ADMIN_TOKEN: exit %d\n%s", code, errOut)
	}

	// The daemon's configuration with a destination password file the
	// operator cannot read: only the admin keys are read.
	raw, err := os.ReadFile(d.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	withSecret := strings.Replace(string(raw), "  bootstrap.servers: 127.0.0.1:9092\n",
		"  bootstrap.servers: 127.0.0.1:9092\n  security.protocol: SASL_SSL\n  sasl.mechanism: SCRAM-SHA-512\n  sasl.username: kmirror\n  sasl.password.file: /nonexistent/dr-password\n", 1)
	p := writeFile(t, "kmirror.yaml", withSecret)
	if code, _, errOut := kmirror(t, nil, "config", "validate", "--config", p); code != exitFailure || !strings.Contains(errOut, "/nonexistent/dr-password") {
		t.Fatalf("the test's configuration should not validate as a whole: exit %d\n%s", code, errOut)
	}
	code, out, errOut := kmirror(t, nil, "describe", "dc1", "--config", p)
	if code != exitOK || !strings.Contains(out, "source log truncated") {
		t.Fatalf("describe with an unreadable destination password file: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = kmirrorIn(t, withSecret, nil, "mirrors", "pause", "dc1", "--topics", "orders", "--config", "-")
	if code != exitOK || !strings.Contains(out, "mirror dc1") {
		t.Fatalf("mirrors pause with --config -: exit %d\n%s%s", code, out, errOut)
	}
}

// TestDescribeOutputFormats: `kmirror describe` and `kmirror mirrors
// describe` are one command; their text, JSON and YAML forms are golden
// (testdata/describe.*.golden), and so are those of mirrors list.
func TestDescribeOutputFormats(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	for _, format := range []string{"text", "json", "yaml"} {
		code, out, errOut := kmirror(t, nil, "describe", "--config", d.cfgPath, "-o", format)
		if code != exitOK {
			t.Fatalf("describe -o %s: exit %d\n%s", format, code, errOut)
		}
		_, same, _ := kmirror(t, nil, "mirrors", "describe", "dc1", "--config", d.cfgPath, "-o", format)
		if same != out {
			t.Errorf("mirrors describe dc1 -o %s differs from describe -o %s:\n%s\n%s", format, format, same, out)
		}
		golden(t, "describe."+format, out)
		code, out, errOut = kmirror(t, nil, "mirrors", "list", "--config", d.cfgPath, "-o", format)
		if code != exitOK {
			t.Fatalf("mirrors list -o %s: exit %d\n%s", format, code, errOut)
		}
		golden(t, "mirrors-list."+format, out)
	}
	// An unknown mirror is an error in the format asked for.
	code, _, errOut := kmirror(t, nil, "describe", "nope", "--config", d.cfgPath, "-o", "json")
	if code != exitNotFound || !strings.HasPrefix(errOut, "{\n  \"error\": ") || !strings.Contains(errOut, `\"nope\"`) {
		t.Fatalf("describe nope -o json: exit %d\n%s", code, errOut)
	}
}

// TestFirstRunConfigInitValidateRun is an operator's first run:
// `config init` with flags (standard input is not a terminal), `config
// validate` of the file as written, then `run` with it against two
// in-process clusters: the records and their offsets reach the
// destination.
func TestFirstRunConfigInitValidateRun(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.NewCluster(t), kfaketest.NewCluster(t, kfake.NumBrokers(1))
	srcCl := kfaketest.NewClient(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	kfaketest.CreateTopic(t, srcCl, "orders", 2, nil)
	const records = 50
	for i := range records {
		r := &kgo.Record{Topic: "orders", Partition: int32(i % 2), Value: []byte(fmt.Sprintf("order-%d", i))}
		if err := srcCl.ProduceSync(kfaketest.Context(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "kmirror.yaml")
	code, out, errOut := kmirror(t, nil, "config", "init",
		"--source-bootstrap", strings.Join(src.ListenAddrs(), ","),
		"--destination-bootstrap", strings.Join(dst.ListenAddrs(), ","),
		"--topics", "orders", "--name", "first",
		"--state-dir", filepath.Join(dir, "state"),
		"--http-address", "127.0.0.1:0", "--admin-address", "127.0.0.1:0", file)
	if code != exitOK || !strings.Contains(out, "wrote "+file) {
		t.Fatalf("config init: exit %d\n%s%s", code, out, errOut)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config init wrote %v (%v); want mode 0600", fi, err)
	}
	if code, _, errOut := kmirror(t, nil, "config", "init", "--source-bootstrap", "a:1", "--destination-bootstrap", "b:2", file); code != exitFailure || !strings.Contains(errOut, "--force") {
		t.Fatalf("config init over an existing file: exit %d\n%s", code, errOut)
	}
	if code, out, errOut := kmirror(t, nil, "config", "validate", "--config", file); code != exitOK || !strings.Contains(out, "first: source") {
		t.Fatalf("config validate of what init wrote: exit %d\n%s%s", code, out, errOut)
	}

	d := startRun(t, file, "KMIRROR_LOG_FORMAT=json")
	dstCl := kfaketest.NewClient(t, dst)
	kfaketest.WaitFor(t, "the records on the destination", func() (bool, string) {
		ends, err := kadm.NewClient(dstCl).ListEndOffsets(kfaketest.Context(t), "orders")
		if err != nil {
			return false, err.Error()
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n == records, fmt.Sprintf("%d of %d records; log:\n%s", n, records, d.log())
	})
	// Offsets preserved: record i of partition p has the same offset on
	// both sides.
	cl := kfaketest.NewClient(t, dst, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < records {
		fs := cl.PollFetches(kfaketest.Context(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("order-%d", int(r.Offset)*2+int(r.Partition)); string(r.Value) != want {
				t.Errorf("orders/%d@%d is %q, want %q", r.Partition, r.Offset, r.Value, want)
			}
			got++
		})
	}
}

// TestConfigInitAsksOnATerminal: on a terminal (script(1) gives the
// command one), config init asks for what its flags do not give; Enter
// keeps a default.
func TestConfigInitAsksOnATerminal(t *testing.T) {
	t.Parallel()
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) is not installed")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "kmirror.yaml")
	cmd := exec.Command(scriptBin, "-q", "-e", "-c", binary+" config init --name asked "+file, "/dev/null")
	// Source, destination, topics (Enter: the default), state directory.
	cmd.Stdin = strings.NewReader("src-kafka:9092\ndst-kafka:9092\n\n" + filepath.Join(dir, "state") + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("config init on a terminal: %v\n%s", err, out)
	}
	for _, q := range []string{"Source cluster bootstrap servers [localhost:9092]: ", "Topics to mirror (regexes, comma-separated) [.*]: ", "wrote " + file} {
		if !strings.Contains(string(out), q) {
			t.Errorf("the terminal does not show %q:\n%s", q, out)
		}
	}
	if strings.Contains(string(out), "Mirror name") {
		t.Errorf("asked for the mirror name although --name gave it:\n%s", out)
	}
	code, summary, errOut := kmirror(t, nil, "config", "validate", "--config", file)
	if code != exitOK || !strings.Contains(summary, "asked: source src-kafka:9092") || !strings.Contains(summary, "destination: dst-kafka:9092") || !strings.Contains(summary, "topics .* minus") {
		t.Fatalf("what config init wrote: exit %d\n%s%s", code, summary, errOut)
	}
}

// TestConfigSampleMinimalValidates: `config sample --minimal` validates as
// printed (`config sample` stays the full commented reference).
func TestConfigSampleMinimalValidates(t *testing.T) {
	t.Parallel()
	code, minimal, _ := run("config", "sample", "--minimal")
	if code != exitOK || !strings.Contains(minimal, "mirrors:\n  - name: \"source-to-destination\"") {
		t.Fatalf("config sample --minimal: exit %d\n%s", code, minimal)
	}
	code, out, errOut := kmirrorIn(t, minimal, nil, "config", "validate", "--config", "-")
	if code != exitOK {
		t.Fatalf("config sample --minimal does not validate: exit %d\n%s%s", code, out, errOut)
	}
	if _, full, _ := run("config", "sample"); len(full) < 4*len(minimal) || !strings.Contains(full, "dc1-to-dc2") {
		t.Fatalf("config sample is no longer the full reference:\n%s", full)
	}
}
