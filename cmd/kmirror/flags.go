package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kmirror/kmirror/core/config"
)

// stringList is a repeatable string flag (--set k=v --set k2=v2).
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// configFlags are the flags every command that reads a configuration shares.
type configFlags struct {
	path string
	sets stringList
}

func (c *configFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.path, "config", "", "configuration file (YAML, or TOML with a .toml extension); required")
	fs.Var(&c.sets, "set", "override one key, e.g. --set mirror.num.replica.fetchers=2 or --set destination.bootstrap.servers=h:9092 (repeatable; wins over the file and KMIRROR_* variables)")
}

func (c *configFlags) source() config.Source {
	return config.Source{Path: c.path, Env: os.Environ(), Sets: c.sets}
}

// newFlagSet returns a FlagSet that reports errors to stderr and does not exit.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kmirror "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args and maps -h and flag errors to exit codes; ok is false
// when the caller must return code.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage, false
	}
	return 0, true
}

// parseAndLoad parses args into fs (where c and the command's own flags are
// registered), requires --config and loads the configuration. ok is false
// when the caller must return code.
func (c *configFlags) parseAndLoad(fs *flag.FlagSet, args []string, stderr io.Writer) (cfg *config.Config, code int, ok bool) {
	if code, ok := parseFlags(fs, args); !ok {
		return nil, code, false
	}
	if c.path == "" {
		fmt.Fprintf(stderr, "%s: --config FILE is required\n", fs.Name())
		return nil, exitUsage, false
	}
	cfg, err := config.Load(c.source())
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s is not valid:\n%v\n", fs.Name(), c.path, err)
		return nil, exitFailure, false
	}
	return cfg, 0, true
}
