package mirrorcmd

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/admin"
)

func newFailover() *cobra.Command {
	var a adminCmd
	var topics cli.RegexList
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "failover MIRROR [--topics REGEX,...] [--wait-for-catch-up DURATION]",
		Short: "Fail a mirror's topics over to the destination (admin API)",
		Long: `Fail the topics of MIRROR (default: all) over to the destination: with
--wait-for-catch-up first wait up to that long for zero lag (a planned
failover; nothing happens if it passes); then a last group and ACL sync, and
every partition STOPPING -> STOPPED. Prints each partition's last mirrored
offset and the consumer groups whose offsets were synced; the topics are then
writable on the destination. See docs/design/failover.md.` + adminNote,
		Example: cli.Examples(
			"# planned: wait up to 2 minutes for zero lag first",
			"kmirror failover dc1-to-dc2 --wait-for-catch-up 2m --config kmirror.yaml",
			"# unplanned: the source is gone",
			"kmirror failover dc1-to-dc2 --topics 'orders.*' -o json --config kmirror.yaml"),
		Args: cli.MaxArgs(1, "MIRROR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := cli.MirrorArg(args, a.mirror, true)
			if err != nil {
				return err
			}
			if wait < 0 {
				return cli.Usagef("--wait-for-catch-up %s is negative", wait)
			}
			c, err := a.connect(cmd)
			if err != nil {
				return err
			}
			var res admin.FailoverResult
			body := admin.FailoverRequest{Topics: topics, WaitForCatchUpMs: wait.Milliseconds()}
			if err := c.Call(http.MethodPost, "/v1/mirrors/"+url.PathEscape(name)+"/failover", body, &res, opTimeout+wait); err != nil {
				return cli.Fail(err)
			}
			// Lists are [] in -o json|yaml, never null.
			if res.Topics == nil {
				res.Topics = []admin.TopicFailover{}
			}
			if res.Groups == nil {
				res.Groups = []string{}
			}
			a.out.Print(cmd.OutOrStdout(), res, func(w io.Writer) { printFailover(w, res) })
			return nil
		},
	}
	a.register(cmd, true)
	cmd.Flags().Var(&topics, "topics", "regexes of the topics to fail over, comma-separated (repeatable); default: every topic of the mirror")
	cmd.Flags().DurationVar(&wait, "wait-for-catch-up", 0, "planned failover: first wait up to this `DURATION` (e.g. 2m) until every partition has no lag; the failover does not start if it passes")
	return cmd
}

// printFailover is the text form of a failover's result.
func printFailover(stdout io.Writer, res admin.FailoverResult) {
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
}

func newFailback() *cobra.Command {
	var a adminCmd
	var recreate bool
	var suffix string
	cmd := &cobra.Command{
		Use:   "failback MIRROR [--allow-recreate] [--side-topic-suffix S]",
		Short: "Mirror a failed-over mirror's topics back to its old source (admin API)",
		Long: `After a failover of MIRROR, start the reverse mirror MIRROR-failback
(MIRROR's destination -> MIRROR's source) for its failed-over topics:
partitions continue at the last mirrored offset; records the old source holds
beyond it are copied to <topic>.kmirror-diverged (or <topic>S) on the old
source and the partition is FAILED, unless --allow-recreate recreates the
topic there and mirrors it back from scratch. Exits 1 when a partition is
FAILED (the reverse mirror runs for the others). See docs/design/failover.md.` + adminNote,
		Example: cli.Examples(
			"kmirror failback dc1-to-dc2 --config kmirror.yaml",
			"kmirror failback dc1-to-dc2 --side-topic-suffix .lost -o json --config kmirror.yaml"),
		Args: cli.MaxArgs(1, "MIRROR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := cli.MirrorArg(args, a.mirror, true)
			if err != nil {
				return err
			}
			c, err := a.connect(cmd)
			if err != nil {
				return err
			}
			var res admin.FailbackResult
			body := admin.FailbackRequest{AllowRecreate: recreate, SideTopicSuffix: suffix}
			if err := c.Call(http.MethodPost, "/v1/mirrors/"+url.PathEscape(name)+"/failback", body, &res, opTimeout); err != nil {
				return cli.Fail(err)
			}
			failed := 0
			for _, t := range res.Topics {
				for _, p := range t.Partitions {
					if p.Action == admin.FailbackFailed {
						failed++
					}
				}
			}
			if res.Topics == nil {
				res.Topics = []admin.TopicFailback{}
			}
			a.out.Print(cmd.OutOrStdout(), res, func(w io.Writer) { printFailback(w, res) })
			if failed > 0 {
				return cli.Failf("%d partition(s) FAILED (see the output); nothing of theirs is lost", failed)
			}
			return nil
		},
	}
	a.register(cmd, true)
	cmd.Flags().BoolVar(&recreate, "allow-recreate", false, "delete and recreate, on the old source, a topic whose partitions cannot continue offset for offset (diverged, lost records, or map mode), then mirror it back from scratch")
	cmd.Flags().StringVar(&suffix, "side-topic-suffix", "", "suffix of the side topics that keep the old source's records beyond the last mirrored offset (default .kmirror-diverged)")
	return cmd
}

// printFailback is the text form of a failback's result.
func printFailback(stdout io.Writer, res admin.FailbackResult) {
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
}
