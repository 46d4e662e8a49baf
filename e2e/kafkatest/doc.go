// Package kafkatest starts real Apache Kafka clusters for kmirror's
// end-to-end tests.
//
// It owns the whole life of a test cluster: resolving the Kafka jars (it runs
// scripts/kafka/fetch.sh, which pulls them from Maven Central once into a
// cache), generating the certificates, rendering one server.properties per
// node, formatting KRaft storage (SCRAM users included), starting one JVM per
// node on free loopback ports, waiting until every broker serves, and killing
// everything again. A cluster has 1 or 3 nodes; each node is a combined
// broker and controller.
//
// # Listeners
//
// Every node has a CONTROLLER listener and an INTERNAL inter-broker listener,
// both SASL_PLAINTEXT with the PLAIN mechanism and a generated super user
// (see [Cluster.AdminIdentity]); clients never need them except as that super
// user. Client listeners are named after their security protocol:
//
//   - PLAINTEXT, always;
//   - SASL_PLAINTEXT, when [Options.SASL] is set;
//   - SSL, when [Options.TLS] is set (client certificates required when
//     [TLSOptions.ClientAuth] is true);
//   - SASL_SSL, when both are set (no client certificate asked for);
//   - PROXIED, when [Options.FaultProxies] is set: a PLAINTEXT listener
//     each broker advertises at the address of a fault proxy in front of it
//     ([Cluster.Proxy], package faultproxy), so that a test can cut,
//     black-hole, slow or throttle the traffic of the clients that bootstrap
//     there, and only theirs (the benchmark's WAN delay, the e2e fault
//     scenarios).
//
// SSL principals are mapped to the certificate's common name, so a client
// certificate issued for "alice" authenticates as User:alice, the same
// principal as the SASL user alice.
//
// # Processes
//
// JVMs run in their own process group with a parent-death signal (SIGKILL),
// forked from one OS thread that lives as long as the test binary, so a test
// binary that panics, times out or is killed takes its brokers with it.
// [Cluster.Close] kills them and removes the cluster's temporary directory;
// directories left behind by a test binary that died are removed by the next
// [Start]. Set KMIRROR_E2E_KEEP=1 to keep directories (logs, data) for
// debugging.
//
// # Versions
//
// A cluster runs the default Kafka version (Resolve) unless [Options.Dist]
// names another installation ([ResolveVersion]): releases from 3.0 run in
// KRaft mode like 4.x, releases before 3.0 in ZooKeeper mode, with a
// ZooKeeper server started from the same jars (no SCRAM users there). The
// source compatibility matrix (e2e/compat) uses this.
//
// # Environment
//
//   - KMIRROR_KAFKA_LIBS: use this libs directory instead of running fetch.sh
//     (Resolve only);
//   - KMIRROR_KAFKA_VERSION, KMIRROR_KAFKA_CACHE: passed on to fetch.sh;
//   - JAVA_HOME: java is $JAVA_HOME/bin/java when set, else java on PATH.
package kafkatest
