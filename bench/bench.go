package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/bench/internal/contender"
	"github.com/kmirror/kmirror/bench/internal/load"
	"github.com/kmirror/kmirror/bench/internal/proc"
	"github.com/kmirror/kmirror/bench/internal/report"
	"github.com/kmirror/kmirror/bench/internal/scenario"
	"github.com/kmirror/kmirror/bench/internal/topics"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// bench holds a run's clusters, contenders and settings.
type bench struct {
	root, out, runs string
	src, dst        *kafkatest.Cluster
	srcAdm, dstAdm  *kadm.Client
	srcCl, dstCl    *kgo.Client
	// The clusters' fault proxies (kafkatest.Options.FaultProxies) delay
	// the contenders' traffic in WAN scenarios; each cluster advertises
	// its proxy on its Proxied listener.
	contenders []contender.Contender
	timeout    time.Duration
	profile    time.Duration         // -profile: CPU profile length, 0 none
	warm       []contender.Contender // run over the warm-up backlog, results discarded
	// scenarioWarm copy each scenario's backlog once each before the
	// measured contenders, their results discarded (-no-warm-up: none).
	scenarioWarm []contender.Contender
	// repeat is how many rounds of the contenders each scenario runs
	// (-repeat), the order rotated each round.
	repeat int
	seq    int
}

// brokerJVM are the JVM flags both clusters run with, on top of the
// harness's: a larger heap, and C2 back on (the harness runs C1 only, for
// quick test starts).
var brokerJVM = []string{"-Xms512m", "-Xmx1g", "-XX:TieredStopAtLevel=4"}

func benchMain(args []string) error {
	fs := flag.NewFlagSet("kmirror-bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "run the quick variant of the scenarios (by default only those marked for quick runs)")
	scenarioList := fs.String("scenarios", "", `comma-separated scenario names, or "all" (default: all; with -quick the quick set)`)
	contenderList := fs.String("contenders", strings.Join(contender.Names[:3], ","), "comma-separated contenders: "+strings.Join(contender.Names, ", "))
	out := fs.String("out", "bench/out", "directory the report and charts are written to")
	label := fs.String("label", "", "how the run was started, for the report (e.g. \"make bench\")")
	conditions := fs.String("conditions", "", "a sentence about the run's conditions, printed at the top of the report")
	timeout := fs.Duration("run-timeout", 0, "longest wait for one contender's catch-up (default 15m, 3m with -quick)")
	mm2Libs := fs.String("mm2-libs", "", "MirrorMaker 2 jars (default: resolved by scripts/mm2/fetch.sh)")
	mm2Heap := fs.String("mm2-heap", "4g", "MirrorMaker 2's JVM heap (-Xmx); connect-mirror-maker.sh's default 2g ran out with 16 tasks on p500")
	mm2MaxTasks := fs.Int("mm2-max-tasks", 16, "cap on MirrorMaker 2's tasks.max, which is otherwise the partition count (0: no cap)")
	rawInflight := fs.Int("raw-inflight", 5, "the raw forwarder's ProduceRequests in flight per destination broker")
	tuned := fs.String("kmirror-tuned", "", `mirror keys for an extra contender "kmirror-tuned", separated by ";" (e.g. "replica.fetch.max.bytes: 4194304")`)
	tunedDaemon := fs.String("kmirror-tuned-daemon", "", `daemon-wide keys for the contender "kmirror-tuned", separated by ";" (e.g. "mirror.appends.in.flight.per.partition: 1")`)
	profile := fs.Duration("profile", 0, "take a CPU profile of kmirror for this long from its first copied record, and a heap profile once caught up (pprof files in <out>/profiles; 0: none)")
	noWarmUp := fs.Bool("no-warm-up", false, "skip the warm-ups: a small backlog copied by the raw forwarder and by kmirror before the first scenario, and each scenario's backlog copied once by each of them before its measured contenders, except with -quick (results discarded)")
	repeat := fs.Int("repeat", 1, "run each scenario's contenders this many rounds, their order rotated each round (each runs first once in N rounds of N contenders); the report shows each contender's median run by steady MB/s and lists every run")
	keep := fs.Bool("keep", false, "keep each run's directory (configs, logs, state; in a temporary directory named at the end)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	scs, err := scenario.Select(*scenarioList, *quick)
	if err != nil {
		return err
	}
	names, err := contender.ParseNames(*contenderList)
	if err != nil {
		return err
	}
	if *timeout == 0 {
		*timeout = 15 * time.Minute
		if *quick {
			*timeout = 3 * time.Minute
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	root, err := repoRoot()
	if err != nil {
		return err
	}
	if *repeat < 1 {
		return fmt.Errorf("-repeat %d: want 1 or more rounds", *repeat)
	}
	b := &bench{root: root, out: *out, timeout: *timeout, profile: *profile, repeat: *repeat}
	if !filepath.IsAbs(b.out) {
		b.out = filepath.Join(root, b.out)
	}
	if b.profile > 0 {
		// The profiles directory holds this run's files only: the report
		// names them by run number, which restarts at 1.
		if err := os.RemoveAll(filepath.Join(b.out, "profiles")); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(b.out, 0o755); err != nil {
		return err
	}
	if b.runs, err = os.MkdirTemp("", "kmirror-bench-"); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(b.runs, "bin"), 0o755); err != nil {
		return err
	}
	if *keep {
		defer log.Printf("bench: runs kept in %s", b.runs)
	} else {
		defer os.RemoveAll(b.runs)
	}
	started := time.Now()
	rep := report.Report{
		Title:       "kmirror benchmark: kmirror, MirrorMaker 2 and the raw limit",
		Started:     started,
		Quick:       *quick,
		Conditions:  *conditions,
		Contenders:  names,
		Settings:    map[string]string{},
		NotMeasured: scenario.NotYetMeasured,
	}
	if *quick {
		rep.Title += " (quick run)"
	}
	rep.Command = "kmirror-bench " + shellJoin(args)
	if *label != "" {
		rep.Command = *label + "\n# which ran: " + rep.Command
	}
	rep.Commit = gitDescribe(root)

	// The contenders' programs first: a build or download failure should
	// not wait for clusters.
	log.Printf("bench: building kmirror")
	kbin := filepath.Join(b.runs, "bin", "kmirror")
	if out, err := runIn(ctx, root, "go", "build", "-o", kbin, "./cmd/kmirror"); err != nil {
		return fmt.Errorf("go build ./cmd/kmirror: %w\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dist, err := kafkatest.Resolve(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
		var c contender.Contender
		switch n {
		case report.Kmirror:
			c = contender.Kmirror{Binary: kbin, Label: report.Kmirror, Pprof: *profile > 0}
		case report.MM2, report.MM2Sync:
			libs := *mm2Libs
			if libs == "" {
				log.Printf("bench: resolving MirrorMaker 2 (scripts/mm2/fetch.sh)")
				out, err := runIn(ctx, root, "bash", "scripts/mm2/fetch.sh")
				if err != nil {
					return fmt.Errorf("scripts/mm2/fetch.sh: %w", err)
				}
				libs = strings.TrimSpace(string(lastLine(out)))
			}
			*mm2Libs = libs // resolved once for both variants
			c = contender.MM2{Libs: libs, Java: dist.Java, MaxTasks: *mm2MaxTasks, Heap: *mm2Heap, Version: jarVersion(libs, "connect-mirror-"), OffsetSync: n == report.MM2Sync}
		case report.Raw:
			c = contender.Raw{Self: self, InFlight: *rawInflight}
		}
		b.contenders = append(b.contenders, c)
		rep.Settings[n] = c.Settings()
		if n == report.Kmirror && (*tuned != "" || *tunedDaemon != "") {
			t := contender.Kmirror{Binary: kbin, Label: "kmirror-tuned", Pprof: *profile > 0}
			for kv := range strings.SplitSeq(*tuned, ";") {
				if kv = strings.TrimSpace(kv); kv != "" {
					t.Extra = append(t.Extra, kv)
				}
			}
			for kv := range strings.SplitSeq(*tunedDaemon, ";") {
				if kv = strings.TrimSpace(kv); kv != "" {
					t.Daemon = append(t.Daemon, kv)
				}
			}
			b.contenders = append(b.contenders, t)
			rep.Settings[t.Label] = t.Settings()
		}
	}
	// The warm-up runs both of the bench's own programs, so that neither
	// the first scenario's first contender nor the others run on brokers
	// whose produce and fetch paths the JVM has not compiled yet.
	b.warm = []contender.Contender{contender.Raw{Self: self, InFlight: *rawInflight}, contender.Kmirror{Binary: kbin, Label: report.Kmirror}}
	if !*noWarmUp && !*quick {
		// Not in quick runs: their figures are too small to compare
		// contenders anyway, and CI runs them in a few minutes.
		b.scenarioWarm = b.warm
		for _, c := range b.warm {
			rep.WarmUps = append(rep.WarmUps, c.Name())
		}
	}
	rep.Contenders = nil
	for _, c := range b.contenders {
		rep.Contenders = append(rep.Contenders, c.Name())
	}
	rep.Machine = proc.DescribeMachine(dist.Java)
	rep.Machine.LoadAvg[0] = proc.LoadAverage()

	if err := b.startClusters(ctx); err != nil {
		return err
	}
	defer b.close()
	rep.Kafka = fmt.Sprintf("Apache Kafka %s (commit %s), source and destination one KRaft node each (combined broker and controller) on loopback, started by e2e/kafkatest with its defaults "+
		"(`num.network.threads=2`, `num.io.threads=2`, `num.replica.fetchers=1`, no fsync per write) and JVM `%s`; topics with replication factor 1.",
		dist.Version, dist.Commit, strings.Join(brokerJVM, " "))

	if !*noWarmUp {
		b.warmUpBrokers(ctx)
	}
	for _, sc := range scs {
		if ctx.Err() != nil {
			break
		}
		log.Printf("bench: scenario %s: %s", sc.Name, sc.What)
		rep.Scenarios = append(rep.Scenarios, b.runScenario(ctx, sc))
		// The report so far, so that a run cut short keeps what it measured.
		rep.Elapsed = time.Since(started)
		if err := report.Write(b.out, rep); err != nil {
			return err
		}
	}
	rep.Machine.LoadAvg[1] = proc.LoadAverage()
	rep.Elapsed = time.Since(started)
	if err := report.Write(b.out, rep); err != nil {
		return err
	}
	return ctx.Err()
}

func (b *bench) startClusters(ctx context.Context) error {
	specs := []struct {
		into **kafkatest.Cluster
		name string
	}{{&b.src, "bench-source"}, {&b.dst, "bench-destination"}}
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Go(func() {
			*s.into, errs[i] = kafkatest.Start(ctx, kafkatest.Options{Name: s.name, Brokers: 1, JVMOptions: brokerJVM, FaultProxies: true, StartTimeout: 5 * time.Minute})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.close()
		return err
	}
	// The bench polls topics that do not exist yet: the clients must look
	// them up again at once, not after kgo's default 5 s, or the first
	// record on the destination is seen late.
	fresh := []kgo.Opt{kgo.MetadataMinAge(50 * time.Millisecond), kgo.MetadataMaxAge(time.Second)}
	var err error
	if b.srcCl, err = b.src.NewClient(kafkatest.Identity{}, fresh...); err != nil {
		return err
	}
	if b.dstCl, err = b.dst.NewClient(kafkatest.Identity{}, fresh...); err != nil {
		return err
	}
	b.srcAdm, b.dstAdm = kadm.NewClient(b.srcCl), kadm.NewClient(b.dstCl)
	return nil
}

func (b *bench) close() {
	for _, cl := range []*kgo.Client{b.srcCl, b.dstCl} {
		if cl != nil {
			cl.Close()
		}
	}
	for _, c := range []*kafkatest.Cluster{b.src, b.dst} {
		if c != nil {
			if err := c.Close(); err != nil {
				log.Printf("bench: %v", err)
			}
		}
	}
}

// bootstrap returns the address a contender reaches cluster c at: the
// plain listener, or its fault proxy with the round trip rtt.
func bootstrap(c *kafkatest.Cluster, rtt time.Duration) string {
	if rtt <= 0 {
		return c.BootstrapServers(kafkatest.Plaintext)
	}
	c.Proxy(0).SetLatency(rtt/2, 0)
	return c.BootstrapServers(kafkatest.Proxied)
}

// runScenario loads the scenario's backlog once and runs every contender
// against it.
// warmUpScenario is copied before the first scenario, its results
// discarded: the brokers' JVMs start with their produce and fetch paths
// interpreted, and a first measurement on them would be slower for whichever
// contender runs first.
var warmUpScenario = scenario.Scenario{Name: "warm-up", What: "a small backlog copied once by the raw forwarder and once by kmirror before any measurement",
	Partitions: 4, Records: 200_000, RecordSize: scenario.KiB, Codec: "none", BatchSize: scenario.DefaultBatch, Linger: scenario.DefaultLinger}

// warmUpBrokers runs the warm-up contenders over warmUpScenario; failures are
// logged only.
func (b *bench) warmUpBrokers(ctx context.Context) {
	measured, repeat := b.contenders, b.repeat
	b.contenders, b.repeat = b.warm, 1
	defer func() { b.contenders, b.repeat = measured, repeat }()
	log.Printf("bench: warming the brokers up: %s", warmUpScenario.What)
	if r := b.runScenario(ctx, warmUpScenario); r.Err != "" {
		log.Printf("bench: warm-up: %s", r.Err)
	}
}

func (b *bench) runScenario(ctx context.Context, sc scenario.Scenario) report.ScenarioResult {
	res := report.ScenarioResult{Scenario: sc}
	topic := fmt.Sprintf("bench-%s-%d", sc.Name, time.Now().Unix())
	if err := topics.Create(ctx, b.srcAdm, topic, sc.Partitions); err != nil {
		res.Err = err.Error()
		return res
	}
	defer func() {
		if err := topics.DeleteAllBut(context.WithoutCancel(ctx), b.srcAdm, nil); err != nil {
			log.Printf("bench: %v", err)
		}
	}()
	began := time.Now()
	if err := load.Backlog(ctx, b.src, b.runs, topic, sc); err != nil {
		res.Err = err.Error()
		return res
	}
	res.Load = time.Since(began)
	srcEnds, err := topics.EndOffsets(ctx, b.srcAdm, topic)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	if got := sum(srcEnds); got != sc.Records {
		res.Err = fmt.Sprintf("the source holds %d records after loading %d", got, sc.Records)
		return res
	}
	if n, bytes, err := load.SampleBatches(ctx, b.srcCl, topic); err == nil {
		res.SourceBatches, res.SourceBytes = n, bytes
	}
	log.Printf("bench: %s: %d records loaded in %s", sc.Name, sc.Records, res.Load.Round(time.Millisecond))
	for _, c := range b.scenarioWarm {
		b.warmUpScenario(ctx, c, sc, topic, srcEnds)
	}
	// Round i runs the contenders in their order rotated by i, so that
	// over the rounds each runs at each place (-repeat).
	runs := map[string][]report.Result{}
	for round := range b.repeat {
		for i := range b.contenders {
			c := b.contenders[(i+round)%len(b.contenders)]
			if ctx.Err() != nil {
				break
			}
			if _, ok := c.(contender.Failoverer); sc.Failover && !ok {
				continue // the scenario measures an operation c does not have
			}
			r := b.runContender(ctx, c, sc, topic, srcEnds)
			log.Printf("bench: %s / %s (round %d, place %d): total %s (%.1f MB/s), steady %.1f MB/s, CPU %.1f s, peak RSS %d MiB, %s",
				sc.Name, c.Name(), round+1, i+1, r.Total.Round(time.Millisecond), r.TotalMBps(), r.SteadyMBps(), r.CPU.Seconds(), r.PeakRSS/scenario.MiB, r.Verdict())
			r.Runs = report.RunOf(r, round+1, i+1)
			runs[c.Name()] = append(runs[c.Name()], r)
			// The next contender starts from an empty destination, and
			// the source keeps only the scenario's topic (MirrorMaker 2
			// may leave topics of its own there).
			cctx := context.WithoutCancel(ctx)
			if err := topics.DeleteAllBut(cctx, b.dstAdm, nil); err != nil {
				log.Printf("bench: %v", err)
			}
			if err := topics.DeleteAllBut(cctx, b.srcAdm, []string{topic}); err != nil {
				log.Printf("bench: %v", err)
			}
		}
	}
	for _, c := range b.contenders {
		if rs := runs[c.Name()]; len(rs) > 0 {
			res.Results = append(res.Results, report.Median(rs))
		}
	}
	return res
}

// warmUpScenario copies the scenario's backlog once with c, on loopback and
// without the latency, failover or idle phases, and discards the result.
// Whichever contender ran first on a new shape of work (500 partitions
// after 4, say) ran on brokers that had not warmed up to it: on p500 the
// first of two identical kmirror runs cost the destination broker twice
// the CPU per byte (20.8 against 9.2 CPU-s) and halved its throughput, and
// after one warm-up copy the next three runs still sped up by about 10%
// each (docs/benchmarks.md).
func (b *bench) warmUpScenario(ctx context.Context, c contender.Contender, sc scenario.Scenario, topic string, srcEnds map[int32]int64) {
	w := sc
	w.LatencyRate, w.Failover, w.IdleFor, w.SourceRTT, w.DestinationRTT = 0, false, 0, 0, 0
	r := b.runContender(ctx, c, w, topic, srcEnds)
	log.Printf("bench: %s: warm-up copy by %s (discarded): total %s, steady %.1f MB/s, %s",
		sc.Name, c.Name(), r.Total.Round(time.Millisecond), r.SteadyMBps(), r.Verdict())
	cctx := context.WithoutCancel(ctx)
	if err := topics.DeleteAllBut(cctx, b.dstAdm, nil); err != nil {
		log.Printf("bench: %v", err)
	}
	if err := topics.DeleteAllBut(cctx, b.srcAdm, []string{topic}); err != nil {
		log.Printf("bench: %v", err)
	}
}

// runContender runs one contender over the backlog and measures it.
func (b *bench) runContender(ctx context.Context, c contender.Contender, sc scenario.Scenario, topic string, srcEnds map[int32]int64) report.Result {
	b.seq++
	r := report.Result{Contender: c.Name(), Records: sc.Records, Bytes: sc.PayloadBytes()}
	dir := filepath.Join(b.runs, fmt.Sprintf("%02d-%s-%s", b.seq, sc.Name, c.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Err = err.Error()
		return r
	}
	spec := contender.RunSpec{Dir: dir, Topics: []string{topic}, Scenario: sc, Source: bootstrap(b.src, sc.SourceRTT), Destination: bootstrap(b.dst, sc.DestinationRTT), Seq: b.seq}
	// The latency phase writes to a topic of the run's own, created empty
	// before the contender starts, so the backlog stays the same for every
	// contender.
	latTopic := ""
	if sc.LatencyRate > 0 {
		latTopic = fmt.Sprintf("%s-lat%d", topic, b.seq)
		if err := topics.Create(ctx, b.srcAdm, latTopic, sc.Partitions); err != nil {
			r.Err = err.Error()
			return r
		}
		spec.Topics = append(spec.Topics, latTopic)
	}
	// The brokers may still be busy with the last run: deleting its
	// destination topic (thousands of partitions take minutes on one
	// broker), or writing the backlog just loaded. The contender starts
	// once both are quiet, so that it is not charged for that work.
	// The disk too: the page cache's dirty pages (the backlog just loaded,
	// the last run's writes) are written back first, so that no contender
	// copies while the kernel flushes a gigabyte under it.
	syscall.Sync()
	if d, quiet := proc.WaitQuiet(ctx, []int{b.src.BrokerPID(0), b.dst.BrokerPID(0)}, []int{b.dst.BrokerPID(0)}, proc.QuietCPU, proc.QuietFor, proc.QuietMax); !quiet {
		log.Printf("bench: %s / %s: the brokers were still busy after %s; starting anyway", sc.Name, c.Name(), d.Round(time.Second))
	} else if d > 5*time.Second {
		log.Printf("bench: %s / %s: waited %s for the brokers to be quiet", sc.Name, c.Name(), d.Round(time.Second))
	}
	srcCPU0, dstCPU0 := proc.ProcessCPU(b.src.BrokerPID(0)), proc.ProcessCPU(b.dst.BrokerPID(0))
	t0 := time.Now()
	p, err := c.Start(ctx, spec)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer p.Stop(30 * time.Second)
	sampler := proc.NewTreeSampler(p.PID())
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	sampling.Go(func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			sampler.Sample()
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
			}
		}
	})

	var first time.Time
	var firstRecords int64
	var profiling sync.WaitGroup
	caughtUp := false
	deadline := time.Now().Add(b.timeout)
	for !caughtUp {
		if exited, err := p.Exited(); exited {
			r.Err = fmt.Sprintf("%s %v before catching up", c.Name(), err)
			r.Detail = p.LogTail(20)
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.Err = fmt.Sprintf("not caught up after %s", b.timeout)
			r.Detail = p.LogTail(20)
			break
		}
		ends, _ := topics.EndOffsets(ctx, b.dstAdm, topic) // a topic not created yet has no offsets
		now := time.Now()
		if n := sum(ends); n > 0 && first.IsZero() {
			first, firstRecords = now, n
			profiling.Go(func() {
				b.takeProfile(ctx, c, spec, "profile", fmt.Sprintf("?seconds=%d", max(1, int(b.profile.Seconds()))), "cpu")
			})
		}
		caughtUp = covers(ends, srcEnds)
		if caughtUp {
			r.Total = now.Sub(t0)
			r.Steady = now.Sub(first)
			r.SteadyRecords = sc.Records - firstRecords
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollEvery(sc.Partitions)):
		}
	}
	stopSampling()
	sampling.Wait()
	sampler.Sample()
	r.CPU, r.PeakRSS = sampler.Totals()
	if caughtUp {
		b.takeProfile(ctx, c, spec, "heap", "?gc=1", "heap")
		b.takeProfile(ctx, c, spec, "metrics", "", "metrics")
	}
	profiling.Wait() // the CPU profile runs its whole length
	r.SourceCPU = proc.ProcessCPU(b.src.BrokerPID(0)) - srcCPU0
	r.DestinationCPU = proc.ProcessCPU(b.dst.BrokerPID(0)) - dstCPU0

	if caughtUp && sc.IdleFor > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(sc.IdleFor):
		}
		sampler.Sample()
		cpu, _ := sampler.Totals()
		r.IdleCPU = cpu - r.CPU
		r.IdleRSS = proc.TreeRSS(p.PID())
	}
	if f, ok := c.(contender.Failoverer); ok && caughtUp && sc.Failover {
		began := time.Now()
		if err := f.Failover(ctx, spec); err != nil {
			r.Err = "failover: " + err.Error()
		} else {
			r.Failover = time.Since(began)
		}
	}
	if caughtUp && latTopic != "" {
		srcOpts, _ := b.src.ClientOpts(kafkatest.Identity{})
		dstOpts, _ := b.dst.ClientOpts(kafkatest.Identity{})
		// Warm up: one record per partition, mirrored before the clock
		// starts, so the phase times a mirror that already streams the
		// topic, not one still preparing its partitions.
		from, err := b.warmUp(ctx, latTopic, sc.Partitions)
		if err != nil {
			r.Err = "latency phase: " + err.Error()
		} else {
			lat, err := load.LatencyPhase(ctx, srcOpts, dstOpts, latTopic, from, sc, 30*time.Second)
			if err != nil {
				r.Err = "latency phase: " + err.Error()
			}
			r.Latency = lat
		}
	}
	// Count what the destination holds, partition by partition.
	for _, t := range spec.Topics {
		want, err := topics.EndOffsets(ctx, b.srcAdm, t)
		if err != nil && r.Err == "" {
			r.Err = "counting source records: " + err.Error()
		}
		if caughtUp {
			b.waitCovered(ctx, t, want, 2*time.Minute)
		}
		starts, err1 := topics.StartOffsets(ctx, b.dstAdm, t)
		ends, err2 := topics.EndOffsets(ctx, b.dstAdm, t)
		if err := errors.Join(err1, err2); err != nil && r.Err == "" && caughtUp {
			r.Err = "counting destination records: " + err.Error()
		}
		for part, w := range want {
			got := ends[part] - starts[part]
			switch {
			case got < w:
				r.Lost += w - got
				r.LostPartitions++
			case got > w:
				r.Duplicates += got - w
			}
		}
	}
	if exited, err := p.Exited(); exited && r.Err == "" {
		r.Err = fmt.Sprintf("%s %v during the run", c.Name(), err)
	}
	return r
}

// warmUp produces one record to every partition of topic on the source and
// waits until the destination has them all; it returns the destination's
// end offsets, where the latency phase starts reading.
func (b *bench) warmUp(ctx context.Context, topic string, partitions int) (map[int32]int64, error) {
	var recs []*kgo.Record
	for p := range partitions {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Value: make([]byte, 8)})
	}
	cl, err := b.src.NewClient(kafkatest.Identity{}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, fmt.Errorf("warm-up records: %w", err)
	}
	want, err := topics.EndOffsets(ctx, b.srcAdm, topic)
	if err != nil {
		return nil, err
	}
	b.waitCovered(ctx, topic, want, 2*time.Minute)
	ends, _ := topics.EndOffsets(ctx, b.dstAdm, topic)
	if !covers(ends, want) {
		return nil, fmt.Errorf("the warm-up records of %s did not reach the destination in 2 minutes", topic)
	}
	return ends, nil
}

// waitCovered waits until the destination's end offsets reach want, or d.
func (b *bench) waitCovered(ctx context.Context, topic string, want map[int32]int64, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ends, _ := topics.EndOffsets(ctx, b.dstAdm, topic)
		if covers(ends, want) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// pollEvery is how often the destination's end offsets are read: often
// enough to time a catch-up of seconds, rarely enough that a ListOffsets of
// thousands of partitions costs the broker little.
func pollEvery(partitions int) time.Duration {
	if partitions >= 1000 {
		return 250 * time.Millisecond
	}
	return 100 * time.Millisecond
}

// covers reports whether every partition of want has at least that end
// offset in have.
func covers(have, want map[int32]int64) bool {
	for p, w := range want {
		if have[p] < w {
			return false
		}
	}
	return true
}

func sum(m map[int32]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// repoRoot walks up from the working directory to the one holding go.work.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work above %s: run the bench inside the kmirror repository", dir)
		}
	}
}

func runIn(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%w\n%s", err, stderr.String())
	}
	return out, nil
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}

func gitDescribe(root string) string {
	out, err := runIn(context.Background(), root, "git", "describe", "--always", "--dirty")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// jarVersion returns the version in the file name of the first jar in libs
// starting with prefix and a digit ("connect-mirror-4.3.1.jar" → "4.3.1").
func jarVersion(libs, prefix string) string {
	jars, _ := filepath.Glob(filepath.Join(libs, prefix+"[0-9]*.jar"))
	if len(jars) == 0 {
		return "?"
	}
	return strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), prefix), ".jar")
}

// shellJoin quotes args as a POSIX shell would need them.
func shellJoin(args []string) string {
	var out []string
	for _, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,/:@+") == "" {
			out = append(out, a)
			continue
		}
		out = append(out, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	return strings.Join(out, " ")
}

// takeProfile saves the contender's pprof profile kind (query appended) as
// <out>/profiles/<run>-<name>.pprof, when -profile is on and the contender
// serves profiles; failures are logged, not fatal.
func (b *bench) takeProfile(ctx context.Context, c contender.Contender, spec contender.RunSpec, kind, query, name string) {
	p, ok := c.(contender.Profiler)
	if !ok || b.profile <= 0 {
		return
	}
	base := p.ProfileURL(spec)
	if base == "" {
		return
	}
	dir := filepath.Join(b.out, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Printf("bench: profile: %v", err)
		return
	}
	url := base + kind + query
	if kind == "metrics" { // not a profile: the Prometheus page, next to them
		url = strings.TrimSuffix(base, "debug/pprof/") + "metrics"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		log.Printf("bench: profile: %v", err)
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Printf("bench: %s profile of %s: %v", kind, c.Name(), err)
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		log.Printf("bench: %s profile of %s: status %d, %v", kind, c.Name(), resp.StatusCode, err)
		return
	}
	ext := ".pprof"
	if kind == "metrics" {
		ext = ".txt"
	}
	path := filepath.Join(dir, filepath.Base(spec.Dir)+"-"+name+ext)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		log.Printf("bench: profile: %v", err)
		return
	}
	log.Printf("bench: %s of %s in %s", name, c.Name(), path)
}
