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

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/livestatus"
)

// Run is `kmirror status`: flags --http-address (or the daemon's
// configuration, of which only http.address is read), --mirror, --watch,
// --interval and --json.
func Run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, stdout, stderr)
}

// run is Run until ctx ends (an interrupt).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("status", stderr)
	var cf cli.ConfigFlags
	cf.Register(fs)
	addr := fs.String("http-address", "", "the daemon's http.address (host:port); instead of reading it from --config")
	only := fs.String("mirror", "", "only this mirror")
	watch := fs.Bool("watch", false, "refresh until interrupted (Ctrl-C): in place on a terminal, one snapshot after another otherwise")
	interval := fs.Duration("interval", 2*time.Second, "how often --watch refreshes (a duration such as 2s or 1m)")
	asJSON := fs.Bool("json", false, "print the status page's data as JSON (GET /v1/live; field names in docs/cli.md)")
	if code, ok := cli.ParseFlags(fs, args); !ok {
		return code
	}
	if *interval < 100*time.Millisecond {
		fmt.Fprintf(stderr, "kmirror status: --interval %s: want at least 100ms\n", *interval)
		return cli.ExitUsage
	}
	target := *addr
	if target == "" {
		if cf.Path == "" {
			fmt.Fprintln(stderr, "kmirror status: --http-address HOST:PORT or --config FILE is required (the daemon's http.address)")
			return cli.ExitUsage
		}
		// Only http.address is needed: the destination's and mirrors'
		// files (passwords, certificates) need not be readable here.
		cfg, err := config.LoadForPlugins(cf.Source())
		if err != nil {
			fmt.Fprintf(stderr, "kmirror status: %s is not valid:\n%v\n", cf.Path, err)
			return cli.ExitFailure
		}
		if cfg.HTTPAddress == "" {
			fmt.Fprintf(stderr, "kmirror status: http.address is empty in %s, so the daemon serves no status; set it and restart the daemon\n", cf.Path)
			return cli.ExitFailure
		}
		target = cfg.HTTPAddress
	}
	style := Style{Terminal: isTerminal(stdout), Width: columns()}
	for first := true; ; first = false {
		live, err := Fetch(ctx, target)
		if err != nil {
			if ctx.Err() != nil {
				return cli.ExitOK // interrupted while watching
			}
			fmt.Fprintf(stderr, "kmirror status: %v\n", err)
			if !*watch {
				return cli.ExitFailure
			}
		} else {
			if *only != "" {
				live = keep(live, *only)
				if len(live.Mirrors) == 0 {
					fmt.Fprintf(stderr, "kmirror status: no mirror named %q is running\n", *only)
					return cli.ExitFailure
				}
			}
			switch {
			case *asJSON:
				cli.PrintJSON(stdout, live)
			case *watch && style.Terminal:
				_, _ = io.WriteString(stdout, "\x1b[H\x1b[2J") // home, clear: redraw in place
				Render(stdout, live, style)
			default:
				if !first {
					_, _ = io.WriteString(stdout, "\n")
				}
				Render(stdout, live, style)
			}
		}
		if !*watch {
			return cli.ExitOK
		}
		select {
		case <-ctx.Done():
			return cli.ExitOK
		case <-time.After(*interval):
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
