package statuscmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/livestatus"
)

// Command is `kmirror status [MIRROR]`: flags --http-address (or the
// daemon's configuration, of which only http.address is read), --watch,
// --interval and -o.
func Command() *cobra.Command { return newCommand(nil) }

// newCommand is Command; until, when set, gives the context that replaces
// the interrupt signals (tests end --watch with it).
func newCommand(until func() context.Context) *cobra.Command {
	var (
		cf       cli.ConfigFlags
		out      cli.Output
		addr     string
		mirror   string
		watch    bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status [MIRROR]",
		Short: "Live status per mirror: states, lag, throughput, FAILED partitions, catch-up progress",
		Long:  cli.Wrap("The running daemon's live status, from GET /v1/live on its http.address (the status page's data): per mirror the partitions per state, total and maximum lag, bytes/s and records/s measured from what kmirror appended, unreachable clusters, FAILED partitions with their reasons first, then the partitions with the most lag, each with a progress bar and an estimate of when it catches up. On a terminal it uses colour and --watch redraws in place; piped, it prints plain text and --watch prints one snapshot after another. Ctrl-C ends --watch (exit 0). Only http.address is read from the configuration."),
		Example: cli.Examples(
			"kmirror status --config kmirror.yaml",
			"kmirror status dc1-to-dc2 --watch --config kmirror.yaml",
			"kmirror status --http-address 127.0.0.1:9644 -o json"),
		Args: cli.MaxArgs(1, "mirror"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := cli.MirrorArg(args, mirror, false)
			if err != nil {
				return err
			}
			if interval < 100*time.Millisecond {
				return cli.Usagef("--interval %s: want at least 100ms", interval)
			}
			target := addr
			if target == "" {
				named, err := cf.Resolve(cmd.InOrStdin())
				if err != nil {
					return err
				}
				if !named {
					return cli.Usagef("--http-address HOST:PORT or --config FILE is required (the daemon's http.address; or set %s)", cli.EnvConfig)
				}
				// Only http.address is needed: the destination's and
				// mirrors' files (passwords, certificates) need not be
				// readable here.
				cfg, err := cf.Load(cmd.InOrStdin(), config.LoadForPlugins)
				if err != nil {
					return err
				}
				if cfg.HTTPAddress == "" {
					return cli.Failf("http.address is empty in %s, so the daemon serves no status; set it and restart the daemon", cf.Name())
				}
				target = cfg.HTTPAddress
			}
			var run context.Context
			if until != nil {
				run = until()
			} else {
				c, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				run = c
			}
			return status(run, target, name, watch, interval, &out, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	cf.Register(fs, "the daemon's configuration file (only http.address is read)")
	out.Register(fs)
	fs.StringVar(&addr, "http-address", "", "the daemon's http.address as `HOST:PORT`, instead of reading it from --config")
	fs.StringVar(&mirror, "mirror", "", "only this mirror (same as the positional MIRROR)")
	_ = fs.MarkHidden("mirror")
	fs.BoolVarP(&watch, "watch", "w", false, "refresh until interrupted (Ctrl-C): in place on a terminal, one snapshot after another otherwise")
	fs.DurationVar(&interval, "interval", 2*time.Second, "how often --watch refreshes (a `DURATION` such as 2s or 1m)")
	return cmd
}

// status prints the daemon's status once, or until ctx ends with watch.
func status(ctx context.Context, target, only string, watch bool, interval time.Duration, out *cli.Output, stdout, stderr io.Writer) error {
	style := Style{Terminal: isTerminal(stdout), Width: columns()}
	for first := true; ; first = false {
		live, err := Fetch(ctx, target)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil // interrupted while watching
		case err != nil && !watch:
			return cli.Fail(err)
		case err != nil:
			fmt.Fprintf(stderr, "kmirror status: %v\n", err)
		default:
			if only != "" {
				live = keep(live, only)
				if len(live.Mirrors) == 0 {
					return cli.Failf("no mirror named %q is running", only)
				}
			}
			switch {
			case out.Structured():
				out.Print(stdout, live, nil)
			case watch && style.Terminal:
				_, _ = io.WriteString(stdout, "\x1b[H\x1b[2J") // home, clear: redraw in place
				Render(stdout, live, style)
			default:
				if !first {
					_, _ = io.WriteString(stdout, "\n")
				}
				Render(stdout, live, style)
			}
		}
		if !watch {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// keep is live with only the mirror named name.
func keep(live livestatus.Live, name string) livestatus.Live {
	out := live
	out.Mirrors = nil
	for _, m := range live.Mirrors {
		if m.Name == name {
			out.Mirrors = append(out.Mirrors, m)
		}
	}
	return out
}

// Fetch reads GET /v1/live from the daemon at addr (its http.address; a
// wildcard host means this machine).
func Fetch(ctx context.Context, addr string) (livestatus.Live, error) {
	var live livestatus.Live
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return live, fmt.Errorf("http.address %q: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	url := "http://" + net.JoinHostPort(host, port) + "/v1/live"
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return live, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return live, fmt.Errorf("cannot reach the daemon at %s (is `kmirror run` running, with this http.address?): %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return live, fmt.Errorf("%s answered %s: %s", url, resp.Status, body)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&live); err != nil {
		return live, fmt.Errorf("decoding %s: %w", url, err)
	}
	return live, nil
}

// isTerminal says whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// columns is the terminal's width from $COLUMNS (0: the default).
func columns() int {
	n, _ := strconv.Atoi(os.Getenv("COLUMNS"))
	return n
}
