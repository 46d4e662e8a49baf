package auth

import (
	"bufio"
	"context"
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

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
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
		dir, err := os.MkdirTemp("", "kmirror-auth-bin")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "kmirror")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/kmirror")
		cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/kmirror: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// daemon is one `kmirror run` process of a test; the test's cleanup stops
// it.
type daemon struct {
	httpAddr string

	mu   sync.Mutex
	logs strings.Builder
	done chan struct{}
	cmd  *exec.Cmd
}

// startKmirror runs `kmirror run` on cfg, a configuration without the
// daemon-wide keys it adds (addresses, log format, retry timings, state).
func startKmirror(t testing.TB, cfg string) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{httpAddr: freeAddr(t), done: make(chan struct{})}
	cfg = fmt.Sprintf(`http.address: %s
http.status.enable: true
admin.address: %s
log.level: debug
log.format: json
mirror.metadata.refresh.interval.ms: 2000
mirror.failed.retry.initial.backoff.ms: 200
mirror.failed.retry.max.backoff.ms: 2000
shutdown.timeout.ms: 20000
state:
  dir: %s
`, d.httpAddr, freeAddr(t), filepath.Join(dir, "state")) + cfg
	path := filepath.Join(dir, "kmirror.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(kmirrorBinary(t), "run", "--config", path)
	// KMIRROR_* variables are configuration to the daemon: none of the
	// environment's reach it.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KMIRROR_") && !strings.HasPrefix(kv, "KRB5") {
			d.cmd.Env = append(d.cmd.Env, kv)
		}
	}
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := kafkatest.StartProcess(d.cmd); err != nil {
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

// waitFor polls describe every 200 ms until ok says so, failing the test
// with what last said otherwise when ctx ends or the daemon exits.
func (d *daemon) waitFor(t testing.TB, ctx context.Context, what string, ok func(admin.Status) (bool, string)) admin.Status {
	t.Helper()
	last := "describe never answered"
	for {
		if st, answered := d.describe(); answered {
			var done bool
			if done, last = ok(st); done {
				return st
			}
		}
		if !d.running() {
			t.Fatalf("kmirror exited while waiting for %s:\n%s", what, tail(d.log(), 40))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not in time; last: %s", what, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitMirrored waits until every partition of topic is MIRRORING up to the
// source's end offset.
func (d *daemon) waitMirrored(t testing.TB, ctx context.Context, topic string, partitions int32) {
	t.Helper()
	adm := adminOf(t, source)
	d.waitFor(t, ctx, topic+" mirrored", func(st admin.Status) (bool, string) {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		var lagging []string
		for p := range partitions {
			end, _ := ends.Lookup(topic, p)
			ps, found := partitionStatus(st, topic, p)
			if !found || ps.State != "MIRRORING" || ps.LastMirroredOffset+1 != end.Offset {
				lagging = append(lagging, fmt.Sprintf("%d: %s mirrored to %d of %d %s", p, ps.State, ps.LastMirroredOffset+1, end.Offset, ps.LastError))
			}
		}
		return len(lagging) == 0, strings.Join(lagging, "; ")
	})
}

func partitionStatus(st admin.Status, topic string, p int32) (admin.PartitionStatus, bool) {
	for _, m := range st.Mirrors {
		for _, ps := range m.Partitions {
			if ps.Topic == topic && ps.Partition == p {
				return ps, true
			}
		}
	}
	return admin.PartitionStatus{}, false
}

func adminOf(t testing.TB, c *kafkatest.Cluster) *kadm.Client {
	t.Helper()
	adm, err := c.Admin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	return adm
}

// client is a harness client of c on its PLAINTEXT listener: the tests
// write and read with it, kmirror alone uses GSSAPI.
func client(t testing.TB, c *kafkatest.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := c.NewClient(kafkatest.Identity{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// verifyTopic compares every partition of topic on both clusters record by
// record (offsets, keys, values, headers, timestamps, transaction markers
// and visibility) and returns how many records the source holds.
func verifyTopic(t testing.TB, ctx context.Context, topic string, partitions int32) int {
	t.Helper()
	src, dst := client(t, source), client(t, destination)
	n := 0
	for p := range partitions {
		log, diff, err := verify.Partition(ctx, src, dst, topic, p)
		if err != nil {
			t.Fatalf("verifying %s[%d]: %v", topic, p, err)
		}
		if diff != "" {
			t.Fatalf("%s[%d] differs between the source and the destination: %s", topic, p, diff)
		}
		for _, e := range log.Entries {
			if !e.Control {
				n++
			}
		}
	}
	return n
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
