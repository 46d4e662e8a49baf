package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/e2e/kmirrortest"
	"github.com/kmirror/kmirror/plugins/statestore/file"
)

// kmirrorBinary is the kmirror binary the e2e tests run, built once per
// test process (e2e/kmirrortest).
var kmirrorBinary = kmirrortest.Binary

// daemon is one `kmirror run` process of a test, mirroring source to
// destination.
type daemon struct {
	t        testing.TB
	cfgPath  string
	httpAddr string
	mirror   string
	stateDir string
	// env is added to the process environment at the next start (for
	// example core/failpoint's KMIRROR_FAILPOINTS).
	env []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	logs *strings.Builder
	done chan struct{}
}

// startKmirror writes a configuration mirroring the topics matching include
// from the source cluster to the destination cluster, and starts the daemon.
// extra is appended to the mirror's block (indented by four spaces).
func startKmirror(t testing.TB, include string, extra ...string) *daemon {
	t.Helper()
	return startKmirrorWith(t, include, nil, extra...)
}

// startKmirrorWith is startKmirror with extra daemon-wide keys ("key: value").
func startKmirrorWith(t testing.TB, include string, daemonKeys []string, extra ...string) *daemon {
	t.Helper()
	return startKmirrorEnv(t, nil, include, daemonKeys, extra...)
}

// startKmirrorEnv is startKmirrorWith with variables added to the process
// environment (kept for restarts until d.env changes).
func startKmirrorEnv(t testing.TB, env []string, include string, daemonKeys []string, extra ...string) *daemon {
	t.Helper()
	dir := t.TempDir()
	port, adminPort := freePort(t), freePort(t)
	name := "m" + strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(strings.TrimPrefix(t.Name(), "Test"), ""))
	if len(name) > 40 {
		name = name[:40]
	}
	cfg := fmt.Sprintf(`log.level: debug
log.format: json
http.address: 127.0.0.1:%d
http.status.enable: true
admin.address: 127.0.0.1:%d
mirror.metadata.refresh.interval.ms: 2000
mirror.failed.retry.initial.backoff.ms: 200
mirror.failed.retry.max.backoff.ms: 2000
shutdown.timeout.ms: 20000
%s
%s
mirrors:
  - name: %s
    bootstrap.servers: %s
    mirror.topics.include: %q
`, port, adminPort, destinationBlock(&daemonKeys), stateBlock(&daemonKeys, filepath.Join(dir, "state")), name, sourceBootstrap(&extra), include)
	for _, e := range extra {
		cfg += "    " + e + "\n"
	}
	cfg = strings.Join(daemonKeys, "\n") + "\n" + cfg
	path := filepath.Join(dir, "kmirror.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, cfgPath: path, httpAddr: fmt.Sprintf("127.0.0.1:%d", port), mirror: name, stateDir: filepath.Join(dir, "state"), env: env}
	d.start()
	t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("kmirror log (tail):\n%s", tail(d.log(), 60))
		}
	})
	return d
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (d *daemon) start() {
	d.t.Helper()
	cmd := exec.Command(kmirrorBinary(d.t), "run", "--config", d.cfgPath)
	if len(d.env) > 0 {
		cmd.Env = append(os.Environ(), d.env...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		d.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.mu.Lock()
	if d.logs == nil {
		d.logs = &strings.Builder{}
	}
	d.cmd, d.done = cmd, make(chan struct{})
	done := d.done
	d.mu.Unlock()
	go func() { // owned by the daemon handle: ends when the process exits.
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			d.mu.Lock()
			d.logs.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
		}
		_ = cmd.Wait()
		close(done)
	}()
}

// cli runs a kmirror command against this daemon (its configuration locates
// the admin API and its token) and returns the exit code and outputs.
func (d *daemon) cli(args ...string) (code int, stdout, stderr string) {
	d.t.Helper()
	cmd := exec.Command(kmirrorBinary(d.t), append(args, "--config", d.cfgPath)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		d.t.Fatalf("running kmirror %v: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

// signal sends sig to the running daemon.
func (d *daemon) signal(sig syscall.Signal) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		_ = d.cmd.Process.Signal(sig)
	}
}

// stop sends sig and waits for the process to exit.
func (d *daemon) stop(sig syscall.Signal) {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	d.mu.Lock()
	d.cmd = nil
	d.mu.Unlock()
}

// exited returns a channel closed when the running process exits.
func (d *daemon) exited() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.done
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

// status reads the daemon's /v1/describe; ok is false while it does not answer.
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

// partitionStatus returns the status of topic/partition, if the daemon runs it
// (in the test's mirror, or the first mirror that has it).
func (d *daemon) partitionStatus(topic string, p int32) (admin.PartitionStatus, bool) {
	if ps, ok := d.mirrorPartition(d.mirror, topic, p); ok {
		return ps, true
	}
	return d.mirrorPartition("", topic, p)
}

// mirrorPartition returns the status of topic/partition in mirror name ("":
// any mirror).
func (d *daemon) mirrorPartition(name, topic string, p int32) (admin.PartitionStatus, bool) {
	st, ok := d.status()
	if !ok {
		return admin.PartitionStatus{}, false
	}
	for _, m := range st.Mirrors {
		if name != "" && m.Name != name {
			continue
		}
		for _, ps := range m.Partitions {
			if ps.Topic == topic && ps.Partition == p {
				return ps, true
			}
		}
	}
	return admin.PartitionStatus{}, false
}

// waitState waits until topic/partition is in state and returns its status.
func (d *daemon) waitState(ctx context.Context, topic string, p int32, state string) admin.PartitionStatus {
	d.t.Helper()
	var last admin.PartitionStatus
	for {
		if ps, ok := d.partitionStatus(topic, p); ok {
			last = ps
			if ps.State == state {
				return ps
			}
		}
		select {
		case <-ctx.Done():
			d.t.Fatalf("%s[%d] did not reach %s: last status %+v", topic, p, state, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitMirrored waits until every partition of topic is mirrored up to the
// source's high watermark.
func (d *daemon) waitMirrored(ctx context.Context, topic string, partitions int32) {
	d.t.Helper()
	d.waitMirroredFrom(ctx, source, topic, partitions)
}

// waitMirroredFrom is waitMirrored for a mirror whose source is cluster from.
func (d *daemon) waitMirroredFrom(ctx context.Context, from *kafkatest.Cluster, topic string, partitions int32) {
	d.t.Helper()
	adm := superAdmin(d.t, from)
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		done := err == nil
		var lagging []string
		for p := int32(0); done && p < partitions; p++ {
			o, _ := ends.Lookup(topic, p)
			ps, ok := d.partitionStatus(topic, p)
			if !ok || ps.State != "MIRRORING" || ps.LastMirroredOffset+1 != o.Offset {
				done = false
				lagging = append(lagging, fmt.Sprintf("%d: %s mirrored to %d of %d %s", p, ps.State, ps.LastMirroredOffset+1, o.Offset, ps.LastError))
			}
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			d.t.Fatalf("topic %s not mirrored in time: %v", topic, lagging)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// verifyTopic compares every partition of topic on both clusters, offset by
// offset, and returns the source logs.
func verifyTopic(t testing.TB, ctx context.Context, topic string, partitions int32) []*verify.Log {
	t.Helper()
	src := newClient(t, source, kafkatest.Identity{})
	dst := newClient(t, destination, kafkatest.Identity{})
	var logs []*verify.Log
	for p := int32(0); p < partitions; p++ {
		log, diff, err := verify.Partition(ctx, src, dst, topic, p)
		if err != nil {
			t.Fatalf("verifying %s[%d]: %v", topic, p, err)
		}
		if diff != "" {
			t.Fatalf("%s[%d] differs between source and destination: %s", topic, p, diff)
		}
		logs = append(logs, log)
	}
	return logs
}

// consumeExactly reads topic on c from the start with a read_committed or
// read_uncommitted consumer until want records arrived, then polls one more
// second to make sure no other record comes.
func consumeExactly(t testing.TB, ctx context.Context, c *kafkatest.Cluster, topic string, committed bool, want int) []*kgo.Record {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := newClient(t, c, kafkatest.Identity{}, opts...)
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming %s (read_committed=%v): %d of %d records: %v", topic, committed, len(out), want, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	fs := cl.PollFetches(pctx)
	fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	if len(out) != want {
		t.Fatalf("consuming %s (read_committed=%v): %d records, want %d", topic, committed, len(out), want)
	}
	return out
}

// metric reads one sample of the daemon's /metrics: the first line starting
// with prefix (a metric name with its labels).
func (d *daemon) metric(prefix string) (float64, bool) {
	resp, err := http.Get("http://" + d.httpAddr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, prefix) {
			var v float64
			if _, err := fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v); err == nil {
				return v, true
			}
		}
	}
	return 0, false
}

// sourceBootstrap returns the mirror's source bootstrap servers: the plain
// listener of the shared source cluster, unless extra holds a
// "bootstrap.servers: ..." entry, which it then takes out of extra.
func sourceBootstrap(extra *[]string) string {
	for i, e := range *extra {
		if v, ok := strings.CutPrefix(e, "bootstrap.servers:"); ok {
			*extra = append((*extra)[:i:i], (*extra)[i+1:]...)
			return strings.TrimSpace(v)
		}
	}
	return source.BootstrapServers(kafkatest.Plaintext)
}

// destinationBlock returns the configuration's destination block: the plain
// listener of the shared destination cluster, unless daemonKeys holds an
// entry starting with "destination:" (a whole block), which it then takes out
// of daemonKeys.
func destinationBlock(daemonKeys *[]string) string {
	for i, k := range *daemonKeys {
		if strings.HasPrefix(k, "destination:") {
			*daemonKeys = append((*daemonKeys)[:i:i], (*daemonKeys)[i+1:]...)
			return k
		}
	}
	return "destination:\n  bootstrap.servers: " + destination.BootstrapServers(kafkatest.Plaintext)
}

// stateBlock returns the configuration's state block: the file store in
// dir, unless daemonKeys holds an entry starting with "state:" (a whole
// block, which may use "%STATE_DIR%" for dir), which it then takes out of
// daemonKeys.
func stateBlock(daemonKeys *[]string, dir string) string {
	for i, k := range *daemonKeys {
		if strings.HasPrefix(k, "state:") {
			*daemonKeys = append((*daemonKeys)[:i:i], (*daemonKeys)[i+1:]...)
			return strings.ReplaceAll(k, "%STATE_DIR%", dir)
		}
	}
	return "state:\n  dir: " + dir
}

// storedOffsetMap reads the offset map of topic/0 from the stopped daemon's
// file state store (snapshot and journal).
func storedOffsetMap(t testing.TB, ctx context.Context, d *daemon, topic string) *offsetmap.Map {
	t.Helper()
	return storedPartitionMap(t, ctx, d, topic, 0)
}

// storedPartitionMap is storedOffsetMap for topic/partition.
func storedPartitionMap(t testing.TB, ctx context.Context, d *daemon, topic string, partition int32) *offsetmap.Map {
	t.Helper()
	store, err := file.Open(d.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m, err := offsetmap.Load(ctx, store, d.mirror, topic, partition)
	if err != nil {
		t.Fatalf("reading the offset map: %v", err)
	}
	return m
}

// readBothLogs reads topic/0 raw on the source and on the destination.
func readBothLogs(t testing.TB, ctx context.Context, topic string) (src, dst *verify.Log) {
	t.Helper()
	src, err := verify.ReadLog(ctx, newClient(t, source, kafkatest.Identity{}), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	dst, err = verify.ReadLog(ctx, newClient(t, destination, kafkatest.Identity{}), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return src, dst
}
