package cli

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kmirror/kmirror/core/config"
)

// Environment variables the command line reads for itself; the
// configuration loader does not take them for configuration keys.
const (
	// EnvConfig names the configuration file when --config is not given.
	EnvConfig = "KMIRROR_CONFIG"
	// EnvAdminToken holds the admin API's bearer token itself, for the
	// admin commands (a file given with --admin-token-file wins).
	EnvAdminToken = "KMIRROR_ADMIN_TOKEN"
)

// ReservedEnv are the KMIRROR_ variables that are not configuration keys.
var ReservedEnv = []string{EnvConfig, EnvAdminToken}

// stdinName labels a configuration read from standard input.
const stdinName = "standard input"

// maxStdinConfig bounds a configuration read from standard input.
const maxStdinConfig = config.MaxFileBytes

// ConfigFlags are the flags every command that reads a configuration shares.
type ConfigFlags struct {
	Path string     // --config, else $KMIRROR_CONFIG; "-" is standard input
	Sets StringList // --set, in order
	data []byte     // the content read from standard input
}

// Register adds --config and --set to fs; what says what the file is for
// the command ("configuration file", "the daemon's configuration file...").
func (c *ConfigFlags) Register(fs *pflag.FlagSet, what string) {
	if what == "" {
		what = "the configuration file (YAML, or TOML with a .toml extension)"
	}
	// The help shows --config FILE: the first `quoted` word names the value.
	what = strings.Replace(what, "configuration file", "configuration `FILE`", 1)
	fs.StringVar(&c.Path, "config", "", what+"; - reads YAML from standard input; default $"+EnvConfig)
	fs.Var(&c.Sets, "set", "override one key as `KEY=VALUE`, e.g. --set mirror.num.replica.fetchers=2 (repeatable; wins over the file and KMIRROR_* variables)")
}

// Resolve takes $KMIRROR_CONFIG when --config is not given and reads
// standard input for --config -. It reports whether a configuration is
// named at all.
func (c *ConfigFlags) Resolve(stdin io.Reader) (bool, error) {
	if c.Path == "" {
		c.Path = os.Getenv(EnvConfig)
	}
	if c.Path != "-" || c.data != nil {
		return c.Path != "", nil
	}
	data, err := io.ReadAll(io.LimitReader(stdin, maxStdinConfig+1))
	if err != nil {
		return true, Failf("--config -: reading standard input: %v", err)
	}
	if len(data) > maxStdinConfig {
		return true, Failf("--config -: the configuration on standard input is larger than %d MiB", maxStdinConfig>>20)
	}
	c.data = data
	return true, nil
}

// Name is the configuration's name for messages: the file, or "standard
// input".
func (c *ConfigFlags) Name() string {
	if c.Path == "-" {
		return stdinName
	}
	return c.Path
}

// Source is where the configuration comes from: the file (or standard
// input), the process's KMIRROR_* variables and the --set overrides.
func (c *ConfigFlags) Source() config.Source {
	src := config.Source{Path: c.Path, Env: os.Environ(), Sets: c.Sets, Reserved: ReservedEnv}
	if c.Path == "-" {
		src.Path, src.Data = stdinName, c.data
		if src.Data == nil {
			src.Data = []byte{}
		}
	}
	return src
}

// Load resolves the configuration's name, requires one and loads it with
// load (config.Load, or a loader of fewer keys such as
// config.LoadForPlugins). An invalid configuration is ExitFailure.
func (c *ConfigFlags) Load(stdin io.Reader, load func(config.Source) (*config.Config, error)) (*config.Config, error) {
	named, err := c.Resolve(stdin)
	if err != nil {
		return nil, err
	}
	if !named {
		return nil, Usagef("--config FILE is required (or set %s)", EnvConfig)
	}
	cfg, err := load(c.Source())
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return nil, Failf("cannot read the configuration: %v", err)
	}
	if err != nil {
		return nil, Failf("%s is not valid:\n%v", c.Name(), err)
	}
	return cfg, nil
}
