// Package kclient turns a cluster's configuration ([config.Cluster], the
// client keys of the destination or of a mirror's source) into franz-go
// client options: seed brokers and client.id, the crypto/tls client
// configuration built from the ssl.* keys, the SASL mechanism of the sasl.*
// keys (PLAIN and SCRAM; OAUTHBEARER tokens come from the auth plugin;
// GSSAPI logs in to the KDC with a keytab through gokrb5), and
// kmirror's own dialer, which applies the socket keys (buffer sizes and the
// connection setup timeout) before the TLS handshake. ClusterOpts adds what
// depends on the client's role (source or destination) and on the
// daemon-wide keys: the read timeout, the retry backoff and the metadata age.
// ImplicitAuth describes the built-in credential provider (an auth plugin
// kmirror runs itself) that serves a cluster's sasl.* keys when
// sasl.credentials.plugin is not set. Health, a kgo hook, tracks whether a
// client can talk to its cluster now (kmirror_cluster_up, describe's
// clusters, the /readyz checks) and logs its failures at a bounded rate.
//
// core/config declares, loads and validates the keys, and
// core/config/security resolves what they name (files, JAAS, inline PEM)
// into security.TLS and security.SASL; this package owns everything from
// there to a kgo.Opt. Files are read again each time options are built, and
// SASL credentials at every connection, so a rotated certificate or
// password file is picked up without a restart. Errors name the key at
// fault and never contain a secret.
package kclient
