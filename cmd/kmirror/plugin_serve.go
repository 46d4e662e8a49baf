package main

import (
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/builtins"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/memlimit"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// newPlugin is the hidden `kmirror plugin serve <kind> <name>`, which the
// plugin host runs (the daemon re-executes itself): `kmirror help` does
// not list it.
func newPlugin() *cobra.Command {
	return &cobra.Command{
		Use:    "plugin serve KIND NAME",
		Short:  "Serve a built-in plugin to a kmirror host (run by the host)",
		Hidden: true,
		// The host's command line is exact; nothing is parsed as a flag.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Code(cmdPlugin(args, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
}

// builtinSoftLimit is the Go runtime's soft memory limit of a built-in
// plugin's process (see core/memlimit). The file state store's process holds
// about 5 MiB of Go memory; 10,000 partitions starting at once send it
// thousands of concurrent calls, whose garbage GOGC=100 alone let pile up to
// about 25 MiB more (docs/benchmarks.md).
const builtinSoftLimit = 32 << 20

// cmdPlugin is `kmirror plugin serve <kind> <name>`: it serves one built-in
// plugin (the registry of package builtins) over go-plugin's gRPC transport
// to the kmirror host that started it. Run by hand, it says what it is and
// exits 1 (go-plugin's cookie check).
func cmdPlugin(args []string, _, stderr io.Writer) int {
	if len(args) != 3 || args[0] != "serve" {
		fmt.Fprintf(stderr, "usage: kmirror plugin serve <kind> <name>\nbuilt-in plugins: %s\n", builtins.List())
		return cli.ExitUsage
	}
	b, ok := builtins.Find(args[1], args[2])
	if !ok {
		fmt.Fprintf(stderr, "kmirror plugin serve: no built-in %s plugin %q; built-in plugins: %s\n", args[1], args[2], builtins.List())
		return cli.ExitUsage
	}
	if os.Getenv(plugin.MagicCookieKey) != plugin.MagicCookieValue {
		fmt.Fprintf(stderr, "kmirror plugin serve %s %s serves the built-in %s plugin %q to a kmirror daemon, which starts it; it is not meant to be run by hand.\n", b.Kind, b.Name, b.Kind, b.Name)
	}
	// The process serves one plugin: its memory is what its requests
	// leave behind, so a small soft limit keeps it near what it holds (the
	// guard raises the limit if it ever holds more).
	limit := memlimit.Start(builtinSoftLimit, "the built-in plugin's soft memory limit", hclog.New(&hclog.LoggerOptions{Output: stderr, JSONFormat: true, Level: hclog.Info}))
	defer limit.Stop()
	plugin.Serve(b.Serve) // exits 1 without the host's cookie
	return cli.ExitOK
}
