package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/offsetmap"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/plugins/statestore/file"
)

const (
	mirrorName = "soak"
	topics     = 3
	partitions = 3
)

// settings are one soak run's parameters, derived from its duration.
type settings struct {
	duration time.Duration
	seed     uint64
	out      string
	// sampleEvery is the sampling period.
	sampleEvery time.Duration
	// warmup is the quiet start before the first fault (the lag baseline);
	// tail is the quiet end after the last fault, during which the lag must
	// come back down.
	warmup, tail time.Duration
	// faultEvery is the mean time between the end of a fault and the start
	// of the next (each gap is uniform in [0.5, 1.5] of it).
	faultEvery time.Duration
	// killsUntil: no daemon kill starts after this, so that the last
	// daemon process lives through the last 40% of the run with the other
	// faults (a leak inside one process has that long to show).
	killsUntil time.Duration
	// cutMin, cutMax bound a network cut's length.
	cutMin, cutMax time.Duration
	// instanceWarmup: samples of a process younger than this are not judged.
	instanceWarmup time.Duration
}

func clamp(d, lo, hi time.Duration) time.Duration { return min(max(d, lo), hi) }

func loadSettings(t *testing.T) settings {
	s := settings{duration: 2 * time.Minute, seed: uint64(time.Now().UnixNano())}
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute {
			t.Fatalf("SOAK_DURATION=%q: want a Go duration of at least 1m", v)
		}
		s.duration = d
	}
	if v := os.Getenv("SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SOAK_SEED=%q: want an unsigned integer", v)
		}
		s.seed = n
	}
	s.out = os.Getenv("SOAK_OUT")
	if s.out == "" {
		_, file, _, _ := runtime.Caller(0)
		s.out = filepath.Join(filepath.Dir(file), "..", "artifacts", "soak")
	}
	d := s.duration
	s.sampleEvery = clamp(d/240, 2*time.Second, 10*time.Second)
	s.warmup = clamp(d/8, 15*time.Second, 2*time.Minute)
	s.tail = clamp(d/6, 35*time.Second, 10*time.Minute)
	s.faultEvery = clamp(d/16, 10*time.Second, 2*time.Minute)
	s.killsUntil = d * 6 / 10
	s.cutMin, s.cutMax = clamp(d/60, 5*time.Second, 20*time.Second), clamp(d/20, 8*time.Second, 60*time.Second)
	s.instanceWarmup = clamp(d/20, 15*time.Second, time.Minute)
	return s
}

// TestSoak runs traffic and faults for SOAK_DURATION, then checks the
// destination record by record and judges the daemon's resource figures
// (package doc; docs/reliability.md).
func TestSoak(t *testing.T) {
	cfg := loadSettings(t)
	t.Logf("soak: duration %s, seed %d (SOAK_SEED=%d repeats the schedule), artifacts in %s", cfg.duration, cfg.seed, cfg.seed, cfg.out)
	t.Logf("soak: sample every %s, warm-up %s, faults every ~%s (daemon kills until %s), cuts %s–%s, quiet tail %s",
		cfg.sampleEvery, cfg.warmup, cfg.faultEvery, cfg.killsUntil, cfg.cutMin, cfg.cutMax, cfg.tail)
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), cfg.duration+25*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(cfg.seed, 0x50a4))

	source, destination := startClusters(t, ctx)
	srcAdm, err := source.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer srcAdm.Close()
	var names []string
	for i := range topics {
		names = append(names, fmt.Sprintf("soak-%d", i))
	}
	resp, err := srcAdm.CreateTopics(ctx, partitions, 3, nil, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			t.Fatalf("create %s on the source: %v", r.Topic, r.Err)
		}
	}

	d := newDaemon(t, cfg.out, source, destination)
	began := time.Now()
	d.start()
	t.Cleanup(func() { d.stop(syscall.SIGTERM) })
	tr := startTraffic(t, ctx, source, names, cfg.seed)

	dstAdm, err := destination.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer dstAdm.Close()
	smp := startSampler(ctx, d, began, cfg.sampleEvery, func(ctx context.Context) int64 { return endOffsetGap(ctx, srcAdm, dstAdm, names) })
	var events []Event
	var mu sync.Mutex // guards events and written
	written := false
	t.Cleanup(func() { // a run that stopped early still leaves its samples
		samples := smp.stop()
		mu.Lock()
		defer mu.Unlock()
		if !written {
			writeArtifacts(t, cfg, samples, events, nil)
		}
	})

	// Faults, one at a time, between the warm-up and the quiet tail.
	faultsEnd := cfg.duration - cfg.tail
	sleepUntil(ctx, began.Add(cfg.warmup))
	var kinds []string
	for n := 0; ; n++ {
		gap := time.Duration(float64(cfg.faultEvery) * (0.5 + rng.Float64()))
		if n == 0 {
			gap = 0
		}
		if time.Since(began)+gap >= faultsEnd || ctx.Err() != nil {
			break
		}
		sleepUntil(ctx, time.Now().Add(gap))
		if len(kinds) == 0 { // every kind once per round, in a random order
			kinds = []string{"daemon-kill", "broker-restart", "source-cut", "destination-cut"}
			rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		}
		kind := kinds[0]
		kinds = kinds[1:]
		if kind == "daemon-kill" && time.Since(began) > cfg.killsUntil {
			if len(kinds) == 0 {
				continue
			}
			kind, kinds = kinds[0], append(kinds[1:], kind)
		}
		at := time.Since(began)
		mu.Lock()
		events = append(events, Event{At: at, Kind: kind})
		mu.Unlock()
		smp.setFault(kind)
		what := inject(t, ctx, rng, cfg, kind, d, source, destination)
		smp.setFault("")
		t.Logf("soak: %s fault %d: %s (%s)", at.Round(time.Second), len(events), what, (time.Since(began) - at).Round(100*time.Millisecond))
	}
	quietFrom := time.Since(began)
	t.Logf("soak: %s: last fault over; quiet until %s", quietFrom.Round(time.Second), cfg.duration)
	sleepUntil(ctx, began.Add(cfg.duration))
	samples := smp.stop()
	tr.stop()
	if ctx.Err() != nil {
		t.Fatalf("soak ran out of time: %v", ctx.Err())
	}
	if !d.running() {
		t.Fatalf("the daemon exited by itself; its log: %s", d.logPath)
	}

	// Catch up and compare record by record.
	caught := time.Now()
	d.waitMirrored(ctx, srcAdm, names)
	t.Logf("soak: caught up with the source %s after the traffic stopped", time.Since(caught).Round(100*time.Millisecond))
	entries, markers := verifyAll(t, ctx, d, source, destination, names)
	t.Logf("soak: every partition identical on both clusters: %d records, %d transaction markers; traffic: %s", entries, markers, tr.summary())

	// Judge the figures.
	var warmLag, warmGap []float64
	for _, s := range samples {
		if s.At >= cfg.warmup/2 && s.At < cfg.warmup {
			if s.Lag >= 0 {
				warmLag = append(warmLag, float64(s.Lag))
			}
			if s.Gap >= 0 {
				warmGap = append(warmGap, float64(s.Gap))
			}
		}
	}
	// Five seconds of traffic count as caught up too: the two clusters'
	// end offsets are read one after the other while records keep coming,
	// and on a loaded machine a healthy mirror trails by a few seconds.
	perSecond := float64(tr.records.Load()) / max(cfg.duration.Seconds(), 1)
	lagBound := max(int64(3*Percentile(warmLag, 90)), int64(3*Percentile(warmGap, 90)), int64(5*perSecond), 500)
	verdicts := Judge(samples, Criteria{
		InstanceWarmup:  cfg.instanceWarmup,
		RunSamples:      12,
		InstanceSamples: max(30, int(cfg.duration/cfg.sampleEvery/5)),
		QuietFrom:       quietFrom,
		LagBound:        lagBound,
	})
	mu.Lock()
	writeArtifacts(t, cfg, samples, events, verdicts)
	written = true
	mu.Unlock()
	for _, v := range verdicts {
		if v.Failed {
			t.Errorf("soak: %s", v)
		} else {
			t.Logf("soak: %s", v)
		}
	}
}

// startClusters starts the source (3 brokers) and the destination (1),
// both with fault proxies, at once.
func startClusters(t *testing.T, ctx context.Context) (source, destination *kafkatest.Cluster) {
	began := time.Now()
	var wg sync.WaitGroup
	var srcErr, dstErr error
	wg.Go(func() {
		source, srcErr = kafkatest.Start(ctx, kafkatest.Options{Name: "soak-source", Brokers: 3, FaultProxies: true, Logf: t.Logf, StartTimeout: 4 * time.Minute})
	})
	wg.Go(func() {
		destination, dstErr = kafkatest.Start(ctx, kafkatest.Options{Name: "soak-destination", Brokers: 1, FaultProxies: true, Logf: t.Logf, StartTimeout: 4 * time.Minute})
	})
	wg.Wait()
	for _, c := range []*kafkatest.Cluster{source, destination} {
		if c != nil {
			t.Cleanup(func() { _ = c.Close() })
		}
	}
	if err := errors.Join(srcErr, dstErr); err != nil {
		t.Fatal(err)
	}
	t.Logf("soak: Apache Kafka %s: source (3 brokers) and destination (1) up in %s", source.Version(), time.Since(began).Round(100*time.Millisecond))
	return source, destination
}

func sleepUntil(ctx context.Context, at time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(at)):
	}
}

// inject runs one fault to its end and says what it did.
func inject(t *testing.T, ctx context.Context, rng *rand.Rand, cfg settings, kind string, d *daemon, source, destination *kafkatest.Cluster) string {
	hold := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	switch kind {
	case "daemon-kill":
		d.stop(syscall.SIGKILL)
		pause := hold(0, 3*time.Second)
		sleepUntil(ctx, time.Now().Add(pause))
		d.start()
		return fmt.Sprintf("daemon killed (SIGKILL), restarted after %s as process %d", pause.Round(time.Millisecond), d.instance())
	case "broker-restart":
		b := rng.IntN(source.Brokers())
		how := "killed (SIGKILL)"
		if rng.IntN(2) == 0 {
			how = "stopped (SIGTERM)"
			if err := source.StopBroker(b); err != nil {
				t.Fatal(err)
			}
		} else if err := source.KillBroker(b); err != nil {
			t.Fatal(err)
		}
		pause := hold(0, 5*time.Second)
		sleepUntil(ctx, time.Now().Add(pause))
		if err := source.RestartBroker(ctx, b); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("source broker %d %s, restarted after %s", b, how, pause.Round(time.Millisecond))
	case "source-cut", "destination-cut":
		c := source
		if kind == "destination-cut" {
			c = destination
		}
		n := hold(cfg.cutMin, cfg.cutMax)
		for _, p := range c.Proxies() {
			p.Cut()
		}
		sleepUntil(ctx, time.Now().Add(n))
		for _, p := range c.Proxies() {
			p.Resume()
		}
		return fmt.Sprintf("network to the %s cut for %s", strings.TrimSuffix(kind, "-cut"), n.Round(time.Millisecond))
	}
	t.Fatalf("unknown fault %q", kind)
	return ""
}

// writeArtifacts writes samples.csv, the plots and summary.md into the
// artifacts directory.
func writeArtifacts(t *testing.T, cfg settings, samples []Sample, events []Event, verdicts []Verdict) {
	var csv bytes.Buffer
	if err := WriteCSV(&csv, samples); err != nil {
		t.Errorf("soak: samples.csv: %v", err)
	}
	if err := os.WriteFile(filepath.Join(cfg.out, "samples.csv"), csv.Bytes(), 0o644); err != nil {
		t.Errorf("soak: %v", err)
	}
	if err := WritePlots(cfg.out, samples, events); err != nil {
		t.Errorf("soak: plots: %v", err)
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Soak run\n\nDuration %s, seed %d, %d samples every %s, %d faults.\n\n", cfg.duration, cfg.seed, len(samples), cfg.sampleEvery, len(events))
	counts := map[string]int{}
	for _, e := range events {
		counts[e.Kind]++
	}
	fmt.Fprintf(&md, "Faults: %d daemon kills, %d source broker restarts, %d source cuts, %d destination cuts.\n\n",
		counts["daemon-kill"], counts["broker-restart"], counts["source-cut"], counts["destination-cut"])
	md.WriteString("| figure | window | samples | first third (median) | last third (median) | verdict |\n|---|---|---|---|---|---|\n")
	for _, v := range verdicts {
		verdict := "ok"
		if v.Failed {
			verdict = "**failed**"
		}
		first, last := fmt.Sprintf("%.1f %s", v.First, v.Unit), fmt.Sprintf("%.1f %s", v.Last, v.Unit)
		if v.Figure == "lag" || v.Figure == "gap" {
			first = fmt.Sprintf("bound %.0f", v.First)
			last = fmt.Sprintf("%.0f %s", v.Last, v.Unit)
		}
		fmt.Fprintf(&md, "| %s | %s | %d | %s | %s | %s |\n", v.Figure, v.Scope, v.Samples, first, last, verdict)
	}
	if err := os.WriteFile(filepath.Join(cfg.out, "summary.md"), []byte(md.String()), 0o644); err != nil {
		t.Errorf("soak: %v", err)
	}
	t.Logf("soak: artifacts (samples.csv, summary.md, %d plots) in %s", len(Plots), cfg.out)
}

// --- the daemon ---

// binary builds kmirror once.
func binary(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	out := filepath.Join(t.TempDir(), "kmirror")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/kmirror")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kmirror: %v\n%s", err, b)
	}
	return out
}

// daemon is the kmirror process under soak; it keeps its configuration,
// state directory and ports across restarts.
type daemon struct {
	t        *testing.T
	bin      string
	cfgPath  string
	stateDir string
	logPath  string
	httpAddr string

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
	inst  int
	since time.Time
}

func newDaemon(t *testing.T, out string, source, destination *kafkatest.Cluster) *daemon {
	dir := t.TempDir()
	d := &daemon{t: t, bin: binary(t), cfgPath: filepath.Join(dir, "kmirror.yaml"), stateDir: filepath.Join(dir, "state"),
		logPath: filepath.Join(out, "kmirror.log"), httpAddr: freeAddr(t)}
	cfg := fmt.Sprintf(`log.level: info
log.format: json
http.address: %s
http.status.enable: true
http.pprof.enable: true
metrics.partition.series.enable: true
admin.address: %s
mirror.metadata.refresh.interval.ms: 5000
mirror.failed.retry.initial.backoff.ms: 500
mirror.failed.retry.max.backoff.ms: 5000
shutdown.timeout.ms: 20000
destination:
  bootstrap.servers: %s
state:
  dir: %s
mirrors:
  - name: %s
    bootstrap.servers: %s
    mirror.topics.include: "soak-.*"
`, d.httpAddr, freeAddr(t), destination.BootstrapServers(kafkatest.Proxied), d.stateDir, mirrorName, source.BootstrapServers(kafkatest.Proxied))
	if err := os.WriteFile(d.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(d.logPath)
	return d
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs a new daemon process, its output appended to logPath.
func (d *daemon) start() {
	f, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	cmd := exec.Command(d.bin, "run", "--config", d.cfgPath)
	// The daemon refuses KMIRROR_* variables that name no key.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KMIRROR_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		d.t.Fatal(err)
	}
	done := make(chan struct{})
	d.mu.Lock()
	d.cmd, d.done, d.since = cmd, done, time.Now()
	d.inst++
	d.mu.Unlock()
	go func() { // owned by the daemon handle: ends when the process exits
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
}

// stop signals the process and waits for it (SIGKILL after 30 s).
func (d *daemon) stop(sig syscall.Signal) {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.cmd = nil
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
}

// current returns the running process's pid, instance number and start.
func (d *daemon) current() (pid, inst int, since time.Time, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return 0, d.inst, d.since, false
	}
	select {
	case <-d.done:
		return 0, d.inst, d.since, false
	default:
	}
	return d.cmd.Process.Pid, d.inst, d.since, true
}

func (d *daemon) instance() int {
	_, inst, _, _ := d.current()
	return inst
}

func (d *daemon) running() bool {
	_, _, _, ok := d.current()
	return ok
}

// describe reads /v1/describe; ok is false while the daemon does not answer.
func (d *daemon) describe(ctx context.Context) (admin.Status, bool) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.httpAddr+"/v1/describe", nil)
	resp, err := http.DefaultClient.Do(req)
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

// waitMirrored waits until every partition of the topics is MIRRORING up
// to the source's end offset.
func (d *daemon) waitMirrored(ctx context.Context, adm *kadm.Client, topics []string) {
	var lagging []string
	for {
		ends, err := adm.ListEndOffsets(ctx, topics...)
		st, ok := d.describe(ctx)
		lagging = lagging[:0]
		if err != nil || !ok {
			lagging = append(lagging, fmt.Sprintf("end offsets: %v; describe answered: %v", err, ok))
		}
		for _, topic := range topics {
			for p := range int32(partitions) {
				end, _ := ends.Lookup(topic, p)
				ps, found := partitionStatus(st, topic, p)
				if !found || ps.State != "MIRRORING" || ps.LastMirroredOffset+1 != end.Offset {
					lagging = append(lagging, fmt.Sprintf("%s[%d]: %s mirrored to %d of %d %s", topic, p, ps.State, ps.LastMirroredOffset+1, end.Offset, ps.LastError))
				}
			}
		}
		if len(lagging) == 0 {
			return
		}
		if !d.running() {
			d.t.Fatalf("the daemon exited before catching up (log %s): %v", d.logPath, lagging)
		}
		select {
		case <-ctx.Done():
			d.t.Fatalf("not caught up in time: %v", lagging)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// verifyAll compares every partition of the topics on both clusters record
// by record (offsets, keys, values, headers, timestamps, markers,
// transactional visibility) and counts records and markers. A partition in
// map mode (the destination wrote a transaction marker twice: a
// coordinator failover) is compared through its offset map, read from the
// stopped daemon's state store.
func verifyAll(t *testing.T, ctx context.Context, d *daemon, source, destination *kafkatest.Cluster, topics []string) (entries, markers int) {
	src, err := source.NewClient(kafkatest.Identity{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := destination.NewClient(kafkatest.Identity{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	st, _ := d.describe(ctx)
	type tp struct {
		topic string
		p     int32
	}
	var remapped []tp
	for _, topic := range topics {
		for p := range int32(partitions) {
			if ps, _ := partitionStatus(st, topic, p); ps.Mode == "map" {
				t.Logf("soak: %s[%d] in map mode (%s): compared through its offset map", topic, p, strings.Join(ps.Notes, "; "))
				remapped = append(remapped, tp{topic, p})
			}
		}
	}
	if len(remapped) > 0 {
		d.stop(syscall.SIGTERM) // the file store is locked while it runs
	}
	for _, topic := range topics {
		for p := range int32(partitions) {
			sl, err := verify.ReadLog(ctx, src, topic, p)
			if err != nil {
				t.Fatal(err)
			}
			dl, err := verify.ReadLog(ctx, dst, topic, p)
			if err != nil {
				t.Fatal(err)
			}
			diff := verify.Diff(sl, dl)
			if slices.Contains(remapped, tp{topic, p}) {
				diff = verify.DiffMapped(sl, dl, storedMap(t, ctx, d, topic, p).Lookup)
			}
			if diff != "" {
				t.Errorf("%s[%d] differs between source and destination: %s", topic, p, diff)
			}
			for _, e := range sl.Entries {
				if e.Control {
					markers++
				} else {
					entries++
				}
			}
		}
	}
	return entries, markers
}

func storedMap(t *testing.T, ctx context.Context, d *daemon, topic string, p int32) *offsetmap.Map {
	store, err := file.Open(d.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m, err := offsetmap.Load(ctx, store, mirrorName, topic, p)
	if err != nil {
		t.Fatalf("reading the offset map of %s[%d]: %v", topic, p, err)
	}
	return m
}

// --- the sampler ---

// sampler samples the daemon every period until stop.
type sampler struct {
	halt  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	all   []Sample
	fault string
	once  sync.Once
}

func startSampler(ctx context.Context, d *daemon, began time.Time, every time.Duration, gap func(context.Context) int64) *sampler {
	s := &sampler{halt: make(chan struct{}), done: make(chan struct{})}
	r := Reader{HTTPAddr: d.httpAddr, Client: &http.Client{Timeout: every}}
	go func() { // owned by s: stop waits for it
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.halt:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			pid, inst, since, ok := d.current()
			if !ok {
				continue // between a kill and the restart
			}
			now := time.Now()
			smp := Sample{At: now.Sub(began), Instance: inst, Since: now.Sub(since)}
			r.Read(ctx, pid, &smp)
			gctx, cancel := context.WithTimeout(ctx, every)
			smp.Gap = gap(gctx)
			cancel()
			s.mu.Lock()
			smp.Fault = s.fault
			s.all = append(s.all, smp)
			s.mu.Unlock()
		}
	}()
	return s
}

// endOffsetGap sums, over every partition of the topics, the source's end
// offset minus the destination's; -1 when an end offset could not be read.
func endOffsetGap(ctx context.Context, src, dst *kadm.Client, topics []string) int64 {
	se, err := src.ListEndOffsets(ctx, topics...)
	if err != nil || se.Error() != nil {
		return -1
	}
	de, err := dst.ListEndOffsets(ctx, topics...)
	if err != nil {
		return -1
	}
	var gap int64
	for _, topic := range topics {
		for p := range int32(partitions) {
			s, sok := se.Lookup(topic, p)
			d, dok := de.Lookup(topic, p)
			switch {
			case !sok || s.Err != nil:
				return -1
			case !dok || d.Err != nil:
				gap += s.Offset // not created on the destination yet
			default:
				gap += max(s.Offset-d.Offset, 0)
			}
		}
	}
	return gap
}

func (s *sampler) setFault(kind string) {
	s.mu.Lock()
	s.fault = kind
	s.mu.Unlock()
}

// stop ends the sampling (once) and returns the samples.
func (s *sampler) stop() []Sample {
	s.once.Do(func() { close(s.halt) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.all)
}

// --- the traffic ---

// traffic writes to every topic until stop: per topic a transactional
// producer (transactions over several partitions, a third aborted) and a
// plain producer (keys, headers, timestamps a minute old).
type traffic struct {
	t       *testing.T
	halt    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	txns    atomic.Int64
	aborted atomic.Int64
	records atomic.Int64
	refused atomic.Int64 // writes or transactions the source refused (a broker lost)
	renewed atomic.Int64 // transactional clients replaced after a failed abort
}

func startTraffic(t *testing.T, ctx context.Context, c *kafkatest.Cluster, names []string, seed uint64) *traffic {
	tr := &traffic{t: t, halt: make(chan struct{})}
	for i, topic := range names {
		tr.wg.Go(func() { tr.transactional(ctx, c, topic, rand.New(rand.NewPCG(seed, uint64(i)))) })
		tr.wg.Go(func() { tr.plain(ctx, c, topic) })
	}
	t.Cleanup(tr.stop)
	return tr
}

func (tr *traffic) transactional(ctx context.Context, c *kafkatest.Cluster, topic string, r *rand.Rand) {
	id := topic + "-tx"
	newClient := func() *kgo.Client {
		cl, err := c.NewClient(kafkatest.Identity{}, kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
		if err != nil {
			tr.t.Errorf("transactional client of %s: %v", topic, err)
			return nil
		}
		return cl
	}
	cl := newClient()
	if cl == nil {
		return
	}
	defer func() { cl.Close() }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-tr.halt:
			return
		case <-tick.C:
		}
		err := cl.BeginTransaction()
		var recs []*kgo.Record
		for k := range 1 + r.IntN(4) {
			recs = append(recs, &kgo.Record{Partition: r.Int32N(partitions), Key: fmt.Appendf(nil, "tx-%d-%d", n, k),
				Value: fmt.Appendf(nil, "transaction %d record %d %s", n, k, strings.Repeat("t", r.IntN(200))), Headers: []kgo.RecordHeader{{Key: "txn", Value: fmt.Appendf(nil, "%d", n)}}})
		}
		if err == nil {
			err = cl.ProduceSync(ctx, recs...).FirstErr()
		}
		commit := r.IntN(3) != 0
		if err == nil {
			err = cl.EndTransaction(ctx, kgo.TransactionEndTry(commit))
		}
		if err == nil {
			tr.txns.Add(1)
			if !commit {
				tr.aborted.Add(1)
			}
			tr.records.Add(int64(len(recs)))
			continue
		}
		// A source broker lost mid-transaction can refuse it: abort it and
		// go on; when even the abort fails, a new client (same
		// transactional id) fences the old producer and starts clean.
		tr.refused.Add(1)
		if ctx.Err() != nil {
			return
		}
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			cl.Close()
			tr.renewed.Add(1)
			if cl = newClient(); cl == nil {
				return
			}
		}
	}
}

func (tr *traffic) plain(ctx context.Context, c *kafkatest.Cluster, topic string) {
	cl, err := c.NewClient(kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		tr.t.Errorf("plain client of %s: %v", topic, err)
		return
	}
	defer cl.Close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-tr.halt:
			return
		case <-tick.C:
		}
		var recs []*kgo.Record
		for k := range 5 {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "plain-%d-%d", n, k), Value: fmt.Appendf(nil, "plain %d/%d %s", n, k, strings.Repeat("p", (n*7+k)%150)),
				Headers:   []kgo.RecordHeader{{Key: "seq", Value: fmt.Appendf(nil, "%d", n)}, {Key: "empty"}},
				Timestamp: time.Now().Add(-time.Minute).Truncate(time.Millisecond)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			if ctx.Err() != nil {
				return
			}
			tr.refused.Add(1)
			continue
		}
		tr.records.Add(int64(len(recs)))
	}
}

// stop ends the traffic after each producer's current write.
func (tr *traffic) stop() {
	tr.once.Do(func() {
		close(tr.halt)
		tr.wg.Wait()
	})
}

func (tr *traffic) summary() string {
	return fmt.Sprintf("%d transactions (%d aborted), %d records, %d writes refused by the source, %d transactional clients renewed",
		tr.txns.Load(), tr.aborted.Load(), tr.records.Load(), tr.refused.Load(), tr.renewed.Load())
}
