package plugin

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kmirror/kmirror/sdk/filter"
)

// filterPlugin carries a filter.Filter over gRPC (service kmirror.plugin.filter.v1).
// STUB: the RPC adaptors are being written.
type filterPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	impl filter.Filter
}

// GRPCServer registers the plugin side of the service.
func (p *filterPlugin) GRPCServer(_ *goplugin.GRPCBroker, _ *grpc.Server) error {
	return nil // STUB: registers nothing yet, so that a plugin process starts and answers health checks
}

// GRPCClient returns the host side: a filter.Filter.
func (p *filterPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, _ *grpc.ClientConn) (any, error) {
	return nil, errors.New("plugin: the filter protocol is not implemented yet")
}
