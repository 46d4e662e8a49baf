// Package soak runs kmirror for a long time under mixed traffic and
// repeated faults, and judges whether it holds up (issue #17, item 3;
// docs/reliability.md).
//
// TestSoak starts a three-broker source cluster and a one-broker
// destination, both with fault proxies (e2e/kafkatest), and one kmirror
// daemon that reaches both through the proxies. For the soak's duration it
// writes transactional (committed and aborted) and plain records to several
// topics, and injects a fault at random intervals: the daemon killed with
// SIGKILL and restarted, a source broker killed or stopped and restarted,
// the network to the source or to the destination cut for some seconds.
// Every few seconds it samples the daemon's resident set (with its child
// processes), goroutines, open file descriptors and total lag. At the end it
// stops the faults and the traffic, waits for kmirror to catch up and
// compares every partition of every topic record by record; it writes the
// samples (CSV), one PNG plot per figure and a summary into the artifacts
// directory, and fails when a record differs or a figure grows without
// bound (Judge).
//
// The non-test files hold what the driver needs that can be tested without
// Kafka: sampling (Reader), judging (Judge) and plotting (WritePlots).
//
// Settings come from the environment (`make soak DURATION=2h`,
// `make soak-quick`):
//
//   - SOAK_DURATION: how long traffic and faults run (default 2m, the quick
//     variant `make test` runs);
//   - SOAK_SEED: the seed of the fault schedule and the traffic (default:
//     from the clock; printed at the start, so a run can be repeated);
//   - SOAK_OUT: the artifacts directory (default e2e/artifacts/soak).
package soak
