// Package kerberos holds kmirror's end-to-end tests of SASL/GSSAPI against
// a real KDC: TestMain runs MIT Kerberos (Debian's krb5-kdc: krb5kdc in the
// foreground on a loopback port, its database made with kdb5_util, the
// principals and keytabs with kadmin.local) and two one-broker Apache Kafka
// clusters whose SASL_PLAINTEXT listeners take GSSAPI, the source and the
// destination of a kmirror daemon that logs in to both with a keytab. The
// tests compare both clusters record by record, fail a partition with a
// wrong keytab and recover it with the right one, and grep the daemon's log
// for every key of the test's keytabs. `make test` runs them as part of
// ./e2e/...; scripts/install-deps.sh installs the Kerberos packages.
package kerberos
