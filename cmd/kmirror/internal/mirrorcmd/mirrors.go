// Package mirrorcmd holds the commands that show and act on a running
// daemon's mirrors: `kmirror describe` (the status on http.address) and,
// through the admin API, `kmirror mirrors`, `failover` and `failback`.
package mirrorcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

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

// topicList is a flag holding regexes: comma-separated, repeatable.
type topicList []string

func (l *topicList) String() string { return strings.Join(*l, ",") }
func (l *topicList) Set(v string) error {
	for i, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			return fmt.Errorf("entry %d of %q is empty (remove the extra comma)", i+1, v)
		}
		*l = append(*l, p)
	}
	return nil
}

// Mirrors is `kmirror mirrors <sub-command>`: list, describe, pause,
// resume, stop, start, create and delete, through the admin API.
func Mirrors(args []string, stdout, stderr io.Writer) int {
	return cli.Family{Name: "mirrors", Flags: "--config FILE [flags]", Subs: []cli.Sub{
		{Name: "list", Usage: "list [--json]", Run: mirrorsList},
		{Name: "describe", Usage: "describe [--mirror M] [--json] [--failed]", Run: mirrorsDescribe},
		{Name: "pause", Usage: "pause --mirror M [--topics R,..]", Run: mirrorsOp("pause")},
		{Name: "resume", Usage: "resume --mirror M [--topics R,..]", Run: mirrorsOp("resume")},
		{Name: "stop", Usage: "stop --mirror M --topics R,..", Run: mirrorsOp("stop")},
		{Name: "start", Usage: "start --mirror M --topics R,.. [--exclude R,..]", Run: mirrorsOp("start")},
		{Name: "create", Usage: "create --mirror M --mirror-config FILE", Run: mirrorsCreate},
		{Name: "delete", Usage: "delete --mirror M", Run: mirrorsDelete},
	}}.Run(args, stdout, stderr)
}

func mirrorsList(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("mirrors list", stderr)
	var af adminclient.Flags
	af.Register(fs)
	asJSON := fs.Bool("json", false, "print the admin API's JSON (stable field names, see docs/cli.md)")
	c, code, ok := af.Parse(fs, args, stderr)
	if !ok {
		return code
	}
	var list admin.MirrorList
	if err := c.Call(http.MethodGet, "/v1/mirrors", nil, &list, readTimeout); err != nil {
		return fail(stderr, fs, err)
	}
	if *asJSON {
		cli.PrintJSON(stdout, list)
		return cli.ExitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tSOURCE\tPARTITIONS\tSTATES\tERROR")
	for _, m := range list.Mirrors {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", m.Name, cli.OrDash(strings.Join(m.SourceBootstrap, ",")), m.TotalPartitions, stateCounts(m.Partitions), m.Error)
	}
	_ = tw.Flush()
	return cli.ExitOK
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

func mirrorsDescribe(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("mirrors describe", stderr)
	var af adminclient.Flags
	af.Register(fs)
	only := fs.String("mirror", "", "only this mirror")
	asJSON := fs.Bool("json", false, `print {"mirrors": [...], "partitions": [...]} (stable field names, see docs/cli.md)`)
	failed := fs.Bool("failed", false, "only FAILED partitions, with their retry state and error")
	c, code, ok := af.Parse(fs, args, stderr)
	if !ok {
		return code
	}
	names := []string{*only}
	if *only == "" {
		var list admin.MirrorList
		if err := c.Call(http.MethodGet, "/v1/mirrors", nil, &list, readTimeout); err != nil {
			return fail(stderr, fs, err)
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
		if *only == "" && errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			continue // configured, not (yet) run by the engine
		}
		if err != nil {
			return fail(stderr, fs, err)
		}
		mirrors = append(mirrors, ms)
	}
	printDescribe(stdout, mirrors, *failed, *asJSON)
	return cli.ExitOK
}

func mirrorsCreate(args []string, stdout, stderr io.Writer) int {
	m := newMirrorCmd("mirrors create", "the new mirror's name (required)", stderr)
	fs, name := m.fs, m.name
	file := fs.String("mirror-config", "", "YAML file with the mirror's settings: the keys of one entry of mirrors: (required); secrets only as files (sasl.password.file)")
	if code, ok := m.parse(args, stderr, false); !ok {
		return code
	}
	if *file == "" {
		fmt.Fprintln(stderr, "mirrors create: --mirror-config is required")
		return cli.ExitUsage
	}
	settings, err := os.ReadFile(*file)
	if err != nil {
		fmt.Fprintf(stderr, "mirrors create: reading --mirror-config: %v\n", err)
		return cli.ExitUsage
	}
	c, code, ok := m.connect(stderr)
	if !ok {
		return code
	}
	var res admin.OpResult
	if err := c.Call(http.MethodPost, "/v1/mirrors", admin.CreateRequest{Name: *name, Config: string(settings)}, &res, opTimeout); err != nil {
		return fail(stderr, fs, err)
	}
	return printOp(stdout, res, "created", *m.asJSON)
}

func mirrorsDelete(args []string, stdout, stderr io.Writer) int {
	m := newMirrorCmd("mirrors delete", "the run-time mirror to delete (required); its partitions must be STOPPED", stderr)
	if code, ok := m.parse(args, stderr, false); !ok {
		return code
	}
	c, code, ok := m.connect(stderr)
	if !ok {
		return code
	}
	var res admin.OpResult
	if err := c.Call(http.MethodDelete, "/v1/mirrors/"+url.PathEscape(*m.name), nil, &res, opTimeout); err != nil {
		return fail(stderr, m.fs, err)
	}
	return printOp(stdout, res, "deleted", *m.asJSON)
}

// mirrorsOp returns the command of pause, resume, stop or start.
func mirrorsOp(op string) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		m := newMirrorCmd("mirrors "+op, "the mirror (required)", stderr)
		fs, name := m.fs, m.name
		var topics, exclude topicList
		topicsHelp := "regexes of the topics, comma-separated (repeatable); default: every topic of the mirror"
		if op == "stop" || op == "start" {
			topicsHelp = "regexes of the topics, comma-separated (repeatable); required"
		}
		fs.Var(&topics, "topics", topicsHelp)
		if op == "start" {
			fs.Var(&exclude, "exclude", "regexes of topics not to start, comma-separated (repeatable)")
		}
		if code, ok := m.parse(args, stderr, op == "stop" || op == "start"); !ok {
			return code
		}
		c, code, ok := m.connect(stderr)
		if !ok {
			return code
		}
		var body any = admin.TopicsRequest{Topics: topics}
		if op == "start" {
			body = admin.StartRequest{Topics: topics, Exclude: exclude}
		}
		var res admin.OpResult
		if err := c.Call(http.MethodPost, "/v1/mirrors/"+url.PathEscape(*name)+"/"+op, body, &res, opTimeout); err != nil {
			return fail(stderr, fs, err)
		}
		return printOp(stdout, res, op+" done", *m.asJSON)
	}
}

// printOp prints an operation's result: its message and the partitions'
// states, or the JSON answer.
func printOp(stdout io.Writer, res admin.OpResult, done string, asJSON bool) int {
	if asJSON {
		cli.PrintJSON(stdout, res)
		return cli.ExitOK
	}
	msg := res.Message
	if msg == "" {
		msg = done
	}
	fmt.Fprintf(stdout, "mirror %s: %s\n", res.Mirror, msg)
	if len(res.Partitions) > 0 {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTATE\tMODE\tLAG\tLAST-MIRRORED\tERROR")
		for _, p := range res.Partitions {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, p.State, p.Mode, cli.Num(p.Lag), cli.Num(p.LastMirroredOffset), p.LastError)
		}
		_ = tw.Flush()
	}
	return cli.ExitOK
}

// mirrorCmd is what every admin command on one mirror has: the flags that
// locate and authenticate to the admin API, --mirror and --json.
type mirrorCmd struct {
	fs     *flag.FlagSet
	af     adminclient.Flags
	name   *string
	asJSON *bool
}

func newMirrorCmd(name, mirrorHelp string, stderr io.Writer) *mirrorCmd {
	m := &mirrorCmd{fs: cli.NewFlagSet(name, stderr)}
	m.af.Register(m.fs)
	m.name = m.fs.String("mirror", "", mirrorHelp)
	m.asJSON = m.fs.Bool("json", false, "print the admin API's JSON answer (stable field names, see docs/cli.md)")
	return m
}

// parse parses args and checks the required flags (--mirror always).
func (m *mirrorCmd) parse(args []string, stderr io.Writer, topicsRequired bool) (int, bool) {
	return requireFlags(m.fs, args, stderr, map[string]bool{"mirror": true, "topics": topicsRequired})
}

// connect locates the admin API and reads its credentials.
func (m *mirrorCmd) connect(stderr io.Writer) (*adminclient.Client, int, bool) {
	return m.af.Connect(m.fs, stderr)
}

// requireFlags parses args and checks that the required flags are set, so
// that a missing one is a usage error before anything is loaded.
func requireFlags(fs *flag.FlagSet, args []string, stderr io.Writer, required map[string]bool) (int, bool) {
	if code, ok := cli.ParseFlags(fs, args); !ok {
		return code, false
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range []string{"mirror", "topics"} {
		if required[name] && !set[name] {
			fmt.Fprintf(stderr, "%s: --%s is required\n", fs.Name(), name)
			return cli.ExitUsage, false
		}
	}
	return 0, true
}

func fail(stderr io.Writer, fs *flag.FlagSet, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
	return cli.ExitFailure
}
