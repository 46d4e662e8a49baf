// Package sdk is the public, stable surface shared by kmirror and its plugins.
//
// It is its own Go module (github.com/kmirror/kmirror/sdk) and imports nothing
// else from kmirror, so a third party can build a plugin against it without
// pulling in the daemon. Each plugin kind has its own package:
//
//   - statestore: a versioned key-value store with compare-and-set, paged
//     listing and leases, holding partition state, offset maps and last
//     mirrored offsets, plus the key layout every store and tool agrees on.
//   - auth: credential providers for source and destination clients (SASL
//     PLAIN/SCRAM credentials, OAUTHBEARER tokens).
//   - filter: decisions over batches of topics, groups and ACL bindings,
//     chainable; filter/kiprules holds KIP-1279's include/exclude rules,
//     which the engine's scope and the regex filter plugin share.
//   - plugin: the go-plugin handshake (magic cookie, major protocol version
//     per kind) that host and plugin binaries agree on, Serve for a plugin's
//     main, ClientPlugins for a host, and the configuration a plugin
//     declares (Schema) and receives (Config, ConfigError).
//
// Below sdk/internal, and not importable from outside the module: the code
// generated from sdk/proto (internal/pb), the gRPC adaptors that carry each
// kind's contract over the wire (internal/authrpc, internal/filterrpc,
// internal/statestorerpc), the stand-ins a plugin serves until the host
// configures it (internal/lazy) and the sentinel-error tables they share
// (internal/rpcerr).
//
// Packages below sdk document the contract a plugin must meet; conformance
// suites (statestore/storetest, auth/authtest, filter/filtertest) let an implementation prove it.
package sdk
