package plugin

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kmirror/kmirror/sdk/auth"
)

// authPlugin carries a auth.Provider over gRPC (service kmirror.plugin.auth.v1).
// STUB: the RPC adaptors are being written.
type authPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	impl auth.Provider
}

// GRPCServer registers the plugin side of the service.
func (p *authPlugin) GRPCServer(_ *goplugin.GRPCBroker, _ *grpc.Server) error {
	return nil // STUB: registers nothing yet, so that a plugin process starts and answers health checks
}

// GRPCClient returns the host side: a auth.Provider.
func (p *authPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, _ *grpc.ClientConn) (any, error) {
	return nil, errors.New("plugin: the auth protocol is not implemented yet")
}
