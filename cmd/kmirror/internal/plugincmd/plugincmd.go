// Package plugincmd is `kmirror plugins`: install a plugin file (copied,
// proven a plugin of its kind, and the configuration entry printed), list
// and verify the configured plugins, and remove a plugin file. It never
// edits the configuration file.
package plugincmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/config"
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

// Command is `kmirror plugins`: install, list, verify and remove.
func Command() *cobra.Command {
	cmd := cli.Group(&cobra.Command{
		Use:   "plugins",
		Short: "Install, list, verify and remove plugin files",
		Long: `Manage plugin files (docs/plugins.md). None of these commands edits the
configuration file: install prints the entry to add; reload (SIGHUP) or
restart kmirror run to use it. They read only the configuration keys they
need (plugin.dir, admin.*, state, plugins), so a destination password file the
operator cannot read does not stop them.`,
		Example: cli.Examples(
			"kmirror plugins install ./kmirror-filter-pii --kind filter --config kmirror.yaml",
			"kmirror plugins verify --config kmirror.yaml"),
	})
	cmd.AddCommand(newInstall(), newList(), newVerify(), newRemove())
	return cmd
}

// exactlyOne requires one positional argument, named what in the message.
func exactlyOne(what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return cli.Usagef("give exactly one %s (got %d)", what, len(args))
		}
		return nil
	}
}

// loadForPlugins loads the configuration the plugin commands read (no
// destination, no mirrors: see config.LoadForPlugins).
func loadForPlugins(name string, cf *cli.ConfigFlags, stdin io.Reader, stderr io.Writer) (*config.Config, int, bool) {
	cfg, err := cf.Load(stdin, config.LoadForPlugins)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		var e *cli.Error
		if errors.As(err, &e) {
			return nil, e.Code, false
		}
		return nil, cli.ExitFailure, false
	}
	return cfg, 0, true
}

// samePath reports whether a and b name the same directory.
func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

// syncDir makes a rename in dir durable (best effort).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// orNone is s, or "(none announced)".
func orNone(s string) string {
	if s == "" {
		return "(none announced)"
	}
	return s
}
