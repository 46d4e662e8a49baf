package compat

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
)

// The kmirror binary, built once per test process.
var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

func kmirrorBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "kmirror-compat-bin")
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

// daemon is one `kmirror run` process of a test; the test's cleanup stops it.
type daemon struct {
	httpAddr string

	mu   sync.Mutex
	logs strings.Builder
	done chan struct{}
	cmd  *exec.Cmd
}

// startKmirror writes cfg (a configuration without the http.address and
// admin.address keys, which it adds) and runs `kmirror run` on it.
func startKmirror(t testing.TB, cfg string) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{httpAddr: freeAddr(t), done: make(chan struct{})}
	cfg = fmt.Sprintf("http.address: %s\nhttp.status.enable: true\nadmin.address: %s\n", d.httpAddr, freeAddr(t)) + cfg
	path := filepath.Join(dir, "kmirror.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(kmirrorBinary(t), "run", "--config", path)
	// The daemon reads KMIRROR_* variables as configuration and refuses
	// unknown ones: the harness's own (KMIRROR_COMPAT_VERSIONS, ...) stay out.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KMIRROR_") {
			d.cmd.Env = append(d.cmd.Env, kv)
		}
	}
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // owned by the daemon: ends when the process exits
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			d.mu.Lock()
			d.logs.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
		}
		_ = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("kmirror log (tail):\n%s", tail(d.log(), 80))
		}
	})
	return d
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// running reports whether the process is still running.
func (d *daemon) running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

func (d *daemon) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs.String()
}

// describe reads /v1/describe; ok is false while the daemon does not answer.
func (d *daemon) describe() (admin.Status, bool) {
	resp, err := http.Get("http://" + d.httpAddr + "/v1/describe")
	if err != nil {
		return admin.Status{}, false
	}
	defer resp.Body.Close()
	var out struct {
		Mirrors admin.Status `json:"mirrors"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil {
		return admin.Status{}, false
	}
	return out.Mirrors, true
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
