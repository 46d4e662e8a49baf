package destfaults

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/e2e/kmirrortest"
)

// daemon is one `kmirror run` process of a test (e2e/kmirrortest),
// mirroring topics of source to destination; the test's cleanup stops it.
type daemon struct {
	*kmirrortest.Process
	t        testing.TB
	mirror   string
	stateDir string
}

// startKmirror runs `kmirror run` mirroring the topics matching include,
// with the file state store in a directory of the test.
func startKmirror(t testing.TB, include string) *daemon {
	t.Helper()
	d := &daemon{t: t, mirror: "m" + strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(strings.TrimPrefix(t.Name(), "Test"), ""))}
	if len(d.mirror) > 40 {
		d.mirror = d.mirror[:40]
	}
	d.Process = kmirrortest.Start(t, kmirrortest.Options{Config: func(dir string) string {
		d.stateDir = filepath.Join(dir, "state")
		return fmt.Sprintf(`log.level: debug
log.format: json
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
`, destination.BootstrapServers(kafkatest.Plaintext), d.stateDir, d.mirror, source.BootstrapServers(kafkatest.Plaintext), include)
	}})
	return d
}

// stop sends SIGTERM and waits for the process to exit (SIGKILL after 30 s).
func (d *daemon) stop() { d.Stop() }

func (d *daemon) log() string { return d.Log() }

var tail = kmirrortest.Tail

// status reads /v1/describe; ok is false while the daemon does not answer.
func (d *daemon) status() (admin.Status, bool) { return d.Describe() }

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
	resp, err := http.Get("http://" + d.HTTPAddr + "/metrics")
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
		case <-d.Exited():
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
