package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/core/statemigrate"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// migrateSource is the plugin name of the store a migration reads.
const migrateSource = config.ReservedPluginPrefix + "migrate-source"

// newState is `kmirror state` (migrate).
func newState() *cobra.Command {
	cmd := cli.Group(&cobra.Command{
		Use:     "state",
		Short:   "Copy a stopped daemon's state into another state store (state migrate)",
		Example: cli.Examples("kmirror state migrate --config kmirror.yaml --from file:/var/lib/kmirror"),
	})
	var cf cli.ConfigFlags
	var from string
	var out cli.Output
	migrate := &cobra.Command{
		Use:   "migrate --config FILE --from file:DIR",
		Short: "Copy a stopped daemon's file state store into the configured state store",
		Long: `Copy a stopped daemon's file state store (--from file:DIR) into the state
store that --config names (state.type: plugin with state.plugin, for example
the built-in etcd store). Every key but leases is copied, then read back and
compared byte for byte. It refuses a target that already holds kmirror state,
a source a daemon still runs on, and --from equal to the configuration's own
file store. The old directory is left as it was. See docs/cli.md.`,
		Example: cli.Examples(
			"systemctl stop kmirror",
			"kmirror state migrate --config kmirror-etcd.yaml --from file:/var/lib/kmirror"),
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cf.Load(cmd.InOrStdin(), config.Load)
			if err != nil {
				return err
			}
			return cli.Code(stateMigrate(cfg, from, &out, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	cf.Register(migrate.Flags(), "the configuration file naming the target state store (state.type, state.plugin)")
	migrate.Flags().StringVar(&from, "from", "", "the state to copy, stopped: file:`DIR` (a file state store's directory)")
	out.Register(migrate.Flags())
	cmd.AddCommand(migrate)
	return cmd
}

// stateMigrate is `kmirror state migrate`.
func stateMigrate(cfg *config.Config, fromFlag string, out *cli.Output, stdout, stderr io.Writer) int {
	from := &fromFlag
	dir, ok := strings.CutPrefix(*from, "file:")
	if !ok || dir == "" {
		fmt.Fprintf(stderr, "kmirror state migrate: --from %q: want file:DIR, the directory of the file state store to copy\n", *from)
		return cli.ExitUsage
	}
	if cfg.State.Type == config.StateTypeFile && samePath(cfg.State.Dir, dir) {
		fmt.Fprintf(stderr, "kmirror state migrate: --from %s is the configuration's own state store (state.dir); set state.type and state.plugin to the store to migrate to\n", *from)
		return cli.ExitUsage
	}
	target := "state.dir " + cfg.State.Dir
	if cfg.State.Type == config.StateTypePlugin {
		target = "state.plugin " + cfg.State.Plugin
	}
	ctx := context.Background()
	logger := hclog.New(&hclog.LoggerOptions{Name: "kmirror", Output: stderr, Level: hclog.Warn})
	plugins, err := startPlugins(ctx, cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror state migrate: cannot start the target store's plugin: %v\n", err)
		return cli.ExitFailure
	}
	defer plugins.Close()
	// The file store locks its directory: a daemon still running on it
	// makes this fail, which is what "with the daemon stopped" needs.
	if err := plugins.host.Ensure(ctx, pluginhost.Spec{Name: migrateSource, Kind: plugin.KindStateStore, Builtin: "file", Config: plugin.Config{"dir": dir}}); err != nil {
		fmt.Fprintf(stderr, "kmirror state migrate: cannot open --from %s (is a daemon still running on it?): %v\n", *from, err)
		return cli.ExitFailure
	}
	src, err := plugins.host.StateStore(migrateSource)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror state migrate: %v\n", err)
		return cli.ExitFailure
	}
	dst, err := plugins.store(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror state migrate: %v\n", err)
		return cli.ExitFailure
	}
	rep, err := statemigrate.Migrate(ctx, src, dst)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror state migrate: %v\n", err)
		return cli.ExitFailure
	}
	if out.Structured() {
		out.Print(stdout, map[string]any{"from": *from, "to": target, "keys": rep.Keys, "bytes": rep.Bytes, "verified": true}, nil)
		return cli.ExitOK
	}
	fmt.Fprintf(stdout, "copied %d keys (%d bytes) from %s to the store of %s; every key read back identical\n", rep.Keys, rep.Bytes, *from, target)
	fmt.Fprintln(stdout, "start the daemon with this configuration; the old directory is left as it was")
	return cli.ExitOK
}

// samePath reports whether two directory names are the same after cleaning.
func samePath(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}
