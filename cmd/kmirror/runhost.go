package main

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// builtinServeConfig returns what a built-in plugin serves (the registry
// of plugin_serve.go), for running it in process
// (plugin.builtin.in.process); out of process it runs through `kmirror
// plugin serve`, which serves the same.
func builtinServeConfig(kind plugin.Kind, name string) (plugin.ServeConfig, bool) {
	b, ok := findBuiltin(string(kind), name)
	return b.serve, ok
}

// startPlugins launches the configured plugins, verified and configured,
// or returns nil when there are none. The caller closes the host after
// everything that uses a plugin has stopped.
func startPlugins(ctx context.Context, cfg *config.Config, logger hclog.Logger) (*pluginhost.Host, error) {
	if len(cfg.Plugins) == 0 {
		return nil, nil
	}
	specs := make([]pluginhost.Spec, 0, len(cfg.Plugins))
	for i := range cfg.Plugins {
		p := &cfg.Plugins[i]
		specs = append(specs, pluginhost.Spec{
			Name:    p.Name,
			Kind:    plugin.Kind(p.Kind),
			Path:    p.File(cfg.PluginDirectory()),
			SHA256:  p.SHA256,
			Builtin: p.Builtin,
			Config:  plugin.Config(p.Config),
		})
	}
	h, err := pluginhost.New(specs, pluginhost.Options{
		Logger:    logger,
		InProcess: cfg.PluginBuiltinInProcess,
		Builtins:  builtinServeConfig,
	})
	if err != nil {
		return nil, err
	}
	if err := h.Start(ctx); err != nil {
		return nil, err
	}
	return h, nil
}
