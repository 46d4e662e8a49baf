package mirrorcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/admin"
)

// Catch-up polling: the lag is read every pollEvery; off a terminal a
// progress line is printed at most every lineEvery; the rate behind the
// ETA is measured over the last rateWindow.
const (
	pollEvery  = time.Second
	lineEvery  = 5 * time.Second
	rateWindow = 10 * time.Second
	// maxServerWait bounds the wait the failover call itself is given once
	// the client saw the mirror caught up: records written since then.
	maxServerWait = 30 * time.Second
)

// lagSource is what waitForCatchUp reads: adminclient.Client.Lag.
type lagSource func(mirror string, topics []string) (admin.LagReport, error)

// lagSample is one poll's lag, per topic and in total.
type lagSample struct {
	at    time.Time
	total int64
	topic map[string]int64
}

// catchUp shows a planned failover's catch-up: the lag per topic falling,
// with an ETA.
type catchUp struct {
	w        io.Writer
	terminal bool // redraw in place; otherwise a line at most every lineEvery
	mirror   string
	samples  []lagSample
	drawn    int       // lines drawn last time (terminal)
	lastLine time.Time // last progress line (not a terminal)
}

// waitForCatchUp polls the lag of mirror's topics every second until they
// are all caught up, and returns the time left of wait. It changes
// nothing: Ctrl-C (or SIGTERM) ends it with ExitInterrupted, and a wait
// that runs out with ExitFailure, both saying that nothing was changed.
func waitForCatchUp(ctx context.Context, lag lagSource, mirror string, topics []string, wait time.Duration, w io.Writer, terminal bool) (time.Duration, error) {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop() // Ctrl-C during the failover call itself ends the process as usual
	deadline := time.Now().Add(wait)
	c := &catchUp{w: w, terminal: terminal, mirror: mirror}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		rep, err := lag(mirror, topics)
		if err != nil {
			return 0, fail(err)
		}
		left := time.Until(deadline)
		c.show(rep, left)
		if rep.CaughtUp {
			fmt.Fprintf(w, "mirror %s caught up; failing over.\n", mirror)
			return left, nil
		}
		if left <= 0 {
			return 0, cli.Failf("mirror %s did not catch up within --wait-for-catch-up %s (lag %d): nothing was changed; repeat with a longer wait, or fail over without it (unplanned) to accept the lag", mirror, wait, rep.TotalLag)
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return 0, &cli.Error{Code: cli.ExitInterrupted, Err: fmt.Errorf("interrupted while waiting for mirror %s to catch up: nothing was changed (no partition was stopped, the mirror keeps running)", mirror)}
		case <-tick.C:
		}
	}
}

// show records rep and draws the progress.
func (c *catchUp) show(rep admin.LagReport, left time.Duration) {
	now := time.Now()
	s := lagSample{at: now, total: rep.TotalLag, topic: map[string]int64{}}
	for _, t := range rep.Topics {
		s.topic[t.Topic] = t.Lag
	}
	c.samples = append(c.samples, s)
	for len(c.samples) > 2 && now.Sub(c.samples[1].at) >= rateWindow {
		c.samples = c.samples[1:]
	}
	first := c.samples[0]
	left = max(left, 0).Truncate(time.Second)
	if !c.terminal {
		if !c.lastLine.IsZero() && now.Sub(c.lastLine) < lineEvery && !rep.CaughtUp {
			return
		}
		c.lastLine = now
		var per []string
		for _, t := range rep.Topics {
			per = append(per, fmt.Sprintf("%s %d", t.Topic, t.Lag))
		}
		fmt.Fprintf(c.w, "waiting for mirror %s to catch up: lag %d (%s), ETA %s, %s left of the wait\n",
			c.mirror, rep.TotalLag, strings.Join(per, ", "), eta(first.total, s.total, now.Sub(first.at)), left)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Waiting for mirror %s to catch up (%s left; Ctrl-C stops waiting and changes nothing)\n", c.mirror, left)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tCAUGHT-UP\tLAG\tMAX-LAG\tETA")
	topics := append([]admin.TopicLag(nil), rep.Topics...)
	sort.Slice(topics, func(i, j int) bool { return topics[i].Topic < topics[j].Topic })
	for _, t := range topics {
		was, ok := first.topic[t.Topic]
		if !ok {
			was = t.Lag
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%d\t%s\n", t.Topic, t.CaughtUp, t.Partitions, t.Lag, t.MaxLag, eta(was, t.Lag, now.Sub(first.at)))
	}
	_ = tw.Flush()
	fmt.Fprintf(&b, "total lag %d, ETA %s\n", rep.TotalLag, eta(first.total, s.total, now.Sub(first.at)))
	if c.drawn > 0 {
		fmt.Fprintf(c.w, "\x1b[%dA\x1b[J", c.drawn) // up over the last drawing, clear to the end
	}
	fmt.Fprint(c.w, b.String())
	c.drawn = strings.Count(b.String(), "\n")
}

// eta is how long a lag that fell from was to now in elapsed takes to
// reach zero at that rate: "0s" at zero, "?" when it does not fall.
func eta(was, now int64, elapsed time.Duration) string {
	if now <= 0 {
		return "0s"
	}
	if was <= now || elapsed <= 0 {
		return "?"
	}
	rate := float64(was-now) / elapsed.Seconds()
	return (time.Duration(float64(now)/rate*float64(time.Second)) + time.Second - 1).Truncate(time.Second).String()
}
