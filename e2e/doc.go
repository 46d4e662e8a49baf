// Package e2e holds kmirror's end-to-end tests: they run against real Apache
// Kafka brokers started by the kafkatest harness (e2e/kafkatest), with
// franz-go and Kafka's own command-line tools as clients. The clusters are
// started once per test binary in TestMain and shared; every test uses its own
// topic names.
package e2e
