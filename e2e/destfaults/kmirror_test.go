package destfaults

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
	"regexp"
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

func kmirrorBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "kmirror-destfaults-bin")
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

// daemon is one `kmirror run` process of a test, mirroring topics of source
// to destination; the test's cleanup stops it.
type daemon struct {
	t        testing.TB
	httpAddr string
	mirror   string
	stateDir string

	mu   sync.Mutex
	logs strings.Builder
	done chan struct{}
	cmd  *exec.Cmd
}

// startKmirror runs `kmirror run` mirroring the topics matching include,
// with the file state store in a directory of the test.
func startKmirror(t testing.TB, include string) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{t: t, httpAddr: freeAddr(t), done: make(chan struct{}), stateDir: filepath.Join(dir, "state"),
		mirror: "m" + strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(strings.TrimPrefix(t.Name(), "Test"), ""))}
	if len(d.mirror) > 40 {
		d.mirror = d.mirror[:40]
	}
	cfg := fmt.Sprintf(`log.level: debug
log.format: json
http.address: %s
http.status.enable: true
admin.address: %s
mirror.metadata.refresh.interval.ms: 2000
mirror.failed.retry.initial.backoff.ms: 200
mirror.failed.retry.max.backoff.ms: 2000
shutdown.timeout.ms: 20000
destination:
  bootstrap.servers: %s
state:
  dir: %s
mirrors:
  - name: %s
    bootstrap.servers: %s
    mirror.topics.include: %q
`, d.httpAddr, freeAddr(t), destination.BootstrapServers(kafkatest.Plaintext), d.stateDir, d.mirror, source.BootstrapServers(kafkatest.Plaintext), include)
	path := filepath.Join(dir, "kmirror.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(kmirrorBinary(t), "run", "--config", path)
	// The daemon reads KMIRROR_* variables as configuration and refuses
	// unknown ones: the harness's own stay out.
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
		d.stop()
		if t.Failed() {
			t.Logf("kmirror log (tail):\n%s", tail(d.log(), 80))
		}
	})
	return d
}

// stop sends SIGTERM and waits for the process to exit (SIGKILL after 30 s).
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
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

func (d *daemon) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.logs.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// status reads /v1/describe; ok is false while the daemon does not answer.
func (d *daemon) status() (admin.Status, bool) {
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

// partitionStatus returns the status of topic/partition in the daemon's
// mirror, if it runs it.
func (d *daemon) partitionStatus(topic string, p int32) (admin.PartitionStatus, bool) {
	st, ok := d.status()
	if !ok {
		return admin.PartitionStatus{}, false
	}
	for _, m := range st.Mirrors {
		for _, ps := range m.Partitions {
			if m.Name == d.mirror && ps.Topic == topic && ps.Partition == p {
				return ps, true
			}
		}
	}
	return admin.PartitionStatus{}, false
}

// metric reads the daemon's /metrics: the sum of the samples of metric
// name whose line holds every one of labels (e.g. `result="error"`).
func (d *daemon) metric(name string, labels ...string) (sum float64, ok bool) {
	resp, err := http.Get("http://" + d.httpAddr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, found := strings.CutPrefix(line, name); found && (strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, " ")) && containsAll(line, labels) {
			var v float64
			if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v); err == nil {
				sum, ok = sum+v, true
			}
		}
	}
	return sum, ok
}

// waitProgress waits until kmirror has copied every partition of topic to
// at least want[p] (next source offsets).
func (d *daemon) waitProgress(ctx context.Context, topic string, want []int64) {
	d.t.Helper()
	for {
		var behind []string
		for p, w := range want {
			ps, ok := d.partitionStatus(topic, int32(p))
			if !ok || ps.LastMirroredOffset+1 < w {
				behind = append(behind, fmt.Sprintf("%d: %s at %d of %d %s", p, ps.State, ps.LastMirroredOffset+1, w, ps.LastError))
			}
		}
		if len(behind) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			d.t.Fatalf("%s not copied up to %v: %v", topic, want, behind)
		case <-d.done:
			d.t.Fatalf("the daemon exited while %s was copied up to %v: %v\n%s", topic, want, behind, tail(d.log(), 20))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// mirroredPlus returns, per partition of topic, the next source offset
// kmirror has copied up to plus n: a progress target a little ahead.
func (d *daemon) mirroredPlus(topic string, partitions int32, n int64) []int64 {
	out := make([]int64, partitions)
	for p := range partitions {
		ps, _ := d.partitionStatus(topic, p)
		out[p] = ps.LastMirroredOffset + 1 + n
	}
	return out
}

// waitMirrored waits until every partition of topic is MIRRORING and
// mirrored up to the source's end offset.
func (d *daemon) waitMirrored(ctx context.Context, topic string, partitions int32) {
	d.t.Helper()
	for {
		ends := endOffsets(d.t, ctx, source, topic, partitions)
		var lagging []string
		for p := range partitions {
			ps, ok := d.partitionStatus(topic, p)
			if !ok || ps.State != "MIRRORING" || ps.LastMirroredOffset+1 != ends[p] {
				lagging = append(lagging, fmt.Sprintf("%d: %s mirrored to %d of %d %s", p, ps.State, ps.LastMirroredOffset+1, ends[p], ps.LastError))
			}
		}
		if len(lagging) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			d.t.Fatalf("topic %s not mirrored in time: %v", topic, lagging)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// logPartitions logs the state of every partition of the daemon's mirror.
func (d *daemon) logPartitions() {
	st, _ := d.status()
	for _, m := range st.Mirrors {
		if m.Name != d.mirror {
			continue
		}
		for _, ps := range m.Partitions {
			d.t.Logf("%s[%d]: %s %s lag %d %s", ps.Topic, ps.Partition, ps.State, ps.Retry, ps.Lag, ps.LastError)
		}
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
