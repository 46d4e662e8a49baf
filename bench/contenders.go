package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// runSpec is what a contender needs to mirror one scenario's topic.
type runSpec struct {
	Dir string // the run's own directory (configs, logs, state)
	// Topics to mirror: the backlog's, and the run's own latency topic
	// when the scenario has a latency phase.
	Topics      []string
	Scenario    Scenario
	Source      string // bootstrap servers
	Destination string
	Seq         int // unique per run, for names that must not repeat
}

// contender is a mirror the bench measures.
type contender interface {
	Name() string
	// Settings says how the contender is configured, for the report.
	Settings() string
	// Start starts the contender's process mirroring spec.Topics.
	Start(ctx context.Context, spec runSpec) (*process, error)
}

// kmirrorContender runs `kmirror run` with default settings: only the
// clusters, the topic, a state directory and local listener addresses are
// configured.
type kmirrorContender struct {
	binary string
	extra  []string // extra mirror keys ("key: value"), for a tuned variant
	daemon []string // extra daemon-wide keys ("key: value"), for a tuned variant
	name   string
	pprof  bool // http.pprof.enable, for -profile
}

// profiler is a contender whose CPU and heap profiles the bench can take
// while it catches up (-profile).
type profiler interface {
	// ProfileURL returns the base URL of the process's /debug/pprof/, ""
	// when it serves none.
	ProfileURL(spec runSpec) string
}

// ProfileURL: kmirror serves /debug/pprof/ on its HTTP listener when
// started with -profile.
func (k kmirrorContender) ProfileURL(spec runSpec) string {
	if !k.pprof {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(spec.Dir, "http.address"))
	if err != nil {
		return ""
	}
	return "http://" + string(b) + "/debug/pprof/"
}

func (k kmirrorContender) Name() string { return k.name }

func (k kmirrorContender) Settings() string {
	s := "`kmirror run` built from this commit, default settings (file state store; `replica.fetch.max.bytes` 1 MiB, `replica.fetch.response.max.bytes` 10 MiB, one fetch session per source broker)"
	if tuned := append(append([]string(nil), k.daemon...), k.extra...); len(tuned) > 0 {
		s += "; tuned: `" + strings.Join(tuned, "`, `") + "`"
	}
	return s
}

func (k kmirrorContender) Start(ctx context.Context, spec runSpec) (*process, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	adminPort, err := freePort()
	if err != nil {
		return nil, err
	}
	pprof := ""
	if k.pprof {
		pprof = "http.pprof.enable: true\n"
		if err := os.WriteFile(filepath.Join(spec.Dir, "http.address"), fmt.Appendf(nil, "127.0.0.1:%d", port), 0o600); err != nil {
			return nil, err
		}
	}
	for _, d := range k.daemon {
		pprof += d + "\n"
	}
	cfg := pprof + fmt.Sprintf(`log.level: info
log.format: json
http.address: 127.0.0.1:%d
admin.address: 127.0.0.1:%d
state:
  dir: %s
destination:
  bootstrap.servers: %s
mirrors:
  - name: bench
    bootstrap.servers: %s
    mirror.topics.include: %q
`, port, adminPort, filepath.Join(spec.Dir, "state"), spec.Destination, spec.Source, quotedList(spec.Topics))
	for _, e := range k.extra {
		cfg += "    " + e + "\n"
	}
	path := filepath.Join(spec.Dir, "kmirror.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	return startProcess(exec.Command(k.binary, "run", "--config", path), filepath.Join(spec.Dir, "kmirror.log"))
}

// failoverer is a contender that can fail its topics over to the
// destination (kmirror only: MirrorMaker 2 has no such operation, its
// consumers translate offsets through checkpoints instead).
type failoverer interface {
	// Failover fails every mirrored topic over and returns once every
	// partition is STOPPED.
	Failover(ctx context.Context, spec runSpec) error
}

// Failover runs `kmirror failover` against the daemon of spec, which
// returns once every partition is STOPPED (open transactions aborted, last
// mirrored offsets recorded, topics writable).
func (k kmirrorContender) Failover(ctx context.Context, spec runSpec) error {
	cmd := exec.CommandContext(ctx, k.binary, "failover", "--mirror", "bench", "--config", filepath.Join(spec.Dir, "kmirror.yaml"), "--json")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if len(out) > 2000 {
			out = out[len(out)-2000:]
		}
		return fmt.Errorf("kmirror failover: %w: %s", err, out)
	}
	return nil
}

// mm2Contender runs MirrorMaker 2 in dedicated mode (what
// connect-mirror-maker.sh runs), configured for throughput as its
// documentation and the usual tuning guides say: identity replication
// policy, one task per partition, the destination producer batching like
// the source producer, large consumer fetches, and everything but the data
// path (heartbeats, checkpoints, offset syncs, ACL sync) off.
type mm2Contender struct {
	libs     string // connect-mirror jars (scripts/mm2/fetch.sh)
	java     string
	maxTasks int    // 0: tasks.max = partitions
	heap     string // -Xmx
	version  string
	// offsetSync turns on what an operator runs for failover: offset
	// syncs, checkpoints and group offset sync (contender mm2-sync).
	offsetSync bool
}

func (m mm2Contender) Name() string {
	if m.offsetSync {
		return contMM2Sync
	}
	return contMM2
}

func (m mm2Contender) Settings() string {
	return fmt.Sprintf("MirrorMaker 2 (`connect-mirror` %s from Maven Central) in dedicated mode, `org.apache.kafka.connect.mirror.MirrorMaker` as `connect-mirror-maker.sh` runs it "+
		"(JVM `-Xmx%s` — the script's default 2g ran out of heap with 16 tasks on p500 — and G1 as `kafka-run-class.sh`); `IdentityReplicationPolicy`; `tasks.max` = partitions%s; "+
		"destination producer `batch.size`, `linger.ms` and `compression.type` as the source producer's, `acks=all` (Connect's other producer defaults kept); "+
		"source consumer `max.partition.fetch.bytes` 1 MiB, `fetch.max.bytes` 50 MiB, `max.poll.records` 2000; "+
		"%s", m.version, m.heap, m.capNote(), m.syncNote())
}

func (m mm2Contender) syncNote() string {
	if m.offsetSync {
		return "offset syncs, checkpoints and group offset sync on (every 1 s; `offset.lag.max` 100), heartbeats and ACL sync off"
	}
	return "heartbeats, checkpoints, offset syncs (`emit.offset-syncs.enabled=false`), group offset sync and ACL sync off"
}

func (m mm2Contender) capNote() string {
	if m.maxTasks > 0 {
		return fmt.Sprintf(" up to %d (each task has its own consumer, fetching up to 50 MiB, and its own producer, buffering up to 32 MiB; 2,000 tasks in one worker did not copy 20,000 records in 3 minutes)", m.maxTasks)
	}
	return ""
}

// mm2Properties renders the mm2.properties of a run. Cluster aliases are
// unique per run, so every run has fresh internal topics and worker group.
func (m mm2Contender) mm2Properties(spec runSpec) string {
	sc := spec.Scenario
	src, dst := fmt.Sprintf("src%d", spec.Seq), fmt.Sprintf("dst%d", spec.Seq)
	tasks := sc.Partitions
	if m.maxTasks > 0 {
		tasks = min(tasks, m.maxTasks)
	}
	lines := []string{
		"clusters = " + src + ", " + dst,
		src + ".bootstrap.servers = " + spec.Source,
		dst + ".bootstrap.servers = " + spec.Destination,
		src + "->" + dst + ".enabled = true",
		dst + "->" + src + ".enabled = false",
		src + "->" + dst + ".topics = " + quotedList(spec.Topics),
		"replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
		fmt.Sprintf("tasks.max = %d", tasks),
		"replication.factor = 1",
		"checkpoints.topic.replication.factor = 1",
		"heartbeats.topic.replication.factor = 1",
		"offset.storage.replication.factor = 1",
		"status.storage.replication.factor = 1",
		"config.storage.replication.factor = 1",
		"emit.heartbeats.enabled = false",
		"sync.topic.acls.enabled = false",
		fmt.Sprintf("%s.producer.batch.size = %d", dst, sc.BatchSize),
		fmt.Sprintf("%s.producer.linger.ms = %d", dst, sc.Linger.Milliseconds()),
		fmt.Sprintf("%s.producer.compression.type = %s", dst, sc.Codec),
		// Connect's own producer defaults otherwise (acks=all). Raising
		// max.in.flight.requests.per.connection to 5 with idempotence
		// made a task's producer retry OUT_OF_ORDER_SEQUENCE_NUMBER for
		// ever after NOT_LEADER_OR_FOLLOWER on a topic MirrorMaker 2 had
		// just created (p100, twice): not a setting to recommend.
		dst + ".producer.acks = all",
		src + ".consumer.max.partition.fetch.bytes = 1048576",
		src + ".consumer.fetch.max.bytes = 52428800",
		src + ".consumer.max.poll.records = 2000",
	}
	if m.offsetSync {
		lines = append(lines,
			"emit.offset-syncs.enabled = true",
			"offset-syncs.topic.replication.factor = 1",
			"emit.checkpoints.enabled = true",
			"emit.checkpoints.interval.seconds = 1",
			"sync.group.offsets.enabled = true",
			"sync.group.offsets.interval.seconds = 1",
			"offset.lag.max = 100",
		)
	} else {
		// MirrorSourceConnector refuses any offset-syncs.* setting with
		// offset syncs off, so offset-syncs.topic.replication.factor is
		// not set.
		lines = append(lines,
			"emit.offset-syncs.enabled = false",
			"emit.checkpoints.enabled = false",
			"sync.group.offsets.enabled = false",
		)
	}
	return strings.Join(lines, "\n") + "\n"
}

func (m mm2Contender) Start(ctx context.Context, spec runSpec) (*process, error) {
	path := filepath.Join(spec.Dir, "mm2.properties")
	if err := os.WriteFile(path, []byte(m.mm2Properties(spec)), 0o600); err != nil {
		return nil, err
	}
	// kafka-run-class.sh's defaults with connect-mirror-maker.sh's heap.
	args := []string{
		"-Xms256m", "-Xmx" + m.heap,
		"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(m.libs, "log4j2.properties"),
		"-cp", filepath.Join(m.libs, "*"),
		"org.apache.kafka.connect.mirror.MirrorMaker", path,
	}
	return startProcess(exec.Command(m.java, args...), filepath.Join(spec.Dir, "mm2.log"))
}

// rawContender runs this program's raw forwarder (`kmirror-bench raw`) as
// its own process, so its CPU and memory are measured apart from the bench.
type rawContender struct {
	self     string
	inflight int
}

func (r rawContender) Name() string { return contRaw }

func (r rawContender) Settings() string {
	return fmt.Sprintf("the raw limit: a franz-go program (`kmirror-bench raw`) that fetches the source's batches as a replica fetcher does (1 MiB per partition, 10 MiB per response, one fetch in flight) "+
		"and produces them unchanged but for the producer fields (non-idempotent, `acks=all`), one batch per partition per ProduceRequest, %d requests in flight per destination broker; no state, no checks", r.inflight)
}

func (r rawContender) Start(ctx context.Context, spec runSpec) (*process, error) {
	cmd := exec.Command(r.self, "raw", "-source", spec.Source, "-destination", spec.Destination, "-topics", strings.Join(spec.Topics, ","), "-inflight", fmt.Sprint(r.inflight))
	return startProcess(cmd, filepath.Join(spec.Dir, "raw.log"))
}

// quotedList is a comma-separated list of regular expressions matching
// exactly the topics (both kmirror's mirror.topics.include and MirrorMaker
// 2's topics take one).
func quotedList(topics []string) string {
	var q []string
	for _, t := range topics {
		q = append(q, regexp.QuoteMeta(t))
	}
	return strings.Join(q, ", ")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// contenderNames is the default order: ratios read best with the subject
// first.
// mm2-sync is left out of the default list (-contenders names it).
var contenderNames = []string{contKmirror, contMM2, contRaw, contMM2Sync}

// parseContenders checks a comma-separated list of contender names.
func parseContenders(list string) ([]string, error) {
	var out []string
	for n := range strings.SplitSeq(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(contenderNames, n) {
			return nil, fmt.Errorf("no contender %q; contenders are %s", n, strings.Join(contenderNames, ", "))
		}
		out = append(out, n)
	}
	return out, nil
}
