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
//     chainable.
//   - plugin: the go-plugin handshake (magic cookie, major protocol version
//     per kind) that host and plugin binaries agree on.
//
// Packages below sdk document the contract a plugin must meet; conformance
// suites (statestore/storetest, auth/authtest, filter/filtertest) let an implementation prove it.
package sdk
