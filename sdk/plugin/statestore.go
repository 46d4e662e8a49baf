package plugin

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// stateStorePlugin carries a statestore.Store over gRPC (service kmirror.plugin.statestore.v1).
// STUB: the RPC adaptors are being written.
type stateStorePlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	impl statestore.Store
}

// GRPCServer registers the plugin side of the service.
func (p *stateStorePlugin) GRPCServer(_ *goplugin.GRPCBroker, _ *grpc.Server) error {
	return nil // STUB: registers nothing yet, so that a plugin process starts and answers health checks
}

// GRPCClient returns the host side: a statestore.Store.
func (p *stateStorePlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, _ *grpc.ClientConn) (any, error) {
	return nil, errors.New("plugin: the statestore protocol is not implemented yet")
}
