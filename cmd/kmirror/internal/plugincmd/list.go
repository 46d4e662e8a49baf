package plugincmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/adminclient"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/builtins"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/core/version"
	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// Row is one plugin in `plugins list --json`.
type Row struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Builtin string `json:"builtin,omitempty"`
	// File is the executable (resolved against plugin.dir); "" for a
	// built-in.
	File string `json:"file,omitempty"`
	// Checksum is ok, mismatch, missing, error or builtin.
	Checksum       string `json:"checksum"`
	ChecksumDetail string `json:"checksum_detail,omitempty"`
	SHA256         string `json:"sha256,omitempty"`        // configured
	ActualSHA256   string `json:"actual_sha256,omitempty"` // of the file, when readable
	// PluginVersion and Protocol ("1.0") are from the running daemon, or
	// from launching the plugin briefly; "" when unknown (VersionDetail
	// says why).
	PluginVersion string `json:"plugin_version"`
	Protocol      string `json:"protocol"`
	VersionDetail string `json:"version_detail,omitempty"`
	// Running is null when the daemon could not be asked (Daemon says
	// why).
	Running   *bool  `json:"running"`
	Pid       int    `json:"pid,omitempty"`
	Restarts  int    `json:"restarts,omitempty"`
	InProcess bool   `json:"in_process,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Listing is what `plugins list --json` prints.
type Listing struct {
	// Daemon is "reachable", or why the daemon could not be asked.
	Daemon  string `json:"daemon"`
	Plugins []Row  `json:"plugins"`
}

// checksum checks one configured plugin's file against its sha256.
func checksum(p *config.Plugin, dir string) (row Row) {
	row = Row{Name: p.Name, Kind: p.Kind, Builtin: p.Builtin, File: p.File(dir), SHA256: p.SHA256}
	if p.Builtin != "" {
		row.Checksum = SumBuiltin
		if _, ok := builtins.Find(p.Kind, p.Builtin); !ok {
			row.Checksum, row.ChecksumDetail = SumMissing, fmt.Sprintf("this kmirror has no built-in %s plugin %q (built-in plugins: %s)", p.Kind, p.Builtin, builtins.List())
		} else if _, err := os.Executable(); err != nil {
			row.Checksum, row.ChecksumDetail = SumMissing, fmt.Sprintf("cannot find the kmirror binary that serves built-ins: %v", err)
		}
		return row
	}
	got, err := config.FileSHA256(row.File)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		row.Checksum, row.ChecksumDetail = SumMissing, fmt.Sprintf("%s does not exist (the configuration says SHA-256 %s)", row.File, p.SHA256)
	case err != nil:
		row.Checksum, row.ChecksumDetail = SumError, err.Error()
	case got != p.SHA256:
		row.Checksum, row.ActualSHA256 = SumMismatch, got
		row.ChecksumDetail = fmt.Sprintf("%s has SHA-256 %s, the configuration says %s", row.File, got, p.SHA256)
	default:
		row.Checksum, row.ActualSHA256 = SumOK, got
	}
	return row
}

func newList() *cobra.Command {
	var af adminclient.Flags
	var out cli.Output
	var noLaunch bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the configured plugins: file, checksum, version, running or not",
		Long: `Every configured plugin: name, kind, file or built-in, checksum state, plugin
and protocol version, and whether the running daemon runs it (asked through
its admin API; when it cannot be asked, RUNNING says why and the rest is
printed).`,
		Example: cli.Examples(
			"kmirror plugins list --config kmirror.yaml",
			"kmirror plugins list --config kmirror.yaml --no-launch -o json"),
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cli.Code(pluginsList(&af, &out, noLaunch, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	af.Register(cmd.Flags())
	out.Register(cmd.Flags())
	cmd.Flags().BoolVar(&noLaunch, "no-launch", false, "never launch a plugin to read its version (the running daemon's answer only)")
	return cmd
}

func pluginsList(af *adminclient.Flags, o *cli.Output, noLaunch bool, stdin io.Reader, stdout, stderr io.Writer) int {
	if named, err := af.Config.Resolve(stdin); err != nil || !named {
		fmt.Fprintf(stderr, "kmirror plugins list: --config FILE is required (or set %s)\n", cli.EnvConfig)
		return cli.ExitUsage
	}
	cfg, err := af.Load(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror plugins list: %v\n", err)
		return cli.ExitFailure
	}
	daemon, running := daemonPlugins(af, cfg)
	out := Listing{Daemon: daemon, Plugins: []Row{}}
	for i := range cfg.Plugins {
		p := &cfg.Plugins[i]
		row := checksum(p, cfg.PluginDirectory())
		if st, ok := running[p.Name]; ok {
			row.Running = &st.Running
			row.Pid, row.Restarts, row.InProcess, row.Reason = st.Pid, st.Restarts, st.InProcess, st.Reason
			if st.ProtocolMajor > 0 {
				row.PluginVersion, row.Protocol = st.Version, fmt.Sprintf("%d.%d", st.ProtocolMajor, st.ProtocolMinor)
			}
		} else if running != nil {
			f := false
			row.Running, row.Reason = &f, "not in the running daemon: added to the configuration after it started? (restart `kmirror run`)"
		}
		if row.Protocol == "" {
			row.PluginVersion, row.Protocol, row.VersionDetail = versionOf(p, row, noLaunch)
		}
		out.Plugins = append(out.Plugins, row)
	}
	if o.Structured() {
		o.Print(stdout, out, nil)
		return cli.ExitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tSOURCE\tCHECKSUM\tVERSION\tPROTOCOL\tRUNNING")
	var notes []string
	for _, r := range out.Plugins {
		source := r.File
		if r.Builtin != "" {
			source = "builtin " + r.Builtin
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Kind, source, r.Checksum, cli.OrDash(r.PluginVersion), cli.OrDash(r.Protocol), runningCell(r))
		if r.ChecksumDetail != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", r.Name, r.ChecksumDetail))
		}
		if r.VersionDetail != "" {
			notes = append(notes, fmt.Sprintf("%s: version: %s", r.Name, r.VersionDetail))
		}
		if r.Reason != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", r.Name, r.Reason))
		}
	}
	_ = tw.Flush()
	if running == nil {
		notes = append(notes, "running: unknown: "+daemon)
	}
	for _, n := range notes {
		fmt.Fprintln(stdout, "note: "+n)
	}
	return cli.ExitOK
}

// runningCell is the RUNNING column.
func runningCell(r Row) string {
	switch {
	case r.Running == nil:
		return "unknown (daemon not reachable)"
	case !*r.Running:
		return "no"
	case r.InProcess:
		return fmt.Sprintf("yes (in process, restarts %d)", r.Restarts)
	}
	return fmt.Sprintf("yes (pid %d, restarts %d)", r.Pid, r.Restarts)
}

// daemonPlugins asks the running daemon for its plugins. running is nil
// when it could not be asked; daemon then says why.
func daemonPlugins(af *adminclient.Flags, cfg *config.Config) (daemon string, running map[string]admin.PluginStatus) {
	if af.Address == "" && cfg.AdminAddress == "" {
		return "the configuration has no admin.address, so the daemon serves no admin API", nil
	}
	c, err := af.Client(cfg)
	if err != nil {
		return err.Error(), nil
	}
	var list admin.PluginList
	if err := c.Call(http.MethodGet, "/v1/plugins", nil, &list, 10*time.Second); err != nil {
		var ae *adminclient.Error
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return "the daemon is older than `kmirror plugins list` (no GET /v1/plugins)", nil
		}
		return err.Error(), nil
	}
	running = map[string]admin.PluginStatus{}
	for _, p := range list.Plugins {
		running[p.Name] = p
	}
	return "reachable", running
}

// versionOf says a plugin's version and protocol without the daemon: a
// built-in's are this binary's; a plugin given by path is launched once
// (never when its checksum does not match).
func versionOf(p *config.Plugin, row Row, noLaunch bool) (ver, protocol, detail string) {
	if p.Builtin != "" {
		if row.Checksum != SumBuiltin {
			return "", "", ""
		}
		return version.Get().Version, builtinProtocol(plugin.Kind(p.Kind)), ""
	}
	switch {
	case row.Checksum != SumOK:
		return "", "", "not launched: its checksum is not ok"
	case noLaunch:
		return "", "", "not launched (--no-launch)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	pr, err := pluginhost.Probe(ctx, pluginhost.Spec{Name: p.Name, Kind: plugin.Kind(p.Kind), Path: row.File, SHA256: p.SHA256}, pluginhost.Options{StartTimeout: probeTimeout})
	if err != nil {
		return "", "", "launching it failed: " + err.Error()
	}
	if !pr.InfoKnown {
		return "", fmt.Sprintf("%d", pr.ProtocolMajor), pr.InfoError
	}
	return pr.Version, fmt.Sprintf("%d.%d", pr.ProtocolMajor, pr.ProtocolMinor), ""
}

// builtinProtocol is the protocol version of kind this binary speaks.
func builtinProtocol(kind plugin.Kind) string {
	switch kind {
	case plugin.KindAuth:
		return fmt.Sprintf("%d.%d", auth.ProtocolMajor, auth.ProtocolMinor)
	case plugin.KindFilter:
		return fmt.Sprintf("%d.%d", filter.ProtocolMajor, filter.ProtocolMinor)
	case plugin.KindStateStore:
		return fmt.Sprintf("%d.%d", statestore.ProtocolMajor, statestore.ProtocolMinor)
	}
	return ""
}

func newVerify() *cobra.Command {
	var cf cli.ConfigFlags
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every configured plugin's file against its sha256",
		Long: `Check every configured plugin's file against its sha256 (and that built-ins
exist); exit 1 naming each bad one with both sums.`,
		Example: cli.Examples("kmirror plugins verify --config kmirror.yaml"),
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cli.Code(pluginsVerify(&cf, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	cf.Register(cmd.Flags(), "the daemon's configuration file")
	return cmd
}

func pluginsVerify(cf *cli.ConfigFlags, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, code, ok := loadForPlugins("kmirror plugins verify", cf, stdin, stderr)
	if !ok {
		return code
	}
	var bad []string
	for i := range cfg.Plugins {
		p := &cfg.Plugins[i]
		row := checksum(p, cfg.PluginDirectory())
		switch row.Checksum {
		case SumOK:
			fmt.Fprintf(stdout, "ok        plugins.%s: %s (SHA-256 %s)\n", p.Name, row.File, p.SHA256)
		case SumBuiltin:
			fmt.Fprintf(stdout, "ok        plugins.%s: built-in %s %s\n", p.Name, p.Kind, p.Builtin)
		default:
			fmt.Fprintf(stdout, "%-9s plugins.%s: %s\n", row.Checksum, p.Name, row.ChecksumDetail)
			bad = append(bad, fmt.Sprintf("plugins.%s (%s): %s", p.Name, row.Checksum, row.ChecksumDetail))
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "kmirror plugins verify: %d of %d plugins would not be started:\n  %s\n", len(bad), len(cfg.Plugins), strings.Join(bad, "\n  "))
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "all %d plugins verified\n", len(cfg.Plugins))
	return cli.ExitOK
}
