// Package config owns kmirror's configuration: the declaration of every key
// (name, scope, type, default, validation and documentation, in one table),
// decoding and validating what Load reads, and the typed structs the rest
// of the daemon reads (Config, Cluster, Mirror, State). Reading the YAML or
// TOML file and layering the KMIRROR_* environment variables and --set
// overrides over it, into sections not yet decoded, is core/config/raw's
// job; this package gives it the names each variable may set.
//
// Key names and defaults are KIP-1279's, verbatim, wherever the KIP defines
// them; kmirror's own keys are few and marked as such in the generated
// reference (docs/config.md, rendered by core/config/reference).
//
// Load collects every problem it finds and returns them together as *Errors,
// each naming the key path (for example mirrors[dc1-to-dc2].sasl.mechanism)
// and the reason. Secret values are held in Secret, which never prints its
// value; no error message, summary or dump contains a secret.
//
// The package stops at the keys. What a cluster's security keys name
// (Cluster.SASL: credentials from sasl.* and sasl.jaas.config; Cluster.TLS:
// truststore, keystore and versions from ssl.*) and the admin API's
// certificates and token are resolved by core/config/security, which Load
// calls so that it reports an unreadable file or a bad JAAS line by key;
// building franz-go client options from them (the crypto/tls
// configuration, SASL mechanisms, socket options, kmirror's dialer, the
// built-in credential provider of the sasl.* keys) is core/kclient's job,
// and the reference (docs/config.md) is rendered by core/config/reference.
package config
