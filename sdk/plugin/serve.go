package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/internal/authrpc"
	"github.com/kmirror/kmirror/sdk/internal/filterrpc"
	"github.com/kmirror/kmirror/sdk/internal/lazy"
	"github.com/kmirror/kmirror/sdk/internal/pb/configv1"
	"github.com/kmirror/kmirror/sdk/internal/statestorerpc"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// ServeConfig says what one plugin binary serves: exactly one kind, either
// as a ready implementation (StateStore, Auth or Filter: the plugin takes no
// configuration) or as a constructor the host's configuration feeds
// (NewStateStore, NewAuth or NewFilter, with the Schema of the keys it
// accepts).
type ServeConfig struct {
	StateStore statestore.Store
	Auth       auth.Provider
	Filter     filter.Filter

	// Schema declares the configuration keys the constructor accepts. The
	// host checks the plugin's `config:` block against it (an error names
	// the key), and so does Serve before calling the constructor.
	Schema Schema
	// The constructors: called once, when the host configures the plugin,
	// with the plugin's name in the kmirror configuration and its block.
	// Return a *ConfigError (or an error wrapping ErrInvalidConfig) to
	// refuse a value; it reaches the host naming the key.
	NewStateStore func(ctx context.Context, name string, cfg Config) (statestore.Store, error)
	NewAuth       func(ctx context.Context, name string, cfg Config) (auth.Provider, error)
	NewFilter     func(ctx context.Context, name string, cfg Config) (filter.Filter, error)
	// Logger is the plugin's logger. Nil: JSON lines on stderr, which the
	// host re-logs under plugin.<kind>.<name>.
	Logger hclog.Logger
}

// Kind returns the one kind cfg serves, or an error when none or several
// are set.
func (cfg ServeConfig) Kind() (Kind, error) {
	var kinds []Kind
	if cfg.StateStore != nil || cfg.NewStateStore != nil {
		kinds = append(kinds, KindStateStore)
	}
	if cfg.Auth != nil || cfg.NewAuth != nil {
		kinds = append(kinds, KindAuth)
	}
	if cfg.Filter != nil || cfg.NewFilter != nil {
		kinds = append(kinds, KindFilter)
	}
	set := 0
	for _, ok := range []bool{cfg.StateStore != nil, cfg.NewStateStore != nil, cfg.Auth != nil, cfg.NewAuth != nil, cfg.Filter != nil, cfg.NewFilter != nil} {
		if ok {
			set++
		}
	}
	if len(kinds) == 1 && set > 1 {
		return "", fmt.Errorf("plugin: ServeConfig sets both an implementation and a constructor of %s; set one", kinds[0])
	}
	if err := cfg.Schema.Check(); err != nil {
		return "", err
	}
	if len(cfg.Schema) > 0 && cfg.NewStateStore == nil && cfg.NewAuth == nil && cfg.NewFilter == nil {
		return "", errors.New("plugin: ServeConfig declares a Schema but no constructor (NewStateStore, NewAuth or NewFilter) to take the configuration")
	}
	switch len(kinds) {
	case 0:
		return "", errors.New("plugin: ServeConfig sets no implementation (set one of StateStore, Auth, Filter, or a constructor)")
	case 1:
		return kinds[0], nil
	}
	return "", fmt.Errorf("plugin: ServeConfig sets %d implementations %v; a plugin binary serves exactly one kind", len(kinds), kinds)
}

// Serve runs a plugin: it answers the host's handshake and serves the one
// implementation in cfg over gRPC until the host stops it. A plugin's main
// is a few lines:
//
//	func main() {
//		plugin.Serve(plugin.ServeConfig{Filter: myFilter{}})
//	}
//
// Run by hand (not by a kmirror host), it prints what it is and exits 1.
func Serve(cfg ServeConfig) {
	kind, err := cfg.Kind()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hs, err := Handshake(kind)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.New(&hclog.LoggerOptions{Name: string(kind), Output: os.Stderr, JSONFormat: true, Level: hclog.Info})
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig:  goplugin.HandshakeConfig{MagicCookieKey: hs.MagicCookieKey, MagicCookieValue: hs.MagicCookieValue},
		VersionedPlugins: map[int]goplugin.PluginSet{int(hs.ProtocolVersion): {string(kind): ServerPlugin(cfg, kind)}},
		GRPCServer:       goplugin.DefaultGRPCServer,
		Logger:           logger,
	})
}

// ServerPlugin returns the go-plugin Plugin that serves cfg's kind (as
// returned by cfg.Kind) together with the configuration service; Serve uses
// it, and tests use it with go-plugin's TestPluginGRPCConn.
func ServerPlugin(cfg ServeConfig, kind Kind) goplugin.Plugin {
	cs := &configServer{schema: cfg.Schema, configured: true}
	var inner goplugin.GRPCPlugin
	switch kind {
	case KindStateStore:
		impl := cfg.StateStore
		if cfg.NewStateStore != nil {
			l := &lazy.Store{}
			cs.configured, cs.build, impl = false, func(ctx context.Context, name string, c Config) error {
				s, err := cfg.NewStateStore(ctx, name, c)
				if err != nil {
					return err
				}
				l.Set(s)
				return nil
			}, l
		}
		inner = &statestorerpc.Plugin{Impl: impl}
	case KindAuth:
		impl := cfg.Auth
		if cfg.NewAuth != nil {
			l := &lazy.Auth{}
			cs.configured, cs.build, impl = false, func(ctx context.Context, name string, c Config) error {
				p, err := cfg.NewAuth(ctx, name, c)
				if err != nil {
					return err
				}
				l.Set(p)
				return nil
			}, l
		}
		inner = &authrpc.Plugin{Impl: impl}
	default:
		impl := cfg.Filter
		if cfg.NewFilter != nil {
			l := &lazy.Filter{}
			cs.configured, cs.build, impl = false, func(ctx context.Context, name string, c Config) error {
				f, err := cfg.NewFilter(ctx, name, c)
				if err != nil {
					return err
				}
				l.Set(f)
				return nil
			}, l
		}
		inner = &filterrpc.Plugin{Impl: impl}
	}
	return &withConfig{GRPCPlugin: inner, config: cs}
}

// withConfig adds the configuration service to a kind's plugin.
type withConfig struct {
	goplugin.NetRPCUnsupportedPlugin
	goplugin.GRPCPlugin
	config *configServer
}

// GRPCServer registers the configuration service and the kind's service.
func (w *withConfig) GRPCServer(b *goplugin.GRPCBroker, s *grpc.Server) error {
	configv1.RegisterConfigServer(s, w.config)
	return w.GRPCPlugin.GRPCServer(b, s)
}

// GRPCClient is the kind's client (the host reaches the configuration
// service with NewConfigClient).
func (w *withConfig) GRPCClient(ctx context.Context, b *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return w.GRPCPlugin.GRPCClient(ctx, b, c)
}

// ClientPlugins returns what a host offers a plugin of kind in go-plugin's
// ClientConfig.VersionedPlugins: one set per protocol major version the
// host speaks, holding the kind under its name. Dispensing the kind's name
// from the client yields a statestore.Store, an auth.Provider or a
// filter.Filter.
func ClientPlugins(kind Kind) (map[int]goplugin.PluginSet, error) {
	major, err := ProtocolMajor(kind)
	if err != nil {
		return nil, err
	}
	var p goplugin.Plugin
	switch kind {
	case KindStateStore:
		p = &statestorerpc.Plugin{}
	case KindAuth:
		p = &authrpc.Plugin{}
	default:
		p = &filterrpc.Plugin{}
	}
	return map[int]goplugin.PluginSet{int(major): {string(kind): p}}, nil
}
