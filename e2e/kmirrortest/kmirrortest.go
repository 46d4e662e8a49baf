// Package kmirrortest runs kmirror daemons for the e2e test packages that
// start clusters of their own (e2e/compat, e2e/auth, e2e/destfaults): the
// binary built once per test process from this checkout, and one `kmirror
// run` process per call, with its log kept and its status read. The main
// e2e package has a richer harness of its own (restarts, the CLI).
package kmirrortest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// The kmirror binary, built once per test process.
var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// Binary returns the path of the kmirror binary of this checkout, built
// once per test process (`go build ./cmd/kmirror`).
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "kmirror-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "kmirror")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/kmirror")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/kmirror: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// RemoveBinary deletes the binary Binary built, if it did (TestMain calls
// it once the tests ran).
func RemoveBinary() {
	if binary != "" {
		_ = os.RemoveAll(filepath.Dir(binary))
	}
}

// Process is one `kmirror run` process of a test; the test's cleanup stops
// it (Stop) and, when the test failed, logs the tail of its log.
type Process struct {
	// HTTPAddr and AdminAddr are where its http.address and admin.address
	// listen.
	HTTPAddr, AdminAddr string
	// Dir is a directory of the test for the daemon's files (its
	// configuration is Dir/kmirror.yaml).
	Dir string

	mu   sync.Mutex
	logs strings.Builder
	done chan struct{}
	cmd  *exec.Cmd
}

// Options configure Start.
type Options struct {
	// Config returns the configuration for a daemon whose files go in dir,
	// without http.address, http.status.enable and admin.address, which
	// Start adds.
	Config func(dir string) string
	// DropEnv are prefixes of environment variables the daemon does not
	// get, besides KMIRROR_ (the daemon reads KMIRROR_* variables as
	// configuration and refuses unknown ones).
	DropEnv []string
}

// Start runs `kmirror run` on the configuration opts.Config makes, in its
// own process group with SIGKILL as its parent-death signal
// (kafkatest.StartProcess).
func Start(t testing.TB, opts Options) *Process {
	t.Helper()
	p := &Process{HTTPAddr: FreeAddr(t), AdminAddr: FreeAddr(t), Dir: t.TempDir(), done: make(chan struct{})}
	cfg := fmt.Sprintf("http.address: %s\nhttp.status.enable: true\nadmin.address: %s\n", p.HTTPAddr, p.AdminAddr) + opts.Config(p.Dir)
	path := filepath.Join(p.Dir, "kmirror.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(Binary(t), "run", "--config", path)
	drop := append([]string{"KMIRROR_"}, opts.DropEnv...)
	for _, kv := range os.Environ() {
		if !hasAnyPrefix(kv, drop) {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := kafkatest.StartProcess(p.cmd); err != nil {
		t.Fatal(err)
	}
	go func() { // owned by the Process: ends when the process exits
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("kmirror log (tail):\n%s", Tail(p.Log(), 80))
		}
	})
	return p
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// Stop sends SIGTERM and waits for the process to exit (SIGKILL after
// 30 s). Stopping a stopped process does nothing.
func (p *Process) Stop() {
	if !p.Running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Running reports whether the process is still running.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Exited is closed once the process exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Log returns everything the process wrote to standard error so far.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// Describe reads GET /v1/describe; ok is false while the daemon does not
// answer.
func (p *Process) Describe() (admin.Status, bool) {
	resp, err := http.Get("http://" + p.HTTPAddr + "/v1/describe")
	if err != nil {
		return admin.Status{}, false
	}
	defer resp.Body.Close()
	var out struct {
		Mirrors admin.Status `json:"mirrors"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		return admin.Status{}, false
	}
	return out.Mirrors, true
}

// FreeAddr returns a loopback address with a port free now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
