// Package plugin holds what the kmirror host and every plugin binary agree on
// before any RPC is made: the go-plugin handshake (a magic cookie, so that a
// plugin binary run by hand says what it is instead of waiting for a host,
// and the major protocol version of each plugin kind) and the names under
// which each kind is dispensed. A major version that differs between host
// and plugin refuses the connection; minor versions and feature flags travel
// in each kind's Info call.
//
// It is also the whole public surface of running a plugin over RPC: Serve
// and ServeConfig on the plugin's side, ClientPlugins on the host's,
// ServerPlugin for tests with go-plugin's TestPluginGRPCConn, and the
// configuration a plugin declares and receives (Schema, Config,
// ConfigError, ConfigClient). The gRPC adaptors of each kind live in
// sdk/internal/authrpc, sdk/internal/filterrpc and
// sdk/internal/statestorerpc (with the generated code in sdk/internal/pb),
// the stand-ins for a plugin not yet configured in sdk/internal/lazy:
// plugins and hosts use only this package and the kinds' contracts
// (sdk/auth, sdk/filter, sdk/statestore).
package plugin

import (
	"fmt"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/kmirror/kmirror/sdk/auth"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// The magic cookie every kmirror plugin checks at start.
const (
	MagicCookieKey   = "KMIRROR_PLUGIN"
	MagicCookieValue = "8b0f3c2e-kmirror-plugin-v1"
)

// Kind is a kind of plugin.
type Kind string

// The plugin kinds (docs/plugins.md).
const (
	KindAuth       Kind = "auth"
	KindStateStore Kind = "statestore"
	KindFilter     Kind = "filter"
)

// StateStoreProtocolMajor is the major version of the state-store protocol
// (statestore.ProtocolMajor).
const StateStoreProtocolMajor = statestore.ProtocolMajor

// Kinds returns every plugin kind.
func Kinds() []Kind { return []Kind{KindAuth, KindStateStore, KindFilter} }

// ProtocolMajor returns the major protocol version of a kind.
func ProtocolMajor(k Kind) (uint, error) {
	switch k {
	case KindAuth:
		return auth.ProtocolMajor, nil
	case KindStateStore:
		return StateStoreProtocolMajor, nil
	case KindFilter:
		return filter.ProtocolMajor, nil
	}
	return 0, fmt.Errorf("plugin: unknown plugin kind %q (known: auth, statestore, filter)", k)
}

// Handshake returns the go-plugin handshake for a kind: host and plugin must
// use the same one.
func Handshake(k Kind) (goplugin.HandshakeConfig, error) {
	major, err := ProtocolMajor(k)
	if err != nil {
		return goplugin.HandshakeConfig{}, err
	}
	return goplugin.HandshakeConfig{ProtocolVersion: major, MagicCookieKey: MagicCookieKey, MagicCookieValue: MagicCookieValue}, nil
}
