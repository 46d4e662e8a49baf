package plugin

import (
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// ServeConfig says what one plugin binary serves: exactly one of StateStore,
// Auth and Filter is set.
type ServeConfig struct {
	StateStore statestore.Store
	Auth       auth.Provider
	Filter     filter.Filter
	// Logger is the plugin's logger. Nil: JSON lines on stderr, which the
	// host re-logs under plugin.<kind>.<name>.
	Logger hclog.Logger
}

// Kind returns the one kind cfg serves, or an error when none or several
// are set.
func (cfg ServeConfig) Kind() (Kind, error) {
	var kinds []Kind
	if cfg.StateStore != nil {
		kinds = append(kinds, KindStateStore)
	}
	if cfg.Auth != nil {
		kinds = append(kinds, KindAuth)
	}
	if cfg.Filter != nil {
		kinds = append(kinds, KindFilter)
	}
	switch len(kinds) {
	case 0:
		return "", errors.New("plugin: ServeConfig sets no implementation (set one of StateStore, Auth, Filter)")
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
		VersionedPlugins: map[int]goplugin.PluginSet{int(hs.ProtocolVersion): {string(kind): serverPlugin(cfg, kind)}},
		GRPCServer:       goplugin.DefaultGRPCServer,
		Logger:           logger,
	})
}

// serverPlugin is the go-plugin Plugin that serves cfg's implementation of kind.
func serverPlugin(cfg ServeConfig, kind Kind) goplugin.Plugin {
	switch kind {
	case KindStateStore:
		return &stateStorePlugin{impl: cfg.StateStore}
	case KindAuth:
		return &authPlugin{impl: cfg.Auth}
	default:
		return &filterPlugin{impl: cfg.Filter}
	}
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
		p = &stateStorePlugin{}
	case KindAuth:
		p = &authPlugin{}
	default:
		p = &filterPlugin{}
	}
	return map[int]goplugin.PluginSet{int(major): {string(kind): p}}, nil
}
