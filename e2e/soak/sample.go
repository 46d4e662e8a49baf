package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Sample is one reading of the daemon under soak.
type Sample struct {
	// At is the time since the soak began.
	At time.Duration
	// Instance numbers the daemon process the sample is of: 1 for the
	// first, incremented at each restart. Since is the time since that
	// process started.
	Instance int
	Since    time.Duration
	PID      int
	// RSS is the resident set of the daemon and its child processes (the
	// built-in state store plugin), in bytes.
	RSS int64
	// Goroutines is the daemon's goroutine count (/debug/pprof/goroutine).
	Goroutines int
	// FDs is the daemon's open file descriptors (/proc/<pid>/fd).
	FDs int
	// Lag is the total lag in offsets over every mirrored partition as
	// kmirror reports it (sum of kmirror_consumer_lag); -1 when the daemon
	// did not answer.
	Lag int64
	// Gap is the soak's own measure of what is not yet on the
	// destination: the sum over every partition of the source's end offset
	// minus the destination's, read through the clusters' plain listeners
	// (no fault touches them); -1 when either could not be read.
	Gap int64
	// Fault names the fault in effect when the sample was taken ("" none).
	Fault string
}

// Complete reports whether every figure of the sample was read.
func (s Sample) Complete() bool { return s.RSS > 0 && s.Goroutines > 0 && s.FDs > 0 && s.Lag >= 0 }

// Reader takes samples of one daemon process: its /proc entries and its
// HTTP endpoints (metrics, and /debug/pprof/ with http.pprof.enable on).
type Reader struct {
	// HTTPAddr is the daemon's http.address (host:port).
	HTTPAddr string
	// Client does the HTTP requests; each needs to be short.
	Client *http.Client
}

// Read fills s's RSS, FDs, Goroutines and Lag for the process pid; what
// cannot be read stays zero (Lag -1).
func (r Reader) Read(ctx context.Context, pid int, s *Sample) {
	s.PID = pid
	s.RSS = treeRSS(pid)
	s.FDs = openFDs(pid)
	s.Goroutines = r.goroutines(ctx)
	s.Lag = r.lag(ctx)
}

func (r Reader) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.HTTPAddr+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// goroutines reads the total of /debug/pprof/goroutine?debug=1, whose
// first line is "goroutine profile: total N".
func (r Reader) goroutines(ctx context.Context) int {
	b, err := r.get(ctx, "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(string(line), "goroutine profile: total")))
	if err != nil {
		return 0
	}
	return n
}

// lag sums kmirror_consumer_lag over every partition series of /metrics
// (metrics.partition.series.enable on); -1 when /metrics does not answer.
func (r Reader) lag(ctx context.Context) int64 {
	b, err := r.get(ctx, "/metrics")
	if err != nil {
		return -1
	}
	return SumMetric(b, "kmirror_consumer_lag")
}

// SumMetric adds up every sample of the metric name in a Prometheus text
// exposition (0 when there is none).
func SumMetric(exposition []byte, name string) int64 {
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(line[strings.LastIndexByte(line, '}')+1:])
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			sum += v
		}
	}
	return int64(sum)
}

// treeRSS is the resident set in bytes of pid and its descendants (0 when
// pid is gone).
func treeRSS(pid int) int64 {
	var sum int64
	for _, p := range descendants(pid) {
		sum += rss(p)
	}
	return sum
}

// descendants returns pid and every process below it.
func descendants(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", out[i]))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// rss reads VmRSS of /proc/<pid>/status in bytes (0 when unreadable).
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// openFDs counts /proc/<pid>/fd (0 when unreadable).
func openFDs(pid int) int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return len(es)
}

// csvHeader names the columns WriteCSV writes.
var csvHeader = []string{"seconds", "instance", "instance_seconds", "pid", "rss_bytes", "goroutines", "open_fds", "lag", "end_offset_gap", "fault"}

// WriteCSV writes the samples with a header line.
func WriteCSV(w io.Writer, samples []Sample) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, s := range samples {
		rec := []string{
			strconv.FormatFloat(s.At.Seconds(), 'f', 1, 64),
			strconv.Itoa(s.Instance),
			strconv.FormatFloat(s.Since.Seconds(), 'f', 1, 64),
			strconv.Itoa(s.PID),
			strconv.FormatInt(s.RSS, 10),
			strconv.Itoa(s.Goroutines),
			strconv.Itoa(s.FDs),
			strconv.FormatInt(s.Lag, 10),
			strconv.FormatInt(s.Gap, 10),
			s.Fault,
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
