package doctor

import (
	"context"
	"fmt"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/builtins"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kclient"
	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// inProcessCredentials serves a cluster's SASL credentials from its sasl.*
// keys through the same built-in auth provider the daemon runs
// (kclient.ImplicitAuth), but in this process: doctor starts no plugin
// host. A cluster whose credentials come from sasl.credentials.plugin is
// refused with a message saying so.
func inProcessCredentials(ctx context.Context, cl *config.Cluster, req auth.Request) (auth.Provider, error) {
	if cl.SASLCredentialsPlugin != "" {
		return nil, fmt.Errorf("the credentials come from plugin %q (sasl.credentials.plugin), which doctor does not start: check SASL with the daemon (kmirror run logs the authentication)", cl.SASLCredentialsPlugin)
	}
	name, builtin, block, err := kclient.ImplicitAuth(cl, req)
	if err != nil {
		return nil, err
	}
	b, ok := builtins.Find(string(plugin.KindAuth), builtin)
	if !ok || b.Serve.NewAuth == nil {
		return nil, fmt.Errorf("built-in auth plugin %q is missing from this binary", builtin)
	}
	return b.Serve.NewAuth(ctx, name, plugin.Config(block))
}

var _ kclient.Credentials = inProcessCredentials
