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
	var safe safety
	cmd := &cobra.Command{
		Use:   "failover MIRROR [--topics REGEX,...] [--wait-for-catch-up DURATION]",
		Short: "Fail a mirror's topics over to the destination (admin API)",
		Long: `Fail the topics of MIRROR (default: all) over to the destination: with
--wait-for-catch-up first wait up to that long for zero lag (a planned
failover; nothing happens if it passes); then a last group and ACL sync, and
every partition STOPPING -> STOPPED. Prints each partition's last mirrored
offset and the consumer groups whose offsets were synced; the topics are then
writable on the destination. See docs/design/failover.md.

On a terminal it first shows what it would do per partition and asks
"Proceed? [y/N]"; --yes skips the question, and is required when standard
input is not a terminal (scripts). --dry-run shows the plan and changes
nothing. --wait-for-catch-up shows the lag per topic falling, with an ETA;
Ctrl-C while it waits changes nothing (exit 130).` + adminNote,
		Example: cli.Examples(
			"# see what it would do",
			"kmirror failover dc1-to-dc2 --dry-run --config kmirror.yaml",
			"# planned: wait up to 2 minutes for zero lag first",
			"kmirror failover dc1-to-dc2 --wait-for-catch-up 2m --config kmirror.yaml",
			"# unplanned, from a script: the source is gone",
			"kmirror failover dc1-to-dc2 --topics 'orders.*' --yes -o json --config kmirror.yaml"),
		Args: cli.MaxArgs(1, "MIRROR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := cli.MirrorArg(args, a.mirror, true)
			if err != nil {
				return err
			}
			if wait < 0 {
				return cli.Usagef("--wait-for-catch-up %s is negative", wait)
			}
			ask, err := safe.mustAsk(cmd, "failover")
			if err != nil {
				return err
			}
			c, err := a.connect(cmd)
			if err != nil {
				return err
			}
			if done, err := safe.planFirst(cmd, &a, ask, func() (admin.Plan, error) { return c.PlanFailover(name, topics, wait) }); done || err != nil {
				return err
			}
			serverWait := wait
			if wait > 0 {
				ui := a.uiWriter(cmd)
				left, err := waitForCatchUp(cmd.Context(), c.Lag, name, topics, wait, ui, cli.IsTerminal(ui))
				if err != nil {
					return err
				}
				// Records written since the last poll: the failover's own
				// wait covers them, briefly.
				serverWait = min(max(left, time.Second), maxServerWait)
			}
			res, err := c.Failover(name, topics, serverWait)
			if err != nil {
				return fail(err)
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
	cmd.Flags().DurationVar(&wait, "wait-for-catch-up", 0, "planned failover: first wait up to this `DURATION` (e.g. 2m) until every partition has no lag, showing the lag per topic; the failover does not start if it passes")
	safe.register(cmd, "the failover", true)
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
	var safe safety
	cmd := &cobra.Command{
		Use:   "failback MIRROR [--allow-recreate] [--side-topic-suffix S]",
		Short: "Mirror a failed-over mirror's topics back to its old source (admin API)",
		Long: `After a failover of MIRROR, start the reverse mirror MIRROR-failback
(MIRROR's destination -> MIRROR's source) for its failed-over topics:
partitions continue at the last mirrored offset; records the old source holds
beyond it are copied to <topic>.kmirror-diverged (or <topic>S) on the old
source and the partition is FAILED, unless --allow-recreate recreates the
topic there and mirrors it back from scratch. Exits 1 when a partition is
FAILED (the reverse mirror runs for the others). See docs/design/failover.md.

--dry-run shows per partition what would be decided, and which topics would
be created or deleted on the old source, and changes nothing. With
--allow-recreate, which deletes topics on the old source, it asks on a
terminal "Proceed? [y/N]" after showing that plan; --yes skips the question
and is required when standard input is not a terminal.` + adminNote,
		Example: cli.Examples(
			"kmirror failback dc1-to-dc2 --dry-run --allow-recreate --config kmirror.yaml",
			"kmirror failback dc1-to-dc2 --config kmirror.yaml",
			"kmirror failback dc1-to-dc2 --side-topic-suffix .lost -o json --config kmirror.yaml"),
		Args: cli.MaxArgs(1, "MIRROR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := cli.MirrorArg(args, a.mirror, true)
			if err != nil {
				return err
			}
			ask := false
			if recreate {
				if ask, err = safe.mustAsk(cmd, "failback --allow-recreate (it deletes topics on the old source)"); err != nil {
					return err
				}
			}
			c, err := a.connect(cmd)
			if err != nil {
				return err
			}
			if done, err := safe.planFirst(cmd, &a, ask, func() (admin.Plan, error) { return c.PlanFailback(name, recreate, suffix) }); done || err != nil {
				return err
			}
			var res admin.FailbackResult
			body := admin.FailbackRequest{AllowRecreate: recreate, SideTopicSuffix: suffix}
			if err := c.Call(http.MethodPost, "/v1/mirrors/"+url.PathEscape(name)+"/failback", body, &res, opTimeout); err != nil {
				return fail(err)
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
	safe.register(cmd, "the failback", true)
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
