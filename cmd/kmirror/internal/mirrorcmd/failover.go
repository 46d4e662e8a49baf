package mirrorcmd

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/admin"
)

// Failover is `kmirror failover`: a mirror's topics fail over to the
// destination, through the admin API.
func Failover(args []string, stdout, stderr io.Writer) int {
	m := newMirrorCmd("failover", "the mirror to fail over (required)", stderr)
	fs, name, asJSON := m.fs, m.name, m.asJSON
	var topics topicList
	fs.Var(&topics, "topics", "regexes of the topics to fail over, comma-separated (repeatable); default: every topic of the mirror")
	wait := fs.Duration("wait-for-catch-up", 0, "planned failover: first wait up to this long (e.g. 2m) until every partition has no lag; the failover does not start if it passes")
	if code, ok := m.parse(args, stderr, false); !ok {
		return code
	}
	if *wait < 0 {
		fmt.Fprintf(stderr, "kmirror failover: --wait-for-catch-up %s is negative\n", *wait)
		return cli.ExitUsage
	}
	c, code, ok := m.connect(stderr)
	if !ok {
		return code
	}
	var res admin.FailoverResult
	body := admin.FailoverRequest{Topics: topics, WaitForCatchUpMs: wait.Milliseconds()}
	if err := c.Call(http.MethodPost, "/v1/mirrors/"+url.PathEscape(*name)+"/failover", body, &res, opTimeout+*wait); err != nil {
		return fail(stderr, fs, err)
	}
	if *asJSON {
		cli.PrintJSON(stdout, res)
		return cli.ExitOK
	}
	parts := 0
	for _, t := range res.Topics {
		parts += len(t.Partitions)
	}
	fmt.Fprintf(stdout, "mirror %s failed over: %d topic(s), %d partition(s) STOPPED; the topics are writable on the destination.\n", res.Mirror, len(res.Topics), parts)
	if parts > 0 {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tLAST-MIRRORED-OFFSET")
		for _, t := range res.Topics {
			for _, p := range t.Partitions {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", t.Topic, p.Partition, cli.Num(p.LastMirroredOffset))
			}
		}
		_ = tw.Flush()
	}
	groups := "(none)"
	if len(res.Groups) > 0 {
		groups = strings.Join(res.Groups, ", ")
	}
	fmt.Fprintf(stdout, "Consumer groups with synced offsets: %s\n", groups)
	for _, w := range res.Warnings {
		fmt.Fprintf(stdout, "Warning: %s\n", w)
	}
	return cli.ExitOK
}

// Failback is `kmirror failback`: a failed-over mirror's topics are
// mirrored back to its old source, through the admin API.
func Failback(args []string, stdout, stderr io.Writer) int {
	m := newMirrorCmd("failback", "the failed-over mirror to fail back (required); its reverse mirror is <mirror>-failback", stderr)
	fs, name, asJSON := m.fs, m.name, m.asJSON
	recreate := fs.Bool("allow-recreate", false, "delete and recreate, on the old source, a topic whose partitions cannot continue offset for offset (diverged, lost records, or map mode), then mirror it back from scratch")
	suffix := fs.String("side-topic-suffix", "", "suffix of the side topics that keep the old source's records beyond the last mirrored offset (default .kmirror-diverged)")
	if code, ok := m.parse(args, stderr, false); !ok {
		return code
	}
	c, code, ok := m.connect(stderr)
	if !ok {
		return code
	}
	var res admin.FailbackResult
	body := admin.FailbackRequest{AllowRecreate: *recreate, SideTopicSuffix: *suffix}
	if err := c.Call(http.MethodPost, "/v1/mirrors/"+url.PathEscape(*name)+"/failback", body, &res, opTimeout); err != nil {
		return fail(stderr, fs, err)
	}
	if *asJSON {
		cli.PrintJSON(stdout, res)
		return cli.ExitOK
	}
	failed := 0
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(stdout, "mirror %s fails %s back: it copies the new primary's records to the old source.\n", res.Mirror, res.Of)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tACTION\tFROM\tDIVERGED-RECORDS\tSIDE-TOPIC")
	for _, t := range res.Topics {
		for _, p := range t.Partitions {
			side := p.SideTopic
			if side == "" {
				side = "-"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%s\n", t.Topic, p.Partition, p.Action, cli.Num(p.From), p.Diverged, side)
			if p.Action == admin.FailbackFailed {
				failed++
			}
		}
	}
	_ = tw.Flush()
	for _, t := range res.Topics {
		for _, p := range t.Partitions {
			if p.Reason != "" {
				fmt.Fprintf(stdout, "%s/%d: %s\n", t.Topic, p.Partition, p.Reason)
			}
		}
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "failback: %d partition(s) FAILED (see above); nothing of theirs is lost\n", failed)
		return cli.ExitFailure
	}
	return cli.ExitOK
}
