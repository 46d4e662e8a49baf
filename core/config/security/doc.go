// Package security resolves what kmirror's security keys name: a cluster's
// SASL credentials (sasl.username with sasl.password or
// sasl.password.file, Kafka's sasl.jaas.config syntax, the
// sasl.oauthbearer.* client credentials) and TLS material (PEM truststores
// and keystores, in files or inline, and ssl.enabled.protocols), and the
// admin API's listener certificate and client CA.
//
// core/config decodes the keys into [Keys] (embedded in config.Cluster)
// and reports every [Problem] by key when it loads a file; core/kclient
// turns the resolved [TLS] and [SASL] into franz-go client options. Files
// are read again at every call, so rotated certificates and passwords are
// picked up. Problems and errors name the key at fault and never contain a
// secret or key material.
package security
