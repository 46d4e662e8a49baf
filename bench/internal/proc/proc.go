// Package proc reads what the bench measures of processes from /proc: the CPU
// time and peak resident set of a process tree (TreeSampler), one process's
// CPU time, the quiet gate that waits for the brokers to idle (WaitQuiet), and
// the description of the machine (DescribeMachine).
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It
// is 100 on every Linux architecture Go supports (the kernel's HZ may differ,
// but /proc reports in USER_HZ).
const clockTicks = 100

// procStat is what the bench reads from /proc/<pid>/stat.
type procStat struct {
	PID, PPID int
	// CPU is utime + stime: CPU time spent by the process's threads
	// (children not included).
	CPU time.Duration
}

// parseStat parses the content of /proc/<pid>/stat. The command name (field
// 2) is in parentheses and may itself hold spaces and parentheses, so the
// fields are counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return procStat{}, errors.New("stat: no command name in parentheses")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return procStat{}, fmt.Errorf("stat: pid: %w", err)
	}
	// After ") ": field 3 (state) is rest[0], so field n is rest[n-3].
	rest := strings.Fields(string(b[closing+1:]))
	if len(rest) < 13 {
		return procStat{}, fmt.Errorf("stat: %d fields after the command name, want at least 13", len(rest))
	}
	ppid, err := strconv.Atoi(rest[1])
	if err != nil {
		return procStat{}, fmt.Errorf("stat: ppid: %w", err)
	}
	utime, err := strconv.ParseUint(rest[14-3], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("stat: utime: %w", err)
	}
	stime, err := strconv.ParseUint(rest[15-3], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("stat: stime: %w", err)
	}
	return procStat{PID: pid, PPID: ppid, CPU: ticks(utime + stime)}, nil
}

func ticks(n uint64) time.Duration { return time.Duration(n) * time.Second / clockTicks }

// parseStatusKiB returns the value of a "Name:   1234 kB" line of
// /proc/<pid>/status (VmHWM, VmRSS) in bytes.
func parseStatusKiB(b []byte, name string) (int64, error) {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		v, ok := bytes.CutPrefix(line, []byte(name+":"))
		if !ok {
			continue
		}
		f := strings.Fields(string(v))
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("status: %s line %q is not \"<n> kB\"", name, line)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("status: %s: %w", name, err)
		}
		return n << 10, nil
	}
	return 0, fmt.Errorf("status: no %s line", name)
}

// readStat reads /proc/<pid>/stat under root (normally "/proc").
func readStat(root string, pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// readHWM reads the peak resident set size (VmHWM) of pid in bytes.
func readHWM(root string, pid int) (int64, error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	return parseStatusKiB(b, "VmHWM")
}

// descendants returns pid and every process below it, from the parent links
// of all processes under root.
func descendants(root string, pid int) []int {
	entries, err := os.ReadDir(root)
	if err != nil {
		return []int{pid}
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(root, p)
		if err != nil {
			continue // exited meanwhile
		}
		children[st.PPID] = append(children[st.PPID], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// TreeSampler follows the CPU time and peak RSS of a process and all its
// descendants (kmirror runs its built-in plugins as child processes). A
// descendant that exits keeps the last figures sampled for it.
type TreeSampler struct {
	root string // "/proc"
	pid  int

	mu   sync.Mutex
	seen map[int]treeSample
}

type treeSample struct {
	cpu time.Duration
	hwm int64
}

// NewTreeSampler returns a sampler of pid's process tree; nothing is read
// before the first Sample.
func NewTreeSampler(pid int) *TreeSampler {
	return &TreeSampler{root: "/proc", pid: pid, seen: map[int]treeSample{}}
}

// Sample reads every process of the tree once.
func (s *TreeSampler) Sample() {
	for _, p := range descendants(s.root, s.pid) {
		st, err := readStat(s.root, p)
		if err != nil {
			continue
		}
		hwm, _ := readHWM(s.root, p)
		s.mu.Lock()
		if prev, ok := s.seen[p]; !ok || st.CPU >= prev.cpu {
			s.seen[p] = treeSample{cpu: st.CPU, hwm: max(hwm, prev.hwm)}
		}
		s.mu.Unlock()
	}
}

// Totals returns the tree's CPU time and the sum of its processes' peak RSS
// (an upper bound of the tree's peak: the peaks need not coincide).
func (s *TreeSampler) Totals() (cpu time.Duration, peakRSS int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.seen {
		cpu += v.cpu
		peakRSS += v.hwm
	}
	return cpu, peakRSS
}

// ProcessCPU returns the CPU time of one process (0 when it is gone).
func ProcessCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	st, err := readStat("/proc", pid)
	if err != nil {
		return 0
	}
	return st.CPU
}

// TreeRSS returns the current resident set (VmRSS) of a process and its
// descendants, in bytes.
func TreeRSS(pid int) int64 {
	var total int64
	for _, p := range descendants("/proc", pid) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "status"))
		if err != nil {
			continue
		}
		if n, err := parseStatusKiB(b, "VmRSS"); err == nil {
			total += n
		}
	}
	return total
}

// The quiet gate before each contender: every broker below QuietCPU of one
// core for QuietFor in a row, waiting at most QuietMax.
const (
	QuietCPU = 0.15
	QuietFor = 2 * time.Second
	QuietMax = 5 * time.Minute
)

// drained says whether pid holds at most a quarter of the open files it may
// (true when it cannot tell). A broker closes a deleted topic's files only
// when it deletes them (file.delete.delay.ms, a minute, after the topic is
// gone from the metadata): with 10,000 partitions per topic and a limit of
// 20,000 files on this machine, the next contender's topic would make the
// broker fail with "Too many open files" and leave partitions without a log.
func drained(pid int) bool {
	if pid <= 0 {
		return true
	}
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		return true
	}
	limit := openFilesLimit(pid)
	return limit <= 0 || len(fds) <= limit/4
}

// openFilesLimit returns pid's soft limit of open files, 0 when unknown.
func openFilesLimit(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "limits"))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return 0
}

// WaitQuiet waits until every process in pids has used less than share of
// one core over each second of a span of d, and every process in drain has
// released its files (drained), or until max has passed or ctx ends. It
// returns how long it waited and whether the processes were quiet.
func WaitQuiet(ctx context.Context, pids, drain []int, share float64, d, max time.Duration) (time.Duration, bool) {
	start := time.Now()
	calm := time.Duration(0)
	last := make([]time.Duration, len(pids))
	for i, pid := range pids {
		last[i] = ProcessCPU(pid)
	}
	for calm < d {
		if time.Since(start) >= max {
			return time.Since(start), false
		}
		t0 := time.Now()
		select {
		case <-ctx.Done():
			return time.Since(start), false
		case <-time.After(time.Second):
		}
		span := time.Since(t0)
		busy := false
		for i, pid := range pids {
			now := ProcessCPU(pid)
			if float64(now-last[i]) > share*float64(span) {
				busy = true
			}
			last[i] = now
		}
		for _, pid := range drain {
			if !drained(pid) {
				busy = true
			}
		}
		if busy {
			calm = 0
		} else {
			calm += span
		}
	}
	return time.Since(start), true
}
