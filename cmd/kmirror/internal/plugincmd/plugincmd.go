// Package plugincmd is `kmirror plugins`: install a plugin file (copied,
// proven a plugin of its kind, and the configuration entry printed), list
// and verify the configured plugins, and remove a plugin file. It never
// edits the configuration file.
package plugincmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

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

// probeTimeout bounds one launch of a plugin by install and list: the
// handshake, then each call.
const probeTimeout = 30 * time.Second

// Checksum states of `plugins list` and `plugins verify` (Row.Checksum).
const (
	SumOK       = "ok"
	SumMismatch = "mismatch"
	SumMissing  = "missing"
	SumBuiltin  = "builtin"
	SumError    = "error" // the file could not be read
)

// Run is `kmirror plugins <sub-command>`: install, list, verify and remove.
func Run(args []string, stdout, stderr io.Writer) int {
	subs := []struct {
		name, usage string
		run         func(args []string, stdout, stderr io.Writer) int
	}{
		{"install", "install PATH --kind auth|statestore|filter [--name NAME] (--config FILE | --plugin-dir DIR) [--force] [--json]", pluginsInstall},
		{"list", "list --config FILE [--json]", pluginsList},
		{"verify", "verify --config FILE", pluginsVerify},
		{"remove", "remove NAME|FILE --config FILE [--force]", pluginsRemove},
	}
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "usage: kmirror plugins <sub-command> [flags]; sub-commands:")
		for _, s := range subs {
			fmt.Fprintf(w, "  kmirror plugins %s\n", s.usage)
		}
		fmt.Fprintln(w, "Run `kmirror plugins <sub-command> -h` for every flag. kmirror never edits the configuration file: install prints the entry to add.")
	}
	if len(args) == 0 {
		usage(stderr)
		return cli.ExitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return cli.ExitOK
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "kmirror plugins: unknown sub-command %q\n", args[0])
	usage(stderr)
	return cli.ExitUsage
}

// parseOperand parses args into fs, flags before and after the one
// operand (install PATH --kind filter, or --kind filter PATH); what names
// the operand goes into the usage message.
func parseOperand(fs *flag.FlagSet, args []string, what string) (operand string, code int, ok bool) {
	var operands []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return "", cli.ExitOK, false
			}
			return "", cli.ExitUsage, false
		}
		if fs.NArg() == 0 {
			break
		}
		operands = append(operands, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(operands) != 1 {
		fmt.Fprintf(fs.Output(), "%s: give exactly one %s (got %d)\n", fs.Name(), what, len(operands))
		return "", cli.ExitUsage, false
	}
	return operands[0], 0, true
}

// loadForPlugins loads the configuration the plugin commands read (no
// destination, no mirrors: see config.LoadForPlugins).
func loadForPlugins(fs *flag.FlagSet, cf *cli.ConfigFlags, stderr io.Writer) (*config.Config, int, bool) {
	cfg, err := config.LoadForPlugins(cf.Source())
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s is not valid:\n%v\n", fs.Name(), cf.Path, err)
		return nil, cli.ExitFailure, false
	}
	return cfg, 0, true
}

// InstallResult is what `plugins install --json` prints.
type InstallResult struct {
	Name          string   `json:"name"`
	Kind          string   `json:"kind"`
	File          string   `json:"file"` // where it was installed
	Path          string   `json:"path"` // the value for plugins.<name>.path
	SHA256        string   `json:"sha256"`
	Replaced      bool     `json:"replaced"`  // --force replaced a different file
	Unchanged     bool     `json:"unchanged"` // the same file was there already
	ProtocolMajor int      `json:"protocol_major"`
	ProtocolMinor int      `json:"protocol_minor"` // -1: unknown until configured
	PluginName    string   `json:"plugin_name"`
	PluginVersion string   `json:"plugin_version"`
	InfoError     string   `json:"info_error,omitempty"`
	ConfigKeys    []string `json:"config_keys"`
	Block         string   `json:"block"` // the YAML to add to the configuration
}

func pluginsInstall(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("plugins install", stderr)
	var cf cli.ConfigFlags
	cf.Register(fs)
	kind := fs.String("kind", "", "what the plugin supplies: auth, statestore or filter (required)")
	name := fs.String("name", "", "the plugin's name in the plugins: map (default: the file name without a kmirror-<kind>- prefix)")
	dir := fs.String("plugin-dir", "", "install into this directory (default: the configuration's plugin.dir, else <state.dir>/plugins)")
	force := fs.Bool("force", false, "replace a different file of the same name in the plugin directory")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	src, code, ok := parseOperand(fs, args, "PATH (the plugin's executable)")
	if !ok {
		return code
	}
	k := plugin.Kind(*kind)
	if _, err := plugin.ProtocolMajor(k); err != nil {
		fmt.Fprintf(stderr, "plugins install: --kind %q: give auth, statestore or filter\n", *kind)
		return cli.ExitUsage
	}
	if cf.Path == "" && *dir == "" {
		fmt.Fprintln(stderr, "plugins install: --config FILE (the daemon's configuration, for plugin.dir) or --plugin-dir DIR is required")
		return cli.ExitUsage
	}
	var cfg *config.Config
	if cf.Path != "" {
		if cfg, code, ok = loadForPlugins(fs, &cf, stderr); !ok {
			return code
		}
	}
	base := filepath.Base(src)
	if *name == "" {
		*name = strings.ToLower(strings.TrimPrefix(base, "kmirror-"+*kind+"-"))
		if config.CheckPluginName(*name) != nil {
			fmt.Fprintf(stderr, "plugins install: %q does not make a plugin name ([a-z0-9][a-z0-9_-]*); pass --name\n", base)
			return cli.ExitUsage
		}
	} else if err := config.CheckPluginName(*name); err != nil {
		fmt.Fprintf(stderr, "plugins install: --name: %v\n", err)
		return cli.ExitUsage
	}
	target := *dir
	relative := false
	if target == "" {
		target, relative = cfg.PluginDirectory(), true
	} else if cfg != nil {
		relative = samePath(target, cfg.PluginDirectory())
	}
	res, err := install(context.Background(), src, target, *name, k, *force)
	if err != nil {
		fmt.Fprintf(stderr, "plugins install: %v\n", err)
		return cli.ExitFailure
	}
	res.Path = res.File
	if relative {
		res.Path = filepath.Base(res.File)
	}
	res.Block = pluginBlock(res)
	if *asJSON {
		cli.PrintJSON(stdout, res)
		return cli.ExitOK
	}
	switch {
	case res.Unchanged:
		fmt.Fprintf(stdout, "%s is installed already (the same file, SHA-256 %s)\n", res.File, res.SHA256)
	case res.Replaced:
		fmt.Fprintf(stdout, "replaced %s (--force); its SHA-256 is now %s\n", res.File, res.SHA256)
	default:
		fmt.Fprintf(stdout, "installed %s (SHA-256 %s)\n", res.File, res.SHA256)
	}
	if res.InfoError != "" {
		fmt.Fprintf(stdout, "a kmirror %s plugin, protocol %d; %s\n", k, res.ProtocolMajor, res.InfoError)
	} else {
		fmt.Fprintf(stdout, "a kmirror %s plugin: %s, version %s, protocol %d.%d\n", k, res.PluginName, orNone(res.PluginVersion), res.ProtocolMajor, res.ProtocolMinor)
	}
	where := "the configuration"
	if cf.Path != "" {
		where = cf.Path
	}
	fmt.Fprintf(stdout, "\nkmirror does not edit the configuration file: add this entry to the plugins: map of %s, then reload (SIGHUP) or restart `kmirror run`:\n\n%s", where, res.Block)
	if cfg != nil {
		if p, ok := cfg.Plugin(*name); ok {
			fmt.Fprintf(stdout, "\nnote: %s already has plugins.%s (kind %s, %s): replace it with the entry above.\n", where, *name, p.Kind, cli.OrDash(p.Path+p.Builtin))
		}
	}
	if !relative {
		fmt.Fprintf(stdout, "\nnote: %s is not the configuration's plugin directory, so path is absolute.\n", target)
	}
	return cli.ExitOK
}

// samePath reports whether a and b name the same directory.
func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// install copies src into dir and proves it a plugin of kind: the copy is
// written to a temporary file in dir (mode 0755), launched once (Probe)
// and renamed into place only when it passes, so a refused file leaves
// nothing behind and a file it replaces (force) stays until then.
func install(ctx context.Context, src, dir, name string, kind plugin.Kind, force bool) (InstallResult, error) {
	res := InstallResult{Name: name, Kind: string(kind), File: filepath.Join(dir, filepath.Base(src)), ConfigKeys: []string{}}
	if abs, err := filepath.Abs(dir); err == nil {
		res.File = filepath.Join(abs, filepath.Base(src))
	}
	fi, err := os.Stat(src)
	if err != nil {
		return res, fmt.Errorf("reading the plugin file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return res, fmt.Errorf("%s is not a regular file", src)
	}
	if res.SHA256, err = config.FileSHA256(src); err != nil {
		return res, err
	}
	if old, err := config.FileSHA256(res.File); err == nil {
		switch {
		case old == res.SHA256:
			res.Unchanged = true
		case !force:
			return res, fmt.Errorf("%s exists and is a different file (SHA-256 %s; the new one is %s): pass --force to replace it, or install under another file name", res.File, old, res.SHA256)
		default:
			res.Replaced = true
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return res, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("creating the plugin directory: %w", err)
	}
	tmp, err := copyExecutable(src, dir)
	if err != nil {
		return res, err
	}
	defer os.Remove(tmp) // a no-op once renamed
	// The temporary copy is what is launched: what is proven is what is
	// kept.
	p, err := pluginhost.Probe(ctx, pluginhost.Spec{Name: name, Kind: kind, Path: tmp, SHA256: res.SHA256}, pluginhost.Options{StartTimeout: probeTimeout})
	if err != nil {
		return res, fmt.Errorf("refused %s, nothing installed: %w", src, unTemp(err, tmp, src))
	}
	res.ProtocolMajor, res.ProtocolMinor = p.ProtocolMajor, -1
	if p.InfoKnown {
		res.PluginName, res.PluginVersion, res.ProtocolMinor = p.Name, p.Version, p.ProtocolMinor
	} else {
		res.InfoError = p.InfoError
	}
	for _, f := range p.Schema {
		res.ConfigKeys = append(res.ConfigKeys, f.Name)
	}
	if !res.Unchanged {
		if err := os.Rename(tmp, res.File); err != nil {
			return res, fmt.Errorf("moving the plugin into place: %w", err)
		}
		syncDir(dir)
	}
	return res, nil
}

// unTemp names src rather than the temporary copy in err's text.
func unTemp(err error, tmp, src string) error {
	if !strings.Contains(err.Error(), tmp) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), tmp, src))
}

// copyExecutable copies src to a new temporary file in dir, mode 0755,
// synced, and returns its name.
func copyExecutable(src, dir string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("reading the plugin file: %w", err)
	}
	defer in.Close()
	out, err := os.CreateTemp(dir, ".install-"+filepath.Base(src)+"-*")
	if err != nil {
		return "", fmt.Errorf("writing into the plugin directory: %w", err)
	}
	_, cerr := io.Copy(out, in)
	err = errors.Join(cerr, out.Chmod(0o755), out.Sync(), out.Close())
	if err != nil {
		_ = os.Remove(out.Name())
		return "", fmt.Errorf("copying the plugin into %s: %w", dir, err)
	}
	return out.Name(), nil
}

// syncDir makes a rename in dir durable (best effort).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// pluginBlock is the plugins: entry for an installed plugin, as YAML.
func pluginBlock(r InstallResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "plugins:\n  %s:\n    kind: %s\n    path: %s\n    sha256: %s\n", r.Name, r.Kind, yamlString(r.Path), r.SHA256)
	if len(r.ConfigKeys) > 0 {
		fmt.Fprintf(&b, "    # config: the plugin declares the keys %s\n", strings.Join(r.ConfigKeys, ", "))
	}
	return b.String()
}

// yamlString quotes s for YAML when it is not a plain scalar.
func yamlString(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+", r)) {
			return "'" + strings.ReplaceAll(s, "'", "''") + "'"
		}
	}
	return s
}

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

func pluginsList(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("plugins list", stderr)
	var af adminclient.Flags
	af.Register(fs)
	asJSON := fs.Bool("json", false, `print {"daemon": ..., "plugins": [...]} (stable field names, see docs/cli.md)`)
	noLaunch := fs.Bool("no-launch", false, "never launch a plugin to read its version (the running daemon's answer only)")
	if code, ok := cli.ParseFlags(fs, args); !ok {
		return code
	}
	if af.Config.Path == "" {
		fmt.Fprintln(stderr, "plugins list: --config FILE is required")
		return cli.ExitUsage
	}
	cfg, code, ok := loadForPlugins(fs, &af.Config, stderr)
	if !ok {
		return code
	}
	daemon, running := daemonPlugins(&af, cfg)
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
			row.PluginVersion, row.Protocol, row.VersionDetail = versionOf(p, row, *noLaunch)
		}
		out.Plugins = append(out.Plugins, row)
	}
	if *asJSON {
		cli.PrintJSON(stdout, out)
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

func pluginsVerify(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("plugins verify", stderr)
	var cf cli.ConfigFlags
	cf.Register(fs)
	if code, ok := cli.ParseFlags(fs, args); !ok {
		return code
	}
	if cf.Path == "" {
		fmt.Fprintln(stderr, "plugins verify: --config FILE is required")
		return cli.ExitUsage
	}
	cfg, code, ok := loadForPlugins(fs, &cf, stderr)
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
		fmt.Fprintf(stderr, "plugins verify: %d of %d plugins would not be started:\n  %s\n", len(bad), len(cfg.Plugins), strings.Join(bad, "\n  "))
		return cli.ExitFailure
	}
	fmt.Fprintf(stdout, "all %d plugins verified\n", len(cfg.Plugins))
	return cli.ExitOK
}

func pluginsRemove(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("plugins remove", stderr)
	var cf cli.ConfigFlags
	cf.Register(fs)
	force := fs.Bool("force", false, "remove the file even though the configuration still references it")
	what, code, ok := parseOperand(fs, args, "NAME (a configured plugin) or FILE (a file in the plugin directory)")
	if !ok {
		return code
	}
	if cf.Path == "" {
		fmt.Fprintln(stderr, "plugins remove: --config FILE is required (to find the plugin directory and what still references the file)")
		return cli.ExitUsage
	}
	cfg, code, ok := loadForPlugins(fs, &cf, stderr)
	if !ok {
		return code
	}
	dir := cfg.PluginDirectory()
	file := ""
	if p, ok := cfg.Plugin(what); ok {
		if p.Builtin != "" {
			fmt.Fprintf(stderr, "plugins remove: plugins.%s is the built-in %s %s, part of the kmirror binary: nothing to remove (delete the entry from %s)\n", what, p.Kind, p.Builtin, cf.Path)
			return cli.ExitFailure
		}
		file = p.File(dir)
	} else {
		file = what
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		if !samePath(filepath.Dir(file), dir) {
			fmt.Fprintf(stderr, "plugins remove: %s is not in the plugin directory %s; remove only removes plugin files\n", file, dir)
			return cli.ExitUsage
		}
	}
	var refs []string
	for i := range cfg.Plugins {
		p := &cfg.Plugins[i]
		if p.Path != "" && samePath(p.File(dir), file) {
			refs = append(refs, "plugins."+p.Name+".path")
		}
	}
	if len(refs) > 0 && !*force {
		fmt.Fprintf(stderr, "plugins remove: %s %s %s: remove the entry from the configuration first (and reload), or pass --force\n", strings.Join(refs, ", "), references(refs), file)
		return cli.ExitFailure
	}
	if fi, err := os.Stat(file); err != nil {
		fmt.Fprintf(stderr, "plugins remove: %v\n", err)
		return cli.ExitFailure
	} else if !fi.Mode().IsRegular() {
		fmt.Fprintf(stderr, "plugins remove: %s is not a regular file\n", file)
		return cli.ExitFailure
	}
	if err := os.Remove(file); err != nil {
		fmt.Fprintf(stderr, "plugins remove: %v\n", err)
		return cli.ExitFailure
	}
	syncDir(dir)
	fmt.Fprintf(stdout, "removed %s\n", file)
	if len(refs) > 0 {
		fmt.Fprintf(stdout, "warning: %s %s it: the daemon cannot start (or restart) that plugin until the entry is removed or the file installed again\n", strings.Join(refs, ", "), references(refs))
	}
	return cli.ExitOK
}

// references is the verb for a list of keys.
func references(keys []string) string {
	if len(keys) == 1 {
		return "still references"
	}
	return "still reference"
}

// orNone is s, or "(none announced)".
func orNone(s string) string {
	if s == "" {
		return "(none announced)"
	}
	return s
}
