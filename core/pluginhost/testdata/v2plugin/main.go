// Command v2plugin is a filter plugin speaking protocol major version 2,
// which no kmirror speaks: the host must refuse it.
package main

import (
	"context"
	"os"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/plugin"
)

func main() {
	cfg := plugin.ServeConfig{Filter: filter.Funcs{Name: "v2", Topics: func(_ context.Context, _ string, in []filter.Topic) ([]filter.Topic, error) {
		return in, nil
	}}}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  goplugin.HandshakeConfig{MagicCookieKey: plugin.MagicCookieKey, MagicCookieValue: plugin.MagicCookieValue},
		VersionedPlugins: map[int]goplugin.PluginSet{2: {string(plugin.KindFilter): plugin.ServerPlugin(cfg, plugin.KindFilter)}},
		GRPCServer:       goplugin.DefaultGRPCServer,
		Logger:           hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true}),
	})
}
