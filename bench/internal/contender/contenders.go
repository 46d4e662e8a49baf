// Package contender holds the mirrors the bench measures — kmirror (Kmirror),
// MirrorMaker 2 (MM2) and the raw forwarder (Raw) — each configured for a
// run and started as its own process (Process), whose CPU and memory the
// bench samples apart from its own.
package contender

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

	"github.com/kmirror/kmirror/bench/internal/report"
	"github.com/kmirror/kmirror/bench/internal/scenario"
)

// RunSpec is what a contender needs to mirror one scenario's topic.
type RunSpec struct {
	Dir string // the run's own directory (configs, logs, state)
	// Topics to mirror: the backlog's, and the run's own latency topic
	// when the scenario has a latency phase.
	Topics      []string
	Scenario    scenario.Scenario
	Source      string // bootstrap servers
	Destination string
	Seq         int // unique per run, for names that must not repeat
}

// Contender is a mirror the bench measures.
type Contender interface {
	// Name names the contender in the report.
	Name() string
	// Settings says how the contender is configured, for the report.
	Settings() string
	// Start starts the contender's process mirroring spec.Topics.
	Start(ctx context.Context, spec RunSpec) (*Process, error)
}

// Kmirror runs `kmirror run` with default settings: only the
// clusters, the topic, a state directory and local listener addresses are
// configured.
type Kmirror struct {
	Binary string   // the kmirror binary
	Extra  []string // extra mirror keys ("key: value"), for a tuned variant
	Daemon []string // extra daemon-wide keys ("key: value"), for a tuned variant
	Label  string   // the contender's name: kmirror, or kmirror-tuned
	Pprof  bool     // http.pprof.enable, for -profile
}

// Profiler is a contender whose CPU and heap profiles the bench can take
// while it catches up (-profile).
type Profiler interface {
	// ProfileURL returns the base URL of the process's /debug/pprof/, ""
	// when it serves none.
	ProfileURL(spec RunSpec) string
}

// ProfileURL: kmirror serves /debug/pprof/ on its HTTP listener when
// started with -profile.
func (k Kmirror) ProfileURL(spec RunSpec) string {
	if !k.Pprof {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(spec.Dir, "http.address"))
	if err != nil {
		return ""
	}
	return "http://" + string(b) + "/debug/pprof/"
}

// Name is k.Label.
func (k Kmirror) Name() string { return k.Label }

// Settings says kmirror runs with default settings, and names the tuned keys.
func (k Kmirror) Settings() string {
	s := "`kmirror run` built from this commit, default settings (file state store; `replica.fetch.max.bytes` 1 MiB, `replica.fetch.response.max.bytes` 10 MiB, one fetch session per source broker)"
	if tuned := append(append([]string(nil), k.Daemon...), k.Extra...); len(tuned) > 0 {
		s += "; tuned: `" + strings.Join(tuned, "`, `") + "`"
	}
	return s
}

// Start writes kmirror.yaml into spec.Dir and starts `kmirror run` with it.
func (k Kmirror) Start(ctx context.Context, spec RunSpec) (*Process, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	adminPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	pprof := ""
	if k.Pprof {
		pprof = "http.pprof.enable: true\n"
		if err := os.WriteFile(filepath.Join(spec.Dir, "http.address"), fmt.Appendf(nil, "127.0.0.1:%d", port), 0o600); err != nil {
			return nil, err
		}
	}
	for _, d := range k.Daemon {
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
	for _, e := range k.Extra {
		cfg += "    " + e + "\n"
	}
	path := filepath.Join(spec.Dir, "kmirror.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	return startProcess(exec.Command(k.Binary, "run", "--config", path), filepath.Join(spec.Dir, "kmirror.log"))
}

// Failoverer is a contender that can fail its topics over to the
// destination (kmirror only: MirrorMaker 2 has no such operation, its
// consumers translate offsets through checkpoints instead).
type Failoverer interface {
	// Failover fails every mirrored topic over and returns once every
	// partition is STOPPED.
	Failover(ctx context.Context, spec RunSpec) error
}

// Failover runs `kmirror failover` against the daemon of spec, which
// returns once every partition is STOPPED (open transactions aborted, last
// mirrored offsets recorded, topics writable).
func (k Kmirror) Failover(ctx context.Context, spec RunSpec) error {
	cmd := exec.CommandContext(ctx, k.Binary, "failover", "--yes", "--mirror", "bench", "--config", filepath.Join(spec.Dir, "kmirror.yaml"), "--json")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if len(out) > 2000 {
			out = out[len(out)-2000:]
		}
		return fmt.Errorf("kmirror failover: %w: %s", err, out)
	}
	return nil
}

// MM2 runs MirrorMaker 2 in dedicated mode (what
// connect-mirror-maker.sh runs), configured for throughput as its
// documentation and the usual tuning guides say: identity replication
// policy, one task per partition, the destination producer batching like
// the source producer, large consumer fetches, and everything but the data
// path (heartbeats, checkpoints, offset syncs, ACL sync) off.
type MM2 struct {
	Libs     string // connect-mirror jars (scripts/mm2/fetch.sh)
	Java     string // the java binary
	MaxTasks int    // 0: tasks.max = partitions
	Heap     string // -Xmx
	Version  string // connect-mirror's, for the report
	// OffsetSync turns on what an operator runs for failover: offset
	// syncs, checkpoints and group offset sync (contender mm2-sync).
	OffsetSync bool
}

// Name is mm2, or mm2-sync with offset sync on.
func (m MM2) Name() string {
	if m.OffsetSync {
		return report.MM2Sync
	}
	return report.MM2
}

// Settings lists MirrorMaker 2's tuning, for the report.
func (m MM2) Settings() string {
	return fmt.Sprintf("MirrorMaker 2 (`connect-mirror` %s from Maven Central) in dedicated mode, `org.apache.kafka.connect.mirror.MirrorMaker` as `connect-mirror-maker.sh` runs it "+
		"(JVM `-Xmx%s` — the script's default 2g ran out of heap with 16 tasks on p500 — and G1 as `kafka-run-class.sh`); `IdentityReplicationPolicy`; `tasks.max` = partitions%s; "+
		"destination producer `batch.size`, `linger.ms` and `compression.type` as the source producer's, `acks=all` (Connect's other producer defaults kept); "+
		"source consumer `max.partition.fetch.bytes` 1 MiB, `fetch.max.bytes` 50 MiB, `max.poll.records` 2000; "+
		"%s", m.Version, m.Heap, m.capNote(), m.syncNote())
}

func (m MM2) syncNote() string {
	if m.OffsetSync {
		return "offset syncs, checkpoints and group offset sync on (every 1 s; `offset.lag.max` 100), heartbeats and ACL sync off"
	}
	return "heartbeats, checkpoints, offset syncs (`emit.offset-syncs.enabled=false`), group offset sync and ACL sync off"
}

func (m MM2) capNote() string {
	if m.MaxTasks > 0 {
		return fmt.Sprintf(" up to %d (each task has its own consumer, fetching up to 50 MiB, and its own producer, buffering up to 32 MiB; 2,000 tasks in one worker did not copy 20,000 records in 3 minutes)", m.MaxTasks)
	}
	return ""
}

// mm2Properties renders the mm2.properties of a run. Cluster aliases are
// unique per run, so every run has fresh internal topics and worker group.
func (m MM2) mm2Properties(spec RunSpec) string {
	sc := spec.Scenario
	src, dst := fmt.Sprintf("src%d", spec.Seq), fmt.Sprintf("dst%d", spec.Seq)
	tasks := sc.Partitions
	if m.MaxTasks > 0 {
		tasks = min(tasks, m.MaxTasks)
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
	if m.OffsetSync {
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

// Start writes mm2.properties into spec.Dir and starts MirrorMaker 2 in
// dedicated mode with it.
func (m MM2) Start(ctx context.Context, spec RunSpec) (*Process, error) {
	path := filepath.Join(spec.Dir, "mm2.properties")
	if err := os.WriteFile(path, []byte(m.mm2Properties(spec)), 0o600); err != nil {
		return nil, err
	}
	// kafka-run-class.sh's defaults with connect-mirror-maker.sh's heap.
	args := []string{
		"-Xms256m", "-Xmx" + m.Heap,
		"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(m.Libs, "log4j2.properties"),
		"-cp", filepath.Join(m.Libs, "*"),
		"org.apache.kafka.connect.mirror.MirrorMaker", path,
	}
	return startProcess(exec.Command(m.Java, args...), filepath.Join(spec.Dir, "mm2.log"))
}

// Raw runs this program's raw forwarder (`kmirror-bench raw`) as
// its own process, so its CPU and memory are measured apart from the bench.
type Raw struct {
	Self     string // this program's binary
	InFlight int    // ProduceRequests in flight per destination broker
}

// Name is raw.
func (r Raw) Name() string { return report.Raw }

// Settings describes the raw forwarder, for the report.
func (r Raw) Settings() string {
	return fmt.Sprintf("the raw limit: a franz-go program (`kmirror-bench raw`) that fetches the source's batches as a replica fetcher does (1 MiB per partition, 10 MiB per response, one fetch in flight) "+
		"and produces them unchanged but for the producer fields (non-idempotent, `acks=all`), one batch per partition per ProduceRequest, %d requests in flight per destination broker; no state, no checks", r.InFlight)
}

// Start starts `kmirror-bench raw` over spec.Topics.
func (r Raw) Start(ctx context.Context, spec RunSpec) (*Process, error) {
	cmd := exec.Command(r.Self, "raw", "-source", spec.Source, "-destination", spec.Destination, "-topics", strings.Join(spec.Topics, ","), "-inflight", fmt.Sprint(r.InFlight))
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

// FreePort returns a loopback TCP port that nothing listened on a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Names is the default order: ratios read best with the subject
// first.
// mm2-sync is left out of the default list (-contenders names it).
var Names = []string{report.Kmirror, report.MM2, report.Raw, report.MM2Sync}

// ParseNames checks a comma-separated list of contender names.
func ParseNames(list string) ([]string, error) {
	var out []string
	for n := range strings.SplitSeq(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(Names, n) {
			return nil, fmt.Errorf("no contender %q; contenders are %s", n, strings.Join(Names, ", "))
		}
		out = append(out, n)
	}
	return out, nil
}
