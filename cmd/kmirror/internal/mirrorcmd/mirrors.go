// Package mirrorcmd holds the commands that show and act on a running
// daemon's mirrors through its admin API: `kmirror describe`, `kmirror
// mirrors` (list, describe, pause, resume, stop, start, reset, create, delete),
// `failover` and `failback`. They need only the admin API's address and
// token, or the daemon's configuration, of which they read the admin keys.
package mirrorcmd

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/adminclient"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/admin"
)

// Client-side deadlines. The daemon bounds each operation itself
// (admin.DefaultOpTimeout, plus the wait for catch-up of a failover) and
// answers 504 when it runs out; the client waits a little longer so that it
// hears that answer.
const (
	readTimeout = 30 * time.Second
	opTimeout   = admin.DefaultOpTimeout + 30*time.Second
)

// partitionStates is the display order of partition states.
var partitionStates = []string{"PREPARING", "MIRRORING", "PAUSED", "STOPPING", "STOPPED", "FAILED"}

// AdminGroup is the help group (cobra.Group ID) of the commands that talk
// to the admin API; the root command defines it.
const AdminGroup = "admin"

// Commands returns the top-level commands of this package: describe,
// mirrors, failover and failback.
func Commands() []*cobra.Command {
	cmds := []*cobra.Command{newDescribe("describe [MIRROR]", true), newMirrors(), newFailover(), newFailback()}
	for _, c := range cmds {
		c.GroupID = AdminGroup
	}
	return cmds
}

// adminCmd is what every admin command has: the flags that locate and
// authenticate to the admin API, -o, and --mirror (the flag of earlier
// versions; the mirror is now the positional argument).
type adminCmd struct {
	af     adminclient.Flags
	out    cli.Output
	mirror string
}

// register adds the admin flags to cmd; withMirror adds --mirror, hidden.
func (a *adminCmd) register(cmd *cobra.Command, withMirror bool) {
	a.af.Register(cmd.Flags())
	a.out.Register(cmd.Flags())
	if withMirror {
		cmd.Flags().StringVar(&a.mirror, "mirror", "", "the mirror (same as the MIRROR argument)")
		_ = cmd.Flags().MarkHidden("mirror")
	}
}

// connect locates the admin API and reads its credentials.
func (a *adminCmd) connect(cmd *cobra.Command) (*adminclient.Client, error) {
	return a.af.Connect(cmd.InOrStdin())
}

// adminNote ends the long help of every admin command.
const adminNote = `

It talks to a running daemon's admin API: give --admin-address and the token
(--admin-token-file, or $KMIRROR_ADMIN_TOKEN), or the daemon's configuration
(--config, or $KMIRROR_CONFIG), of which only the admin keys are read.`

func newMirrors() *cobra.Command {
	cmd := cli.Group(&cobra.Command{
		Use:   "mirrors",
		Short: "List, describe, pause, resume, stop, start, reset, create and delete mirrors (admin API)",
		Long:  "The mirrors of a running daemon, through its admin API." + adminNote,
		Example: cli.Examples(
			"kmirror mirrors list --admin-address 127.0.0.1:9645 --admin-token-file /var/lib/kmirror/admin.token",
			"kmirror mirrors describe dc1-to-dc2 --config kmirror.yaml",
			"kmirror mirrors pause dc1-to-dc2 --topics 'orders.*' --config kmirror.yaml"),
	})
	cmd.AddCommand(newList(), newDescribe("describe [MIRROR]", false),
		newOp("pause"), newOp("resume"), newOp("stop"), newOp("start"), newReset(),
		newCreate(), newDelete())
	return cmd
}

func newList() *cobra.Command {
	var a adminCmd
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the running daemon's mirrors: source, partitions per state, error",
		Long:  "Every mirror of the running daemon: its name, source bootstrap servers, partition counts per state and mirror-level error." + adminNote,
		Example: cli.Examples(
			"kmirror mirrors list --config kmirror.yaml",
			"KMIRROR_ADMIN_TOKEN=$(cat admin.token) kmirror mirrors list --admin-address 127.0.0.1:9645 -o json"),
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect(cmd)
			if err != nil {
				return err
			}
			var list admin.MirrorList
			if err := c.Call(http.MethodGet, "/v1/mirrors", nil, &list, readTimeout); err != nil {
				return fail(err)
			}
			if list.Mirrors == nil {
				list.Mirrors = []admin.MirrorSummary{}
			}
			a.out.Print(cmd.OutOrStdout(), list, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "MIRROR\tSOURCE\tPARTITIONS\tSTATES\tERROR")
				for _, m := range list.Mirrors {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", m.Name, cli.OrDash(strings.Join(m.SourceBootstrap, ",")), m.TotalPartitions, stateCounts(m.Partitions), m.Error)
				}
				_ = tw.Flush()
			})
			return nil
		},
	}
	a.register(cmd, false)
	return cmd
}

// stateCounts renders {"MIRRORING": 3, "FAILED": 1} as "MIRRORING=3 FAILED=1",
// in state machine order.
func stateCounts(counts map[string]int) string {
	var parts []string
	known := map[string]bool{}
	for _, s := range partitionStates {
		known[s] = true
		if n := counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", s, n))
		}
	}
	var other []string
	for s := range counts {
		if !known[s] {
			other = append(other, s)
		}
	}
	sort.Strings(other)
	for _, s := range other {
		parts = append(parts, fmt.Sprintf("%s=%d", s, counts[s]))
	}
	return cli.OrDash(strings.Join(parts, " "))
}

// newDescribe is `kmirror describe` (top is true) and `kmirror mirrors
// describe`: the same command, through the admin API.
func newDescribe(use string, top bool) *cobra.Command {
	var a adminCmd
	var failed bool
	path := "kmirror mirrors describe"
	if top {
		path = "kmirror describe"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: "Show every mirrored partition: state, mode, offsets, lag, last error (admin API)",
		Long: `Every partition of every mirror of the running daemon, or of MIRROR: MIRROR,
TOPIC, PARTITION, STATE, MODE, SOURCE-OFFSET (source high watermark),
SOURCE-LOG-START, DESTINATION-OFFSET, LAG, LAST-MIRRORED, ERROR; then note:
lines (why a partition runs in map mode, who holds the sync lease, a
destination without an authorizer). --failed lists FAILED partitions with
their retry state. ` + "`kmirror describe` and `kmirror mirrors describe`" + `
are the same command.

The daemon's unauthenticated status endpoint (GET /v1/describe on
http.address, served with http.status.enable: true) is for probes and
dashboards; this command uses the admin API.` + adminNote,
		Example: cli.Examples(
			path+" --config kmirror.yaml",
			path+" dc1-to-dc2 --failed --config kmirror.yaml",
			path+" dc1-to-dc2 -o yaml --admin-address 127.0.0.1:9645 --admin-token-file admin.token"),
		Args: cli.MaxArgs(1, "MIRROR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			only, err := cli.MirrorArg(args, a.mirror, false)
			if err != nil {
				return err
			}
			c, err := a.connect(cmd)
			if err != nil {
				return err
			}
			names := []string{only}
			if only == "" {
				var list admin.MirrorList
				if err := c.Call(http.MethodGet, "/v1/mirrors", nil, &list, readTimeout); err != nil {
					return fail(err)
				}
				names = names[:0]
				for _, m := range list.Mirrors {
					names = append(names, m.Name)
				}
			}
			var mirrors []admin.MirrorStatus
			for _, name := range names {
				var ms admin.MirrorStatus
				err := c.Call(http.MethodGet, "/v1/mirrors/"+url.PathEscape(name), nil, &ms, readTimeout)
				var ae *adminclient.Error
				if only == "" && errors.As(err, &ae) && ae.Status == http.StatusNotFound {
					continue // configured, not (yet) run by the engine
				}
				if err != nil {
					return fail(err)
				}
				mirrors = append(mirrors, ms)
			}
			printDescribe(cmd.OutOrStdout(), mirrors, failed, &a.out)
			return nil
		},
	}
	a.register(cmd, true)
	cmd.Flags().BoolVar(&failed, "failed", false, "only FAILED partitions, with their retry state and error")
	return cmd
}

func newCreate() *cobra.Command {
	var a adminCmd
	var file string
	cmd := &cobra.Command{
		Use:   "create MIRROR --mirror-config FILE",
		Short: "Create a run-time mirror, kept in the state store",
		Long: `Create a run-time mirror: FILE is YAML with the keys of one entry of the
configuration's mirrors: list (source bootstrap.servers and security keys,
mirror.* keys). It is kept in the state store and survives restarts; secrets
only as files (sasl.password.file, ssl.keystore.location). Repeating the same
create is a no-op; a name in use with other settings is a conflict.` + adminNote,
		Example: cli.Examples("kmirror mirrors create dc3-to-dc2 --mirror-config dc3.yaml --config kmirror.yaml"),
		Args:    cli.MaxArgs(1, "MIRROR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := cli.MirrorArg(args, a.mirror, true)
			if err != nil {
				return err
			}
			if file == "" {
				return cli.Usagef("--mirror-config is required: a YAML FILE with the mirror's settings")
			}
			settings, err := os.ReadFile(file)
			if err != nil {
				return cli.Usagef("reading --mirror-config: %v", err)
			}
			c, err := a.connect(cmd)
			if err != nil {
				return err
			}
			var res admin.OpResult
			if err := c.Call(http.MethodPost, "/v1/mirrors", admin.CreateRequest{Name: name, Config: string(settings)}, &res, opTimeout); err != nil {
				return fail(err)
			}
			printOp(cmd.OutOrStdout(), res, "created", &a.out)
			return nil
		},
	}
	a.register(cmd, true)
	cmd.Flags().StringVar(&file, "mirror-config", "", "YAML `FILE` with the mirror's settings: the keys of one entry of mirrors: (required); secrets only as files")
	return cmd
}

func newDelete() *cobra.Command {
	var a adminCmd
	var safe safety
	cmd := &cobra.Command{
		Use:   "delete MIRROR",
		Short: "Delete a run-time mirror whose partitions are all STOPPED",
		Long: `Delete a run-time mirror (made with create, or a failback mirror) whose
partitions are all STOPPED (stop --topics '.*' or failover first): its state
store records go, its destination topics stay. Mirrors of the configuration
file are removed there. --dry-run shows what would be deleted and changes
nothing.` + adminNote,
		Example: cli.Examples(
			"kmirror mirrors delete dc3-to-dc2 --dry-run --config kmirror.yaml",
			"kmirror mirrors stop dc3-to-dc2 --topics '.*' --config kmirror.yaml",
			"kmirror mirrors delete dc3-to-dc2 --config kmirror.yaml"),
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
			if done, err := safe.planFirst(cmd, &a, false, func() (admin.Plan, error) { return c.PlanDelete(name) }); done || err != nil {
				return err
			}
			var res admin.OpResult
			if err := c.Call(http.MethodDelete, "/v1/mirrors/"+url.PathEscape(name), nil, &res, opTimeout); err != nil {
				return fail(err)
			}
			printOp(cmd.OutOrStdout(), res, "deleted", &a.out)
			return nil
		},
	}
	a.register(cmd, true)
	safe.register(cmd, "the delete", false)
	return cmd
}

// newReset returns `mirrors reset`: forget FAILED partitions so that they
// start again from the source's log start (after their destination topic
// was deleted, or their source topic recreated).
func newReset() *cobra.Command {
	var a adminCmd
	var topics cli.RegexList
	var safe safety
	cmd := &cobra.Command{
		Use:   "reset MIRROR --topics REGEX,...",
		Short: "Forget FAILED partitions so that they are mirrored again from the start",
		Long: cli.Wrap("Reset the FAILED partitions of the topics of MIRROR matching --topics ('.*' for all): their records and offset maps are deleted from the state store, and the mirror starts each again as a new partition, from the source's log start, creating the destination topic if it is missing. Partitions in other states are left alone. Use it after a destination topic was deleted under the mirror, or a source topic was deleted and created again; a destination partition that still holds records makes its partition fail again, so delete the destination topic first when it holds anything. --dry-run shows what it would do; on a terminal it asks first (--yes off a terminal).") +
			"\n\n--topics takes comma-separated regexes (repeatable) that must each match a whole topic name." + adminNote,
		Example: cli.Examples("kmirror mirrors reset dc1-to-dc2 --topics orders --dry-run --config kmirror.yaml",
			"kmirror mirrors reset dc1-to-dc2 --topics orders --yes --config kmirror.yaml"),
		Args: cli.MaxArgs(1, "MIRROR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := cli.MirrorArg(args, a.mirror, true)
			if err != nil {
				return err
			}
			if len(topics) == 0 {
				return cli.Usagef("--topics is required ('.*' for every topic)")
			}
			ask, err := safe.mustAsk(cmd, "reset (it forgets where the partitions stopped)")
			if err != nil {
				return err
			}
			c, err := a.connect(cmd)
			if err != nil {
				return err
			}
			if done, err := safe.planFirst(cmd, &a, ask, func() (admin.Plan, error) { return c.PlanReset(name, topics) }); done || err != nil {
				return err
			}
			var res admin.OpResult
			if err := c.Call(http.MethodPost, "/v1/mirrors/"+url.PathEscape(name)+"/reset", admin.TopicsRequest{Topics: topics}, &res, opTimeout); err != nil {
				return fail(err)
			}
			printOp(cmd.OutOrStdout(), res, "reset done", &a.out)
			return nil
		},
	}
	a.register(cmd, true)
	cmd.Flags().Var(&topics, "topics", "regexes of the topics, comma-separated (repeatable); required")
	safe.register(cmd, "the reset", true)
	return cmd
}

// opHelp is the help of pause, resume, stop and start.
var opHelp = map[string]struct{ short, long, example string }{
	"pause": {"Pause topics: fetching stops, the resume point is kept",
		"Pause the topics of MIRROR matching --topics (default: every topic): fetching stops, the topics stay read-only on the destination, the resume point is kept.",
		"kmirror mirrors pause dc1-to-dc2 --topics 'orders.*' --config kmirror.yaml"},
	"resume": {"Resume paused topics; mirroring continues with no gap",
		"Resume the paused topics of MIRROR matching --topics (default: every topic); mirroring continues with no gap.",
		"kmirror mirrors resume dc1-to-dc2 --config kmirror.yaml"},
	"stop": {"Stop topics: transactions aborted, topics writable on the destination",
		"Stop the topics of MIRROR matching --topics ('.*' for all): open destination transactions are aborted, the last mirrored offset is recorded, the topics become writable on the destination. --dry-run shows per partition what it would do and changes nothing.",
		"kmirror mirrors stop dc1-to-dc2 --topics 'orders,payments' --config kmirror.yaml"},
	"start": {"Start stopped topics again, and retry their FAILED partitions",
		"Start (again) the stopped topics of MIRROR matching --topics and not --exclude, and retry their FAILED partitions at once (not those failed for a recreated source topic). They must be in the mirror's mirror.topics.include/exclude scope; each partition proves its destination against the source before it continues.",
		"kmirror mirrors start dc1-to-dc2 --topics 'orders.*' --exclude orders-tmp --config kmirror.yaml"},
}

// newOp returns the command of pause, resume, stop or start.
func newOp(op string) *cobra.Command {
	var a adminCmd
	var topics, exclude cli.RegexList
	var safe safety
	h := opHelp[op]
	required := op == "stop" || op == "start"
	use := op + " MIRROR [--topics REGEX,...]"
	if required {
		use = op + " MIRROR --topics REGEX,..."
	}
	cmd := &cobra.Command{
		Use:     use,
		Short:   h.short,
		Long:    cli.Wrap(h.long) + "\n\n--topics takes comma-separated regexes (repeatable) that must each match a whole topic name." + adminNote,
		Example: cli.Examples(h.example),
		Args:    cli.MaxArgs(1, "MIRROR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := cli.MirrorArg(args, a.mirror, true)
			if err != nil {
				return err
			}
			if required && len(topics) == 0 {
				return cli.Usagef("--topics is required ('.*' for every topic)")
			}
			c, err := a.connect(cmd)
			if err != nil {
				return err
			}
			if done, err := safe.planFirst(cmd, &a, false, func() (admin.Plan, error) { return c.PlanStop(name, topics) }); done || err != nil {
				return err
			}
			var body any = admin.TopicsRequest{Topics: topics}
			if op == "start" {
				body = admin.StartRequest{Topics: topics, Exclude: exclude}
			}
			var res admin.OpResult
			if err := c.Call(http.MethodPost, "/v1/mirrors/"+url.PathEscape(name)+"/"+op, body, &res, opTimeout); err != nil {
				return fail(err)
			}
			printOp(cmd.OutOrStdout(), res, op+" done", &a.out)
			return nil
		},
	}
	a.register(cmd, true)
	topicsHelp := "regexes of the topics, comma-separated (repeatable); default: every topic of the mirror"
	if required {
		topicsHelp = "regexes of the topics, comma-separated (repeatable); required"
	}
	cmd.Flags().Var(&topics, "topics", topicsHelp)
	if op == "start" {
		cmd.Flags().Var(&exclude, "exclude", "regexes of topics not to start, comma-separated (repeatable)")
	}
	if op == "stop" {
		safe.register(cmd, "the stop", false)
	}
	return cmd
}

// printOp prints an operation's result: its message and the partitions'
// states, or the structured answer.
func printOp(stdout io.Writer, res admin.OpResult, done string, out *cli.Output) {
	if res.Partitions == nil {
		res.Partitions = []admin.PartitionStatus{}
	}
	out.Print(stdout, res, func(w io.Writer) {
		msg := res.Message
		if msg == "" {
			msg = done
		}
		fmt.Fprintf(w, "mirror %s: %s\n", res.Mirror, msg)
		if len(res.Partitions) > 0 {
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTATE\tMODE\tLAG\tLAST-MIRRORED\tERROR")
			for _, p := range res.Partitions {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, p.State, p.Mode, cli.Num(p.Lag), cli.Num(p.LastMirroredOffset), p.LastError)
			}
			_ = tw.Flush()
		}
	})
}
