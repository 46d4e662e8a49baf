// Package plugincmd is `kmirror plugins`: install a plugin file (copied,
// proven a plugin of its kind, and the configuration entry printed), list
// and verify the configured plugins, and remove a plugin file. It never
// edits the configuration file.
package plugincmd

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

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

// Run is `kmirror plugins <sub-command>`: install, list, verify and remove.
func Run(args []string, stdout, stderr io.Writer) int {
	return cli.Family{Name: "plugins", Flags: "[flags]", Footer: "kmirror never edits the configuration file: install prints the entry to add.", Subs: []cli.Sub{
		{Name: "install", Usage: "install PATH --kind auth|statestore|filter [--name NAME] (--config FILE | --plugin-dir DIR) [--force] [--json]", Run: pluginsInstall},
		{Name: "list", Usage: "list --config FILE [--json]", Run: pluginsList},
		{Name: "verify", Usage: "verify --config FILE", Run: pluginsVerify},
		{Name: "remove", Usage: "remove NAME|FILE --config FILE [--force]", Run: pluginsRemove},
	}}.Run(args, stdout, stderr)
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
