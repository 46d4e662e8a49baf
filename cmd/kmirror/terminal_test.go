package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/admin/admintest"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// onTerminal runs kmirror args on a terminal (script(1) gives it a pty)
// and returns the terminal's output (stdout and stderr, as seen), stdin to
// type into, and a function that waits for the exit code.
func onTerminal(t *testing.T, args ...string) (screen *lockedBuffer, typeIn io.WriteCloser, wait func() int) {
	t.Helper()
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) is not installed")
	}
	cmd := exec.Command(scriptBin, "-q", "-e", "-c", binary+" "+strings.Join(args, " "), "/dev/null")
	screen = &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = screen, screen
	typeIn, err = cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		err := cmd.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
			done <- 0
		case errors.As(err, &exit):
			done <- exit.ExitCode()
		default:
			done <- -1
		}
	}()
	t.Cleanup(func() {
		_ = typeIn.Close()
		_ = cmd.Process.Kill()
	})
	return screen, typeIn, func() int {
		select {
		case code := <-done:
			return code
		case <-time.After(30 * time.Second):
			t.Fatalf("kmirror %v did not end; the terminal shows:\n%s", args, screen.String())
			return -1
		}
	}
}

// waitForScreen waits until the terminal shows want.
func waitForScreen(t *testing.T, screen *lockedBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(screen.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q:\n%s", want, screen.String())
		}
		time.Sleep(20 * time.Millisecond) // polling the screen, not synchronising
	}
}

// setLag sets the lag of dc1's orders/1 (PAUSED in startAdmin's status);
// 0 makes it MIRRORING, caught up.
func setLag(d *adminDaemon, lag int64) {
	d.ctl.Update(func(c *admintest.Controller) {
		p := &c.StatusValue.Mirrors[0].Partitions[1]
		p.Lag = lag
		if lag == 0 {
			p.State = "MIRRORING"
		}
	})
}

// TestFailoverOnATerminalConfirmsThenShowsTheCatchUp: on a terminal,
// failover shows the plan and asks "Proceed? [y/N]"; after y it shows the
// lag per topic falling, with an ETA, redrawn in place, and fails over once
// caught up.
func TestFailoverOnATerminalConfirmsThenShowsTheCatchUp(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	setLag(d, 300)
	screen, typeIn, wait := onTerminal(t, "failover", "dc1", "--topics", "orders", "--wait-for-catch-up", "1m", "--config", d.cfgPath)
	waitForScreen(t, screen, "Proceed? [y/N]")
	if !strings.Contains(screen.String(), "failover of mirror dc1 would act on") {
		t.Fatalf("no plan before the question:\n%s", screen.String())
	}
	if calls := d.ctl.Calls(); len(calls) != 1 || !calls[0].DryRun {
		t.Fatalf("before the answer the daemon got %+v; want only the plan", calls)
	}
	if _, err := io.WriteString(typeIn, "y\n"); err != nil {
		t.Fatal(err)
	}
	waitForScreen(t, screen, "Waiting for mirror dc1 to catch up")
	waitForScreen(t, screen, "total lag 300, ETA ?")
	setLag(d, 100) // falling: 200 in about a second
	waitForScreen(t, screen, "total lag 100, ETA ")
	setLag(d, 0)
	if code := wait(); code != exitOK {
		t.Fatalf("exit %d\n%s", code, screen.String())
	}
	out := screen.String()
	for _, want := range []string{`\x1b\[\d+A`, `orders\s+1/2\s+100\s+100\s`, `mirror dc1 caught up; failing over\.`, `mirror dc1 failed over`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the terminal does not show %s:\n%q", want, out)
		}
	}
	if strings.Contains(out, "total lag 100, ETA ?") {
		t.Errorf("no ETA while the lag falls:\n%s", out)
	}
	calls := d.ctl.Calls()
	if len(calls) != 2 || calls[1].Op != "failover" || calls[1].DryRun {
		t.Fatalf("the daemon got %+v", calls)
	}
}

// TestFailoverOnATerminalNoOrCtrlCChangesNothing: answering anything but y
// ends with nothing done (exit 1); Ctrl-C while waiting for the catch-up
// ends with exit 130 and says that nothing was changed.
func TestFailoverOnATerminalNoOrCtrlCChangesNothing(t *testing.T) {
	t.Parallel()
	d := startAdmin(t, "")
	screen, typeIn, wait := onTerminal(t, "failback", "dc1", "--allow-recreate", "--config", d.cfgPath)
	waitForScreen(t, screen, "Proceed? [y/N]")
	_, _ = io.WriteString(typeIn, "\n")
	if code := wait(); code != exitFailure || !strings.Contains(screen.String(), "not confirmed: nothing was changed") {
		t.Fatalf("answer N: exit %d\n%s", code, screen.String())
	}

	setLag(d, 300)
	screen, typeIn, wait = onTerminal(t, "failover", "dc1", "--yes", "--wait-for-catch-up", "1m", "--config", d.cfgPath)
	waitForScreen(t, screen, "Waiting for mirror dc1 to catch up")
	_, _ = io.WriteString(typeIn, "\x03") // the terminal's interrupt character: SIGINT
	if code := wait(); code != 130 || !strings.Contains(screen.String(), "interrupted while waiting for mirror dc1 to catch up: nothing was changed") {
		t.Fatalf("Ctrl-C: exit %d\n%s", code, screen.String())
	}
	for _, c := range d.ctl.Calls() {
		if !c.DryRun {
			t.Fatalf("the daemon got %+v", c)
		}
	}
}

// TestFailoverOnATerminalAgainstARunningDaemon: `kmirror run` mirrors two
// in-process clusters; the mirror is paused while records arrive, so a
// planned failover on a terminal shows the plan, asks, then shows the lag
// while it waits; a resume (from another command) lets the lag fall to zero
// and the failover completes.
func TestFailoverOnATerminalAgainstARunningDaemon(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.NewCluster(t), kfaketest.NewCluster(t)
	cl := kfaketest.NewClient(t, src, kgo.DefaultProduceTopic("orders"))
	ctx := context.Background()
	kfaketest.CreateTopic(t, cl, "orders", 2, nil)
	produce := func(n int) {
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(10)
	cfgPath := writeFile(t, "kmirror.yaml", fmt.Sprintf(`log.format: json
http.address: 127.0.0.1:0
admin.address: 127.0.0.1:0
mirror.metadata.refresh.interval.ms: 300
shutdown.timeout.ms: 10000
destination:
  bootstrap.servers: %s
state:
  dir: %s
mirrors:
  - name: term
    bootstrap.servers: %s
    mirror.topics.include: orders
`, strings.Join(dst.ListenAddrs(), ","), t.TempDir(), strings.Join(src.ListenAddrs(), ",")))
	d := startRun(t, cfgPath)
	addr, _ := d.waitLog(t, "admin API listening")["address"].(string)
	cli := func(args ...string) (int, string, string) {
		return kmirror(t, nil, append(args, "--config", cfgPath, "--admin-address", addr)...)
	}
	// lag sums the partitions' lag (-1 while any is unknown) and says
	// whether all are paused and how many records reached the destination.
	lag := func() (int64, bool, int64) {
		code, out, _ := cli("mirrors", "describe", "term", "-o", "json")
		var desc struct {
			Partitions []admin.PartitionStatus `json:"partitions"`
		}
		if code != exitOK || json.Unmarshal([]byte(out), &desc) != nil || len(desc.Partitions) != 2 {
			return -1, false, -1
		}
		var sum, copied int64
		paused := true
		for _, p := range desc.Partitions {
			if p.Lag < 0 || p.DestinationEndOffset < 0 {
				return -1, false, -1
			}
			sum += p.Lag
			copied += p.DestinationEndOffset
			paused = paused && p.State == "PAUSED"
		}
		return sum, paused, copied
	}
	// Lag 0 alone is not enough: it is 0 before the fetcher has seen the
	// source's end, so wait until the first 10 records are on the
	// destination.
	kfaketest.WaitFor(t, "the mirror running", func() (bool, string) {
		n, _, copied := lag()
		return n == 0 && copied == 10, fmt.Sprintf("lag %d, copied %d\n%s", n, copied, tail(d.log(), 20))
	})
	if code, _, errOut := cli("mirrors", "pause", "term"); code != exitOK {
		t.Fatalf("pause: exit %d\n%s", code, errOut)
	}
	produce(100)
	kfaketest.WaitFor(t, "lag on the paused mirror", func() (bool, string) {
		n, paused, _ := lag()
		return paused && n == 100, fmt.Sprintf("lag %d, paused %v", n, paused)
	})

	screen, typeIn, wait := onTerminal(t, "failover", "term", "--wait-for-catch-up", "1m", "--config", cfgPath, "--admin-address", addr)
	waitForScreen(t, screen, "Proceed? [y/N]")
	if !regexp.MustCompile(`orders\s+1\s+PAUSED\s+\d+\s+\d+\s+stop`).MatchString(screen.String()) {
		t.Fatalf("the plan does not show the partitions to stop:\n%s", screen.String())
	}
	if _, err := io.WriteString(typeIn, "y\n"); err != nil {
		t.Fatal(err)
	}
	waitForScreen(t, screen, "total lag 100, ETA ?")
	if code, _, errOut := cli("mirrors", "resume", "term"); code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, errOut)
	}
	if code := wait(); code != exitOK {
		t.Fatalf("failover: exit %d\n%s\n%s", code, screen.String(), tail(d.log(), 30))
	}
	for _, want := range []string{"orders  ", "mirror term caught up; failing over.", "mirror term failed over: 1 topic(s), 2 partition(s) STOPPED"} {
		if !strings.Contains(screen.String(), want) {
			t.Errorf("the terminal does not show %q:\n%s", want, screen.String())
		}
	}
}
