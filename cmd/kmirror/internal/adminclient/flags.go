package adminclient

import (
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/config"
)

// envAdminAddress is the environment variable of the admin.address key;
// without a configuration it gives --admin-address its default, so that
// the daemon and the commands can share one environment.
const envAdminAddress = config.EnvPrefix + "ADMIN_ADDRESS"

// Register adds the flags that locate and authenticate to the admin API
// to fs.
func (a *Flags) Register(fs *pflag.FlagSet) {
	a.Config.Register(fs, "the daemon's configuration file: only its admin keys are read (admin.address, admin.token.file or <state.dir>/admin.token, admin.tls.*); not needed with --admin-address")
	fs.StringVar(&a.Address, "admin-address", "", "admin API address `HOST:PORT` (https://HOST:PORT for TLS); overrides admin.address; default $"+envAdminAddress)
	fs.StringVar(&a.tokenFile, "admin-token-file", "", "`FILE` holding the admin API's bearer token; default $"+cli.EnvAdminToken+" (the token itself), else the configuration's admin.token.file or <state.dir>/admin.token")
	fs.StringVar(&a.tokenFile, "token-file", "", "same as --admin-token-file")
	_ = fs.MarkHidden("token-file")
	fs.StringVar(&a.tlsCA, "tls-ca", "", "PEM `FILE` of the CA that signed the admin API's certificate (default with --config: trust admin.tls.cert.file itself)")
	fs.StringVar(&a.tlsCert, "tls-cert", "", "PEM client certificate `FILE`, for an admin API that requires client certificates (mTLS)")
	fs.StringVar(&a.tlsKey, "tls-key", "", "PEM private key `FILE` of --tls-cert")
}

// Connect builds the client from the parsed flags: with a configuration
// (--config, --config - or $KMIRROR_CONFIG) it reads only the daemon's
// admin keys (config.LoadForPlugins: no destination, no mirrors, so a
// password file the operator cannot read does not stop it); without one,
// --admin-address (or $KMIRROR_ADMIN_ADDRESS) and the token from
// --admin-token-file or $KMIRROR_ADMIN_TOKEN are enough.
func (a *Flags) Connect(stdin io.Reader) (*Client, error) {
	cfg, err := a.Load(stdin)
	if err != nil {
		return nil, err
	}
	c, err := a.Client(cfg)
	if err != nil {
		return nil, cli.Fail(err)
	}
	return c, nil
}

// Load checks the flags and loads the daemon's admin keys when a
// configuration is named; cfg is nil without one.
func (a *Flags) Load(stdin io.Reader) (cfg *config.Config, err error) {
	if (a.tlsCert == "") != (a.tlsKey == "") {
		return nil, cli.Usagef("--tls-cert and --tls-key go together")
	}
	a.token = os.Getenv(cli.EnvAdminToken)
	named, err := a.Config.Resolve(stdin)
	if err != nil {
		return nil, err
	}
	if !named && a.Address == "" {
		a.Address = os.Getenv(envAdminAddress)
	}
	if !named && a.Address == "" {
		return nil, cli.Usagef("say where the admin API is: --admin-address HOST:PORT (with --admin-token-file FILE or $%s), or --config FILE (the daemon's configuration)", cli.EnvAdminToken)
	}
	if !named {
		return nil, nil
	}
	return a.Config.Load(stdin, config.LoadForPlugins)
}
