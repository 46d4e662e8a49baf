package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// binary is the kmirror binary built once for the process-level tests below.
var binary string

// The exit codes the tests expect: cli's, stable and documented in
// docs/cli.md.
const (
	exitOK      = cli.ExitOK
	exitFailure = cli.ExitFailure
	exitUsage   = cli.ExitUsage

	exitNotFound     = cli.ExitNotFound
	exitConflict     = cli.ExitConflict
	exitUnauthorized = cli.ExitUnauthorized
)

func TestMain(m *testing.M) {
	// The tests that run the daemon in process (the demo) start its
	// built-in plugins by re-executing this test binary as `plugin serve
	// <kind> <name>`, as the kmirror binary re-executes itself.
	if len(os.Args) == 5 && os.Args[1] == "plugin" && os.Args[2] == "serve" {
		os.Exit(cmdPlugin(os.Args[2:], os.Stdout, os.Stderr))
	}
	dir, err := os.MkdirTemp("", "kmirror-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "kmirror")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building kmirror:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// kmirror runs the binary with args and returns its exit code and output.
func kmirror(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
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

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVersionPrintsGoAndFranzGoVersions(t *testing.T) {
	t.Parallel()
	code, out, _ := kmirror(t, nil, "version")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"kmirror ", "commit:", "go:       go1.", "franz-go: v1.22.3"} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = kmirror(t, nil, "version", "--json")
	var info map[string]string
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info["franz_go_version"] != "v1.22.3" {
		t.Fatalf("version --json: exit %d, %q", code, out)
	}
}

func TestUnknownCommandIsAUsageError(t *testing.T) {
	t.Parallel()
	code, _, errOut := kmirror(t, nil, "mirrorz")
	if code != exitUsage || !strings.Contains(errOut, `unknown command "mirrorz"`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

const validBase = `
destination:
  bootstrap.servers: 127.0.0.1:9092
state:
  dir: /var/lib/kmirror
`

func TestConfigValidateAcceptsAValidFile(t *testing.T) {
	t.Parallel()
	p := writeFile(t, "ok.yaml", validBase+`
mirrors:
  - name: dc1-to-dc2
    bootstrap.servers: 127.0.0.1:9093
    mirror.topics.include: "orders.*,payments"
    security.protocol: SASL_PLAINTEXT
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: kmirror
    sasl.password: hunter2-very-secret
`)
	code, out, errOut := kmirror(t, nil, "config", "validate", "--config", p)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out, "is valid") || !strings.Contains(out, "dc1-to-dc2") {
		t.Fatalf("summary lacks the verdict or the mirror:\n%s", out)
	}
	if strings.Contains(out+errOut, "hunter2-very-secret") {
		t.Fatalf("the SASL password appears in the output:\n%s", out)
	}
}

// TestConfigValidateRejectsBadInput covers every kind of bad input issue #2
// lists: each must exit non-zero and name the key and the reason.
func TestConfigValidateRejectsBadInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", validBase + "mirror.num.replica.fetcher: 2\n", []string{"mirror.num.replica.fetcher", "unknown"}},
		{"wrong type", validBase + "mirror.num.replica.fetchers: many\n", []string{"mirror.num.replica.fetchers", "integer"}},
		{"invalid regex", validBase + "mirrors:\n  - name: m1\n    bootstrap.servers: h:1\n    mirror.topics.include: \"orders.(*\"\n", []string{"mirrors[m1].mirror.topics.include", "orders.(*"}},
		{"invalid ACL rule", validBase + "mirrors:\n  - name: m1\n    bootstrap.servers: h:1\n    mirror.acl.include: \"TOPICS;orders.*\"\n", []string{"mirrors[m1].mirror.acl.include", "TOPICS"}},
		{"unknown security protocol", validBase + "mirrors:\n  - name: m1\n    bootstrap.servers: h:1\n    security.protocol: SASL_TLS\n", []string{"mirrors[m1].security.protocol", "SASL_TLS"}},
		{"unknown SASL mechanism", validBase + "mirrors:\n  - name: m1\n    bootstrap.servers: h:1\n    security.protocol: SASL_PLAINTEXT\n    sasl.mechanism: SCRAM-SHA-1\n    sasl.username: u\n    sasl.password: p\n", []string{"mirrors[m1].sasl.mechanism", "SCRAM-SHA-1"}},
		{"missing bootstrap servers", validBase + "mirrors:\n  - name: m1\n    mirror.topics.include: a\n", []string{"mirrors[m1].bootstrap.servers", "required"}},
		{"duplicate mirror names", validBase + "mirrors:\n  - name: m1\n    bootstrap.servers: h:1\n  - name: m1\n    bootstrap.servers: h:2\n", []string{"m1", "duplicate"}},
		{"zero interval", validBase + "mirror.metadata.refresh.interval.ms: 0\n", []string{"mirror.metadata.refresh.interval.ms"}},
		{"negative interval", validBase + "replica.fetch.wait.max.ms: -5\n", []string{"replica.fetch.wait.max.ms"}},
		{"SASL without credentials", validBase + "mirrors:\n  - name: m1\n    bootstrap.servers: h:1\n    security.protocol: SASL_SSL\n    sasl.mechanism: PLAIN\n", []string{"mirrors[m1]", "sasl"}},
		{"unreadable TLS file", validBase + "mirrors:\n  - name: m1\n    bootstrap.servers: h:1\n    security.protocol: SSL\n    ssl.truststore.location: /nonexistent/ca.pem\n", []string{"mirrors[m1].ssl.truststore.location", "/nonexistent/ca.pem"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := writeFile(t, "bad.yaml", tc.yaml)
			code, out, errOut := kmirror(t, nil, "config", "validate", "--config", p)
			if code != exitFailure {
				t.Fatalf("exit %d, want %d; stdout:\n%s", code, exitFailure, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(strings.ToLower(errOut), strings.ToLower(w)) {
					t.Errorf("stderr does not mention %q:\n%s", w, errOut)
				}
			}
		})
	}
}

func TestConfigValidateNeverPrintsSecrets(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-value-that-must-not-leak"
	p := writeFile(t, "bad.yaml", validBase+`
mirrors:
  - name: m1
    bootstrap.servers: h:1
    security.protocol: SASL_SSL
    sasl.mechanism: SCRAM-SHA-3
    sasl.username: u
    sasl.password: `+secret+`
    sasl.jaas.config: 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="`+secret+`";'
    ssl.truststore.location: /nonexistent/`+"ca.pem"+`
`)
	code, out, errOut := kmirror(t, []string{"KMIRROR_MIRRORS__M1__SASL_OAUTHBEARER_CLIENT_SECRET=" + secret}, "config", "validate", "--config", p, "--set", "destination.sasl.password="+secret)
	if code == 0 {
		t.Fatalf("expected the file to be rejected")
	}
	if strings.Contains(out+errOut, secret) {
		t.Fatalf("a secret appears in the output:\n%s\n%s", out, errOut)
	}
}

func TestConfigValidateRequiresConfigFlag(t *testing.T) {
	t.Parallel()
	code, _, errOut := kmirror(t, nil, "config", "validate")
	if code != exitUsage || !strings.Contains(errOut, "--config") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestConfigReferenceMatchesDocs(t *testing.T) {
	t.Parallel()
	code, out, _ := kmirror(t, nil, "config", "reference")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	docs, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(docs) {
		t.Fatalf("`kmirror config reference` differs from docs/config.md; run `make docs`")
	}
}

// daemonProcess is a `kmirror run` child process with its log captured.
type daemonProcess struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []map[string]any
	raw    strings.Builder
	exited chan struct{}
}

func startRun(t *testing.T, cfgPath string, env ...string) *daemonProcess {
	t.Helper()
	cmd := exec.Command(binary, "run", "--config", cfgPath)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemonProcess{cmd: cmd, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // owned by the test: ends when the process closes stderr.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			d.mu.Lock()
			d.raw.WriteString(sc.Text() + "\n")
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				d.lines = append(d.lines, m)
			}
			d.mu.Unlock()
		}
		_ = cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-d.exited
	})
	return d
}

// waitLog waits for a JSON log line whose message contains msg and returns it.
func (d *daemonProcess) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	var line map[string]any
	kfaketest.WaitFor(t, fmt.Sprintf("log line %q", msg), func() (bool, string) {
		d.mu.Lock()
		for _, l := range d.lines {
			if m, _ := l["@message"].(string); strings.Contains(m, msg) {
				line = l
				break
			}
		}
		d.mu.Unlock()
		if line != nil {
			return true, ""
		}
		select {
		case <-d.exited:
			t.Fatalf("kmirror exited before logging %q:\n%s", msg, d.log())
		default:
		}
		return false, "log:\n" + d.log()
	})
	return line
}

func (d *daemonProcess) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.raw.String()
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRunServesReloadsAndShutsDown drives the daemon as an operator would:
// start, probe, reload with a bad file (kept), reload with a good one
// (applied), SIGTERM (clean exit 0).
func TestRunServesReloadsAndShutsDown(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	cfg := func(level string) string {
		return fmt.Sprintf("log.format: json\nlog.level: %s\nhttp.address: 127.0.0.1:0\nadmin.address: 127.0.0.1:0\nshutdown.timeout.ms: 5000\n%s", level,
			strings.Replace(validBase, "/var/lib/kmirror", stateDir, 1))
	}
	path := writeFile(t, "kmirror.yaml", cfg("info"))
	d := startRun(t, path)
	line := d.waitLog(t, "HTTP listener started")
	addr, _ := line["address"].(string)
	if addr == "" {
		t.Fatalf("no address in %v", line)
	}
	d.waitLog(t, "kmirror started")
	base := "http://" + addr
	if code, body := httpGet(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, _ := httpGet(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz = %d", code)
	}
	if code, body := httpGet(t, base+"/metrics"); code != 200 || !strings.Contains(body, `kmirror_build_info{`) {
		t.Fatalf("/metrics = %d, lacks kmirror_build_info:\n%s", code, body)
	}

	// The admin API runs on the engine, with the token created in state.dir.
	adminLine := d.waitLog(t, "admin API listening")
	adminAddr, _ := adminLine["address"].(string)
	tokenFile := filepath.Join(stateDir, "admin.token")
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 || !strings.HasPrefix(adminAddr, "http://127.0.0.1:") {
		t.Fatalf("admin API at %q, token file %v %v", adminAddr, fi, err)
	}
	if code, out, errOut := kmirror(t, nil, "mirrors", "list", "--admin-address", adminAddr, "--token-file", tokenFile, "--json"); code != 0 || !strings.Contains(out, `"mirrors": []`) {
		t.Fatalf("mirrors list against the daemon: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := kmirror(t, nil, "mirrors", "pause", "--mirror", "nope", "--admin-address", adminAddr, "--token-file", tokenFile); code != exitNotFound || !strings.Contains(errOut, "no such mirror") {
		t.Fatalf("pause of an unknown mirror: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := kmirror(t, nil, "mirrors", "list", "--admin-address", adminAddr); code != exitUnauthorized || !strings.Contains(errOut, "401") {
		t.Fatalf("mirrors list without a token: exit %d\n%s", code, errOut)
	}
	if tok, _ := os.ReadFile(tokenFile); strings.Contains(d.log(), strings.TrimSpace(string(tok))) {
		t.Fatal("the daemon logged its admin token")
	}

	// A bad file is rejected on SIGHUP and the daemon keeps serving.
	if err := os.WriteFile(path, []byte(cfg("info")+"mirror.num.replica.fetchers: zero\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	rejected := d.waitLog(t, "configuration reload rejected")
	if e, _ := rejected["error"].(string); !strings.Contains(e, "mirror.num.replica.fetchers") {
		t.Fatalf("rejection does not name the key: %v", rejected)
	}
	if code, _ := httpGet(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz after a rejected reload = %d", code)
	}

	// A good file is applied.
	if err := os.WriteFile(path, []byte(cfg("debug")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitLog(t, "configuration reloaded")
	if _, body := httpGet(t, base+"/metrics"); !strings.Contains(body, `kmirror_config_reloads_total{result="applied"} 1`) ||
		!strings.Contains(body, `kmirror_config_reloads_total{result="rejected"} 1`) {
		t.Fatalf("reload counters wrong:\n%s", body)
	}

	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("kmirror did not exit within 10s of SIGTERM:\n%s", d.log())
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM:\n%s", code, d.log())
	}
	if !strings.Contains(d.log(), "kmirror stopped") {
		t.Fatalf("no orderly stop logged:\n%s", d.log())
	}
}

func TestRunRefusesAnInvalidFile(t *testing.T) {
	t.Parallel()
	p := writeFile(t, "bad.yaml", validBase+"log.level: loud\n")
	code, _, errOut := kmirror(t, nil, "run", "--config", p)
	if code != exitFailure || !strings.Contains(errOut, "log.level") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}

// A pod in a namespace with a Service named kmirror gets Kubernetes'
// service-link variables (KMIRROR_SERVICE_HOST, KMIRROR_PORT_9644_TCP, ...):
// the daemon starts with them, and a typo in a real key's variable still
// stops it.
func TestRunStartsWithKubernetesServiceLinkVariables(t *testing.T) {
	t.Parallel()
	stateDir := t.TempDir()
	path := writeFile(t, "kmirror.yaml", "log.format: json\nhttp.address: 127.0.0.1:0\nadmin.address: 127.0.0.1:0\n"+strings.Replace(validBase, "/var/lib/kmirror", stateDir, 1))
	links := []string{
		"KMIRROR_SERVICE_HOST=10.96.0.12", "KMIRROR_SERVICE_PORT=9644", "KMIRROR_SERVICE_PORT_METRICS=9644",
		"KMIRROR_PORT=tcp://10.96.0.12:9644", "KMIRROR_PORT_9644_TCP=tcp://10.96.0.12:9644", "KMIRROR_PORT_9644_TCP_PROTO=tcp",
		"KMIRROR_PORT_9644_TCP_PORT=9644", "KMIRROR_PORT_9644_TCP_ADDR=10.96.0.12",
	}
	d := startRun(t, path, links...)
	d.waitLog(t, "kmirror started")
	if code, _, errOut := kmirror(t, append(links, "KMIRROR_LOG_LEVL=debug"), "config", "validate", "--config", path); code != exitFailure || !strings.Contains(errOut, "KMIRROR_LOG_LEVL") || strings.Contains(errOut, "KMIRROR_SERVICE_HOST") {
		t.Fatalf("validate with a typo among service links: exit %d\n%s", code, errOut)
	}
}
