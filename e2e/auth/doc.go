// Package auth holds kmirror's end-to-end tests of the authentication
// mechanisms that e2e/ does not cover, on real Apache Kafka: SASL/GSSAPI
// against a real KDC, PLAIN and SCRAM-SHA-256 over SASL_SSL, and mutual TLS
// (e2e/ runs SCRAM-SHA-512 and OAUTHBEARER with the auth plugins).
//
// TestMain runs MIT Kerberos (Debian's krb5-kdc: krb5kdc in the foreground
// on a loopback port, its database made with kdb5_util, the principals and
// keytabs with kadmin.local) and two one-broker clusters, the source and
// the destination of the tests' kmirror daemons, whose listeners take
// GSSAPI, PLAIN, SCRAM-SHA-256 and client certificates. The tests compare
// both clusters record by record, fail a partition with a wrong keytab and
// recover it with the right one, and grep each daemon's log for every
// secret it was given (the keytabs' keys, the password, the client key).
// `make test` runs them as part of ./e2e/...; scripts/install-deps.sh
// installs the Kerberos packages.
package auth
