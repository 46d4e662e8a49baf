package main

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/builtins"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kclient"
	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// builtinServeConfig returns what a built-in plugin serves (the registry
// of package builtins), for running it in process
// (plugin.builtin.in.process); out of process it runs through `kmirror
// plugin serve`, which serves the same.
func builtinServeConfig(kind plugin.Kind, name string) (plugin.ServeConfig, bool) {
	b, ok := builtins.Find(string(kind), name)
	return b.Serve, ok
}

// stateStorePlugin is the name of the built-in file store's plugin when
// state.type is file. Names kmirror gives its own plugins start with
// "kmirror-", which configured plugins may not use.
const stateStorePlugin = config.ReservedPluginPrefix + "state"

// plugins is what the daemon gets from its plugin host: the state store,
// SASL credentials and filter plugins, all through the one RPC path.
type plugins struct {
	host *pluginhost.Host
}

// startPlugins launches the configured plugins and the state store's,
// verified and configured. The caller closes the host after everything
// that uses a plugin has stopped.
func startPlugins(ctx context.Context, cfg *config.Config, logger hclog.Logger) (*plugins, error) {
	specs := make([]pluginhost.Spec, 0, len(cfg.Plugins)+1)
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
	if cfg.State.Type == config.StateTypeFile {
		specs = append(specs, pluginhost.Spec{Name: stateStorePlugin, Kind: plugin.KindStateStore, Builtin: "file", Config: plugin.Config{"dir": cfg.State.Dir}})
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
	return &plugins{host: h}, nil
}

// Close stops every plugin.
func (p *plugins) Close() error { return p.host.Close() }

// store returns the state store: the built-in file store's plugin, or the
// statestore plugin state.plugin names.
func (p *plugins) store(cfg *config.Config) (statestore.Store, error) {
	name := stateStorePlugin
	if cfg.State.Type == config.StateTypePlugin {
		name = cfg.State.Plugin
	}
	s, err := p.host.StateStore(name)
	if err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	return s, nil
}

// credentials gives a SASL client its provider: the plugin that
// sasl.credentials.plugin names, or the built-in kmirror runs for the
// cluster from its sasl.* keys (kclient.ImplicitAuth), started on first use
// and restarted with a new block when those keys change.
func (p *plugins) credentials(ctx context.Context, cl *config.Cluster, req auth.Request) (auth.Provider, error) {
	if cl.SASLCredentialsPlugin != "" {
		return p.host.Auth(cl.SASLCredentialsPlugin)
	}
	name, builtin, block, err := kclient.ImplicitAuth(cl, req)
	if err != nil {
		return nil, err
	}
	if err := p.host.Ensure(ctx, pluginhost.Spec{Name: name, Kind: plugin.KindAuth, Builtin: builtin, Config: plugin.Config(block)}); err != nil {
		return nil, err
	}
	return p.host.Auth(name)
}

var _ kclient.Credentials = (*plugins)(nil).credentials
