package plugincmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/sdk/plugin"
)

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

// installFlags are the flags of `plugins install`.
type installFlags struct {
	cf    cli.ConfigFlags
	kind  string
	name  string
	dir   string
	force bool
	out   cli.Output
}

func newInstall() *cobra.Command {
	var f installFlags
	cmd := &cobra.Command{
		Use:   "install PATH --kind auth|statestore|filter",
		Short: "Copy a plugin executable into the plugin directory and print its entry",
		Long: `Copy a plugin executable into the plugin directory (mode 0755), prove it a
kmirror plugin of --kind by launching it once, and print the plugins: entry to
add (name, kind, path, sha256). kmirror never edits the configuration file.
Installing the same file again is a no-op.`,
		Example: cli.Examples(
			"kmirror plugins install ./kmirror-filter-pii --kind filter --config kmirror.yaml",
			"kmirror plugins install ./vault-auth --kind auth --name vault --plugin-dir /var/lib/kmirror/plugins -o json"),
		Args: exactlyOne("PATH (the plugin's executable)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Code(pluginsInstall(&f, args[0], cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	fl := cmd.Flags()
	f.cf.Register(fl, "the daemon's configuration file, for plugin.dir (or --plugin-dir)")
	fl.StringVar(&f.kind, "kind", "", "what the plugin supplies: auth, statestore or filter (required)")
	fl.StringVar(&f.name, "name", "", "the plugin's name in the plugins: map (default: the file name without a kmirror-<kind>- prefix)")
	fl.StringVar(&f.dir, "plugin-dir", "", "install into this `DIR` (default: the configuration's plugin.dir, else <state.dir>/plugins)")
	fl.BoolVar(&f.force, "force", false, "replace a different file of the same name in the plugin directory")
	f.out.Register(fl)
	return cmd
}

func pluginsInstall(f *installFlags, src string, stdin io.Reader, stdout, stderr io.Writer) int {
	kind, name, dir, force, cf := &f.kind, &f.name, &f.dir, &f.force, &f.cf
	if _, err := cf.Resolve(stdin); err != nil {
		fmt.Fprintf(stderr, "kmirror plugins install: %v\n", err)
		return cli.ExitFailure
	}
	k := plugin.Kind(*kind)
	if _, err := plugin.ProtocolMajor(k); err != nil {
		fmt.Fprintf(stderr, "kmirror plugins install: --kind %q: give auth, statestore or filter\n", *kind)
		return cli.ExitUsage
	}
	if cf.Path == "" && *dir == "" {
		fmt.Fprintln(stderr, "kmirror plugins install: --config FILE (the daemon's configuration, for plugin.dir) or --plugin-dir DIR is required")
		return cli.ExitUsage
	}
	var cfg *config.Config
	if cf.Path != "" {
		var code int
		var ok bool
		if cfg, code, ok = loadForPlugins("kmirror plugins install", cf, stdin, stderr); !ok {
			return code
		}
	}
	base := filepath.Base(src)
	if *name == "" {
		*name = strings.ToLower(strings.TrimPrefix(base, "kmirror-"+*kind+"-"))
		if config.CheckPluginName(*name) != nil {
			fmt.Fprintf(stderr, "kmirror plugins install: %q does not make a plugin name ([a-z0-9][a-z0-9_-]*); pass --name\n", base)
			return cli.ExitUsage
		}
	} else if err := config.CheckPluginName(*name); err != nil {
		fmt.Fprintf(stderr, "kmirror plugins install: --name: %v\n", err)
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
		fmt.Fprintf(stderr, "kmirror plugins install: %v\n", err)
		return cli.ExitFailure
	}
	res.Path = res.File
	if relative {
		res.Path = filepath.Base(res.File)
	}
	res.Block = pluginBlock(res)
	if f.out.Structured() {
		f.out.Print(stdout, res, nil)
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
