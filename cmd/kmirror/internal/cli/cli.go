// Package cli is what every kmirror command shares on the command line:
// the exit codes, flag sets that report to stderr and do not exit, the
// --config and --set flags that load a configuration, and the small
// renderings of JSON and table cells the commands print alike.
package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/core/config"
)

// Exit codes, stable and documented in docs/cli.md.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command ran and failed (invalid config, runtime error)
	ExitUsage   = 2 // the command line itself is wrong
)

// StringList is a repeatable string flag (--set k=v --set k2=v2).
type StringList []string

// String implements flag.Value.
func (s *StringList) String() string { return strings.Join(*s, ",") }

// Set implements flag.Value: each use appends one value.
func (s *StringList) Set(v string) error { *s = append(*s, v); return nil }

// ConfigFlags are the flags every command that reads a configuration shares.
type ConfigFlags struct {
	Path string     // --config
	Sets StringList // --set, in order
}

// Register adds --config and --set to fs.
func (c *ConfigFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.Path, "config", "", "configuration file (YAML, or TOML with a .toml extension); required")
	fs.Var(&c.Sets, "set", "override one key, e.g. --set mirror.num.replica.fetchers=2 or --set destination.bootstrap.servers=h:9092 (repeatable; wins over the file and KMIRROR_* variables)")
}

// Source is where the configuration comes from: the file, the process's
// KMIRROR_* variables and the --set overrides.
func (c *ConfigFlags) Source() config.Source {
	return config.Source{Path: c.Path, Env: os.Environ(), Sets: c.Sets}
}

// NewFlagSet returns a FlagSet that reports errors to stderr and does not exit.
func NewFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kmirror "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// ParseFlags parses args and maps -h and flag errors to exit codes; ok is false
// when the caller must return code.
func ParseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return ExitOK, false
		}
		return ExitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return ExitUsage, false
	}
	return 0, true
}

// ParseAndLoad parses args into fs (where c and the command's own flags are
// registered), requires --config and loads the configuration. ok is false
// when the caller must return code.
func (c *ConfigFlags) ParseAndLoad(fs *flag.FlagSet, args []string, stderr io.Writer) (cfg *config.Config, code int, ok bool) {
	if code, ok := ParseFlags(fs, args); !ok {
		return nil, code, false
	}
	if c.Path == "" {
		fmt.Fprintf(stderr, "%s: --config FILE is required\n", fs.Name())
		return nil, ExitUsage, false
	}
	cfg, err := config.Load(c.Source())
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s is not valid:\n%v\n", fs.Name(), c.Path, err)
		return nil, ExitFailure, false
	}
	return cfg, 0, true
}

// PrintJSON writes v as indented JSON, the form of every --json output.
func PrintJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// OrDash is s, or "-" for an empty table cell.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Num is an offset or a lag for a table cell: "-" when unknown (negative).
func Num(v int64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}

// Sub is one sub-command of a command family (`kmirror mirrors pause`).
type Sub struct {
	Name  string
	Usage string // the line after "kmirror <family> " in the usage text
	Run   func(args []string, stdout, stderr io.Writer) int
}

// Family is a command made of sub-commands.
type Family struct {
	Name   string // "mirrors"
	Flags  string // common flags shown in the usage line, e.g. "--config FILE [flags]"
	Footer string // a sentence after "Run `kmirror <family> <sub-command> -h` for every flag."
	Subs   []Sub
}

// Run runs the sub-command args[0]: no argument prints the usage to stderr
// (ExitUsage), -h/--help/help prints it to stdout (ExitOK), an unknown one
// says so and prints it to stderr (ExitUsage).
func (f Family) Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		f.usage(stderr)
		return ExitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		f.usage(stdout)
		return ExitOK
	}
	for _, s := range f.Subs {
		if s.Name == args[0] {
			return s.Run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "kmirror %s: unknown sub-command %q\n", f.Name, args[0])
	f.usage(stderr)
	return ExitUsage
}

func (f Family) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: kmirror %s <sub-command> %s; sub-commands:\n", f.Name, f.Flags)
	for _, s := range f.Subs {
		fmt.Fprintf(w, "  kmirror %s %s\n", f.Name, s.Usage)
	}
	line := fmt.Sprintf("Run `kmirror %s <sub-command> -h` for every flag.", f.Name)
	if f.Footer != "" {
		line += " " + f.Footer
	}
	fmt.Fprintln(w, line)
}
