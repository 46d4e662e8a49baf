package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A stat line whose command name holds spaces and parentheses still yields
// the right ppid and CPU time (utime 1234 + stime 566 ticks = 18 s).
func TestParseStatCountsFieldsFromTheLastParenthesis(t *testing.T) {
	line := "4242 (java (mm2) x) S 4200 4242 4200 0 -1 4194560 1000 0 0 0 1234 566 0 0 20 0 50 0 12345 1000000 2000 18446744073709551615\n"
	st, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != 4242 || st.PPID != 4200 {
		t.Errorf("pid %d ppid %d, want 4242 4200", st.PID, st.PPID)
	}
	if want := 18 * time.Second; st.CPU != want {
		t.Errorf("CPU %s, want %s", st.CPU, want)
	}
}

func TestParseStatRejectsTruncatedLines(t *testing.T) {
	for _, line := range []string{"", "12 (x", "12 (x) S 1 2 3", "x (y) S 1 2 3 4 5 6 7 8 9 10 11 12 13"} {
		if _, err := parseStat([]byte(line)); err == nil {
			t.Errorf("parseStat(%q) accepted a malformed line", line)
		}
	}
}

func TestParseStatusReadsKiBLines(t *testing.T) {
	status := "Name:\tkmirror\nVmPeak:\t  900000 kB\nVmHWM:\t  123456 kB\nVmRSS:\t  100000 kB\n"
	got, err := parseStatusKiB([]byte(status), "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(123456) << 10; got != want {
		t.Errorf("VmHWM = %d bytes, want %d", got, want)
	}
	if _, err := parseStatusKiB([]byte(status), "VmSwap"); err == nil {
		t.Error("a missing line was not reported")
	}
	if _, err := parseStatusKiB([]byte("VmHWM: 12 MB\n"), "VmHWM"); err == nil {
		t.Error("a line in another unit was accepted")
	}
}

// fakeProc writes a /proc-like tree: pid → (ppid, cpu ticks, VmHWM kB).
func fakeProc(t *testing.T, root string, procs map[int][3]int) {
	t.Helper()
	for pid, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := strconv.Itoa(pid) + " (p) S " + strconv.Itoa(p[0]) + " 0 0 0 -1 0 0 0 0 0 " + strconv.Itoa(p[1]) + " 0 0 0 20 0 1 0 0 0 0\n"
		status := "Name:\tp\nVmHWM:\t" + strconv.Itoa(p[2]) + " kB\n"
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Entries that are not processes are ignored.
	if err := os.WriteFile(filepath.Join(root, "meminfo"), []byte("MemTotal: 1 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The sampler sums CPU and peak RSS over a process and its descendants
// (kmirror's plugins are child processes), not over unrelated processes,
// and keeps the figures of a child that has exited.
func TestTreeSamplerSumsTheProcessTreeAndRemembersExitedChildren(t *testing.T) {
	root := t.TempDir()
	fakeProc(t, root, map[int][3]int{
		100: {1, 500, 1000},  // the mirror: 5 s, 1000 kB
		101: {100, 100, 200}, // its plugin: 1 s
		102: {101, 50, 100},  // a grandchild: 0.5 s
		200: {1, 9999, 9999}, // someone else
	})
	s := NewTreeSampler(100)
	s.root = root
	s.Sample()
	cpu, rss := s.Totals()
	if want := 6500 * time.Millisecond; cpu != want {
		t.Errorf("tree CPU %s, want %s", cpu, want)
	}
	if want := int64(1300) << 10; rss != want {
		t.Errorf("tree peak RSS %d, want %d", rss, want)
	}
	if err := os.RemoveAll(filepath.Join(root, "102")); err != nil {
		t.Fatal(err)
	}
	fakeProc(t, root, map[int][3]int{100: {1, 700, 1500}})
	s.Sample()
	cpu, rss = s.Totals()
	if want := 8500 * time.Millisecond; cpu != want {
		t.Errorf("after the grandchild exited: tree CPU %s, want %s", cpu, want)
	}
	if want := int64(1800) << 10; rss != want {
		t.Errorf("after the grandchild exited: tree peak RSS %d, want %d", rss, want)
	}
}

// The real /proc works too: this process has a stat line and a VmHWM.
func TestReadProcOfThisProcess(t *testing.T) {
	st, err := readStat("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.PPID != os.Getppid() {
		t.Errorf("stat of self: pid %d ppid %d, want %d %d", st.PID, st.PPID, os.Getpid(), os.Getppid())
	}
	hwm, err := readHWM("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if hwm <= 0 {
		t.Errorf("VmHWM of self is %d", hwm)
	}
}

func TestWaitQuietWaitsWhileAProcessIsBusy(t *testing.T) {
	ctx := t.Context()
	// Two spinners and a threshold of 1% of a core: on a machine loaded by
	// other tests (load 15 on 2 cores was seen) a spinner may get a small
	// share of a core, never none.
	var stop atomic.Bool
	var spinners sync.WaitGroup
	for range 2 {
		spinners.Go(func() { // owned by this test: spins until stop is set
			for n := 0; !stop.Load(); n++ {
			}
		})
	}
	waited, quiet := WaitQuiet(ctx, []int{os.Getpid()}, []int{os.Getpid()}, 0.01, time.Second, 2500*time.Millisecond)
	stop.Store(true)
	spinners.Wait()
	if quiet {
		t.Fatalf("a process spinning a core was judged quiet after %s", waited)
	}
	if waited < 2500*time.Millisecond {
		t.Fatalf("gave up after %s, before the 2.5 s bound", waited)
	}
	waited, quiet = WaitQuiet(ctx, []int{os.Getpid()}, []int{os.Getpid()}, 0.05, time.Second, 30*time.Second)
	if !quiet {
		t.Fatalf("an idle process was not judged quiet within %s", waited)
	}
	if waited < time.Second {
		t.Fatalf("judged quiet after %s, before the 1 s span", waited)
	}
}

func TestOpenFilesLimitAndDrained(t *testing.T) {
	if n := openFilesLimit(os.Getpid()); n <= 0 {
		t.Fatalf("open files limit of this process: %d", n)
	}
	if !drained(os.Getpid()) {
		t.Fatalf("a test process holding a few files is not drained (limit %d)", openFilesLimit(os.Getpid()))
	}
	if !drained(-1) {
		t.Fatal("an unknown process must not hold the bench up")
	}
}
