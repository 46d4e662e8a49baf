package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/daemon"
	"github.com/kmirror/kmirror/core/logging"
	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/core/mirror"
)

func newRun() *cobra.Command {
	var cf cli.ConfigFlags
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Run the mirroring daemon",
		Long: `Run the daemon: load and validate the configuration, serve /healthz, /readyz
and /metrics on http.address and the admin API on admin.address, mirror,
reload on SIGHUP, stop on SIGINT/SIGTERM within shutdown.timeout.ms.

A configuration read from standard input (--config -) is read once: SIGHUP
applies it again with the environment of the time.`,
		Example: cli.Examples(
			"kmirror run --config /etc/kmirror/kmirror.yaml",
			"KMIRROR_CONFIG=/etc/kmirror/kmirror.yaml kmirror run",
			"kmirror run --config kmirror.yaml --set log.level=debug"),
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Load once up front so that a bad file fails before any
			// listener starts, and so that the logger gets its level and
			// format.
			cfg, err := cf.Load(cmd.InOrStdin(), config.Load)
			if err != nil {
				return err
			}
			return cli.Code(runDaemon(cfg, cf.Source, cmd.ErrOrStderr()))
		},
	}
	cf.Register(cmd.Flags(), "")
	return cmd
}

// runDaemon runs the daemon on cfg until SIGINT or SIGTERM; source gives
// the configuration again on SIGHUP.
func runDaemon(cfg *config.Config, source func() config.Source, stderr io.Writer) int {
	logger, err := logging.New(stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror run: %v\n", err)
		return cli.ExitFailure
	}
	mp, err := metrics.New()
	if err != nil {
		logger.Error("cannot start", "error", err)
		return cli.ExitFailure
	}
	// Plugins start first and stop last: whatever uses one (the state
	// store, credentials, filters) is up only while its plugin host is.
	plugins, err := startPlugins(context.Background(), cfg, logger)
	if err != nil {
		logger.Error("cannot start the plugins", "error", err)
		return cli.ExitFailure
	}
	defer plugins.Close()
	// The state store is a plugin too (the built-in file store unless
	// state.type says otherwise); its lock keeps a second daemon off the
	// same directory.
	store, err := plugins.store(cfg)
	if err != nil {
		logger.Error("cannot open the state store", "error", err)
		return cli.ExitFailure
	}
	engine, err := mirror.New(mirror.Options{Store: store, Logger: logger, Metrics: mp,
		Credentials: plugins.credentials, Filters: plugins.host.Filter})
	if err != nil {
		logger.Error("cannot start", "error", err)
		return cli.ExitFailure
	}
	// The admin API starts after the engine (it acts on it) and stops
	// before it, so no operator call arrives at a stopped engine.
	adminMetrics, err := mp.AdminRequests()
	if err != nil {
		logger.Error("cannot start", "error", err)
		return cli.ExitFailure
	}
	adminAPI, err := admin.New(admin.Options{Controller: engine, Plugins: hostPlugins{plugins.host}, Logger: logger, Observe: adminMetrics})
	if err != nil {
		logger.Error("cannot start", "error", err)
		return cli.ExitFailure
	}
	first := true
	d, err := daemon.New(daemon.Options{
		Load: func() (*config.Config, error) {
			if first {
				first = false
				return cfg, nil
			}
			return config.Load(source())
		},
		Logger:     logger,
		Metrics:    mp,
		Components: []daemon.Component{engine, adminAPI},
	})
	if err != nil {
		logger.Error("cannot start", "error", err)
		return cli.ExitFailure
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reload := make(chan struct{}, 1)
	go func() { // owned by cmdRun: ends when ctx is done.
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				select {
				case reload <- struct{}{}:
				default: // a reload is already pending
				}
			}
		}
	}()

	if err := d.Run(ctx, reload); err != nil {
		logger.Error("kmirror stopped with an error", "error", err)
		return cli.ExitFailure
	}
	return cli.ExitOK
}

// The engine is what the admin API controls.
var _ admin.Controller = (*mirror.Engine)(nil)
