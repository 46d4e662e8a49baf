// Command kmirror is the kmirror daemon and its command-line tools. It wires the
// engine (core/...) and the built-in plugins together; see `kmirror help`.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/mirrorcmd"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/plugincmd"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/statuscmd"
)

// command is one `kmirror ...` sub-command; run returns the exit code
// (cli.ExitOK, cli.ExitFailure, cli.ExitUsage: stable, documented in
// docs/cli.md).
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"run", "run the mirroring daemon", cmdRun},
		{"demo", "run an embedded demo: two in-process clusters, a mirror, and a verification", cmdDemo},
		{"describe", "show every mirrored partition: state, mode, offsets, lag, last error", mirrorcmd.Describe},
		{"status", "live status per mirror: states, lag, throughput, FAILED partitions, catch-up progress (--watch)", statuscmd.Run},
		{"mirrors", "list, describe, pause, resume, stop and start mirrors through the admin API", mirrorcmd.Mirrors},
		{"failover", "fail a mirror's topics over to the destination (through the admin API)", mirrorcmd.Failover},
		{"failback", "mirror a failed-over mirror's topics back to its old source (through the admin API)", mirrorcmd.Failback},
		{"plugins", "install, list, verify and remove plugin files", plugincmd.Run},
		{"state", "copy a stopped daemon's state into another state store (state migrate)", cmdState},
		{"config", "validate a configuration file, print the key reference or a sample", cmdConfig},
		{"version", "print the version, commit, Go and franz-go versions", cmdVersion},
	}
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return cli.ExitUsage
		}
		return cli.ExitOK
	}
	for _, c := range append(commands(), hiddenCommands()...) {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "kmirror: unknown command %q; run `kmirror help` for the list\n", args[0])
	return cli.ExitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kmirror mirrors topics between Kafka clusters with offsets preserved.")
	fmt.Fprintln(w, "\nUsage: kmirror <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun `kmirror <command> -h` for the flags of a command. Docs: docs/README.md")
}
