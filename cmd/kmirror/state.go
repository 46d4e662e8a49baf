package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/core/statemigrate"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// migrateSource is the plugin name of the store a migration reads.
const migrateSource = config.ReservedPluginPrefix + "migrate-source"

// cmdState is `kmirror state migrate`.
func cmdState(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "migrate" {
		fmt.Fprintln(stderr, "usage: kmirror state migrate --config FILE --from file:DIR [--json]")
		return cli.ExitUsage
	}
	fs := cli.NewFlagSet("state migrate", stderr)
	var cf cli.ConfigFlags
	cf.Register(fs)
	from := fs.String("from", "", "the state to copy, stopped: file:DIR (a file state store's directory)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	cfg, code, ok := cf.ParseAndLoad(fs, args[1:], stderr)
	if !ok {
		return code
	}
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
	if *asJSON {
		cli.PrintJSON(stdout, map[string]any{"from": *from, "to": target, "keys": rep.Keys, "bytes": rep.Bytes, "verified": true})
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
