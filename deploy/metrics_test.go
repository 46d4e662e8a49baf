// Package deploy holds the test that proves deploy/metrics.txt true: every
// metric listed there is one the daemon exports. The Grafana dashboard and
// the Prometheus rules in this directory may use only those metrics; the
// check of their queries (deploy/check, its own Go module, run by
// scripts/deploy-check.sh) reads the list from that file.
package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

var update = flag.Bool("update", false, "rewrite deploy/metrics.txt from what the daemon exports")

// metricsFile lists, one per line, `name type [on-error]`: the metric
// families the daemon exports, as Prometheus names them.
const metricsFile = "metrics.txt"

// onError are the counters that appear on /metrics only once their first
// error has been counted (an OpenTelemetry counter is exported from its
// first measurement on), so a healthy run cannot show them. Each is proved
// by its instrument's declaration in core instead (see declaredCounter).
var onError = []string{
	"kmirror_acl_sync_error_total",
	"kmirror_consumer_group_offset_sync_error_total",
	"kmirror_metadata_refresh_error_total",
	"kmirror_share_group_offset_sync_error_total",
	"kmirror_topic_config_metadata_sync_error_total",
}

// TestMetricsListIsExported runs the kmirror binary on two kfake clusters
// with a mirror that mirrors records, syncs groups and ACLs and is reloaded
// once (and one admin API call), scrapes /metrics, and checks that every family in metrics.txt is
// among those scraped (or, for the error counters, declared in core).
// With -update it rewrites metrics.txt instead.
func TestMetricsListIsExported(t *testing.T) {
	t.Parallel()
	scraped := scrapeRunningDaemon(t)

	if *update {
		var b strings.Builder
		b.WriteString("# Metric families the kmirror daemon exports (name, type), checked by\n" +
			"# deploy/metrics_test.go; regenerate with `go test ./deploy -update`.\n" +
			"# on-error: a counter that appears from its first error on.\n")
		names := make([]string, 0, len(scraped)+len(onError))
		for n := range scraped {
			names = append(names, n)
		}
		for _, n := range onError {
			if _, ok := scraped[n]; !ok {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			if typ, ok := scraped[n]; ok {
				fmt.Fprintf(&b, "%s %s\n", n, typ)
			} else {
				fmt.Fprintf(&b, "%s counter on-error\n", n)
			}
		}
		if err := os.WriteFile(metricsFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}

	listed := readMetricsFile(t)
	for _, m := range listed {
		if m.onError {
			if !slices.Contains(onError, m.name) {
				t.Errorf("%s: %s is marked on-error but is not one of the counters this test knows to appear only on errors", metricsFile, m.name)
			} else if err := declaredCounter(m.name); err != nil {
				t.Error(err)
			}
			continue
		}
		typ, ok := scraped[m.name]
		switch {
		case !ok:
			t.Errorf("%s lists %s, which the daemon did not export; fix the list (go test ./deploy -update) and every dashboard panel or rule that uses it", metricsFile, m.name)
		case typ != m.typ:
			t.Errorf("%s lists %s as a %s; the daemon exports a %s", metricsFile, m.name, m.typ, typ)
		}
	}
	// Families the list lacks are not an error (a dashboard need not use
	// every metric), but a stale list hides new metrics from the check.
	for n := range scraped {
		if strings.HasPrefix(n, "kmirror_") && !slices.ContainsFunc(listed, func(m listedMetric) bool { return m.name == n }) {
			t.Logf("%s does not list %s (exported); run go test ./deploy -update to add it", metricsFile, n)
		}
	}
}

type listedMetric struct {
	name, typ string
	onError   bool
}

func readMetricsFile(t *testing.T) []listedMetric {
	t.Helper()
	b, err := os.ReadFile(metricsFile)
	if err != nil {
		t.Fatal(err)
	}
	var out []listedMetric
	for i, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 3 || (len(f) == 3 && f[2] != "on-error") {
			t.Fatalf("%s:%d: want `name type [on-error]`, got %q", metricsFile, i+1, line)
		}
		out = append(out, listedMetric{name: f[0], typ: f[1], onError: len(f) == 3})
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no metric", metricsFile)
	}
	return out
}

// declaredCounter reports an error unless core declares the OpenTelemetry
// counter that the Prometheus exporter names name: kmirror_a_b_total is
// the counter "a.b" of the kmirror namespace.
func declaredCounter(name string) error {
	inst := strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(name, "kmirror_"), "_total"), "_", ".")
	want := fmt.Sprintf("Int64Counter(%q", inst)
	found := false
	err := filepath.WalkDir(filepath.Join("..", "core"), func(p string, d os.DirEntry, err error) error {
		if err != nil || found || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(want)) {
			found = true
		}
		return err
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%s lists %s as an on-error counter, but no core package declares %s", metricsFile, name, want)
	}
	return nil
}

// scrapeRunningDaemon builds kmirror, runs it against two kfake clusters
// until a mirror has mirrored records, synced a consumer group and ACLs and
// been reloaded once, and returns the metric families of one scrape of
// /metrics (name → type).
func scrapeRunningDaemon(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "kmirror")
	build := exec.Command("go", "build", "-o", bin, "./cmd/kmirror")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kmirror: %v\n%s", err, out)
	}

	src, dst := kfaketest.NewCluster(t), kfaketest.NewCluster(t)
	srcCl := kfaketest.NewClient(t, src)
	kfaketest.CreateTopic(t, srcCl, "orders", 2, nil)
	ctx := kfaketest.Context(t)
	for i := range 50 {
		r := &kgo.Record{Topic: "orders", Partition: int32(i % 2), Value: []byte(fmt.Sprintf("order %d", i))}
		if err := srcCl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("producing to the source: %v", err)
		}
	}
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 10, LeaderEpoch: -1})
	if resp, err := kadm.NewClient(srcCl).CommitOffsets(ctx, "billing", offsets); err != nil || resp.Error() != nil {
		t.Fatalf("committing the source group's offsets: %v %v", err, resp.Error())
	}

	cfg := fmt.Sprintf(`log.format: json
http.address: 127.0.0.1:0
admin.address: 127.0.0.1:0
mirror.metadata.refresh.interval.ms: 1000
destination:
  bootstrap.servers: %s
state:
  dir: %s
mirrors:
  - name: m1
    bootstrap.servers: %s
    mirror.topics.include: orders
    mirror.groups.include: ".*"
    mirror.acl.include: "*"
`, strings.Join(dst.ListenAddrs(), ","), filepath.Join(dir, "state"), strings.Join(src.ListenAddrs(), ","))
	cfgPath := filepath.Join(dir, "kmirror.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	d := startDaemon(t, bin, cfgPath)
	addr, _ := d.waitLog(t, "HTTP listener started")["address"].(string)
	if addr == "" {
		t.Fatalf("the HTTP listener's address is not logged:\n%s", d.log())
	}
	d.waitLog(t, "kmirror started")
	// One admin API call (refused: no token), for its request metrics.
	adminURL, _ := d.waitLog(t, "admin API listening")["address"].(string)
	resp, err := http.Get(adminURL + "/v1/mirrors")
	if err != nil {
		t.Fatalf("calling the admin API: %v", err)
	}
	resp.Body.Close()
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitLog(t, "configuration reloaded")

	var families map[string]string
	var samples string
	kfaketest.WaitFor(t, "a scrape showing records mirrored, a group synced and ACLs synced", func() (bool, string) {
		families, samples = scrape(t, "http://"+addr+"/metrics")
		done := mirroredAll.MatchString(samples) && groupSynced.MatchString(samples) && families["kmirror_acls_synced"] != ""
		return done, samples
	})
	return families
}

var (
	mirroredAll = regexp.MustCompile(`(?m)^kmirror_mirrored_offsets_total\{[^}]*mirror="m1"[^}]*\} 50$`)
	groupSynced = regexp.MustCompile(`(?m)^kmirror_group_offset_sync_groups\{[^}]*kind="consumer"[^}]*\} 1$`)
)

// scrape returns the families (name → type) and the text of one scrape.
func scrape(t *testing.T, url string) (map[string]string, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %d %v", url, resp.StatusCode, err)
	}
	families := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			families[f[2]] = f[3]
		}
	}
	return families, string(b)
}

// daemon is a running kmirror process and the JSON lines of its log.
type daemon struct {
	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	raw    strings.Builder
	lines  []map[string]any
}

func startDaemon(t *testing.T, bin, cfgPath string) *daemon {
	t.Helper()
	cmd := exec.Command(bin, "run", "--config", cfgPath)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // owned by the test: ends when the process closes stderr, waited for in Cleanup.
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			d.mu.Lock()
			d.raw.WriteString(sc.Text() + "\n")
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				d.lines = append(d.lines, m)
			}
			d.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-d.exited
	})
	return d
}

// waitLog waits for a log line whose message contains msg and returns it.
func (d *daemon) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	var line map[string]any
	kfaketest.WaitFor(t, fmt.Sprintf("log line %q", msg), func() (bool, string) {
		d.mu.Lock()
		for _, l := range d.lines {
			if m, _ := l["@message"].(string); strings.Contains(m, msg) {
				line = l
				break
			}
		}
		d.mu.Unlock()
		if line != nil {
			return true, ""
		}
		select {
		case <-d.exited:
			t.Fatalf("kmirror exited before logging %q:\n%s", msg, d.log())
		default:
		}
		return false, "log:\n" + d.log()
	})
	return line
}

func (d *daemon) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.raw.String()
}
