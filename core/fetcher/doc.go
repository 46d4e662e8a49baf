// Package fetcher owns the source side of kmirror's data path: it reads the
// record batches of every mirrored partition from the source cluster, as raw
// bytes, the way a Kafka follower's replica fetcher does, but as a consumer
// (ReplicaID -1, read_uncommitted, so transactional data and markers arrive
// as the log holds them).
//
// One Manager serves one mirror. Partitions are grouped by their current
// source leader and spread over mirror.num.replica.fetchers fetchers per
// leader (fetcher id = Kafka's hash(topic, partition) % n). Each (leader,
// fetcher id) pair is one session: one goroutine with one long poll in
// flight for all of its partitions, with an incremental fetch session
// (KIP-227) when the broker grants one, and topic IDs (Fetch v13+) when
// every topic has one. A partition that becomes fetchable while the long
// poll is out (added, placed, resumed) gets a release fetch at once: a
// sessionless, no-wait FetchRequest on a client of its own, so it does not
// wait up to replica.fetch.wait.max.ms for the long poll to return. Batches are never decoded: core/batch cuts the
// response's Records bytes into whole, CRC-checked batches that are handed
// to the partition's Sink as views into the response.
//
// The Manager (this package) adds, removes and places partitions; the rest
// lives in sub-packages: internal/session (the sessions and the partitions'
// cursors they move), delivery (the Fetched, Sink, Queue and errors a
// partition's consumer sees, also named here), internal/budget (the
// Budget's mechanism and each partition's Ledger) and internal/wire (the
// Kafka requests and responses that carry no state).
//
// # Partition life cycle
//
//	Add --> WAITING_FOR_LEADER --(metadata names a leader)--> FETCHING <--> PAUSED
//	              ^                                               |   (too much buffered /
//	              +----(retriable error; waits the backoff)-------+    Done catches up)
//
//	WAITING_FOR_LEADER, FETCHING, PAUSED --(fatal error, delivered once)--> FAILED
//	any state --Remove--> gone (Add it again to fetch it anew)
//
// Fatal errors (delivered, never retried here, so the runner can move the
// partition to FAILED with a reason): ErrOffsetOutOfRange, ErrDiverged,
// ErrTopicIDChanged, ErrAuthorization, ErrAuthentication, corrupt or
// pre-0.11 batches (batch.ErrCorruptBatch after retries,
// batch.ErrUnsupportedMagic) and non-retriable broker errors. Everything
// else (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
// disconnects, unknown topic while metadata catches up, ...) is retried
// here: the partition leaves its session, waits replica.fetch.backoff.ms,
// and goes to the session of the leader the next metadata names. The last
// retriable error is visible in Snapshot.
//
// # Invariants
//
//   - A partition belongs to at most one session at a time, and only the
//     goroutine of that session delivers its data, so deliveries of one
//     partition are in offset order even across leader moves. Within a
//     session a partition is never in both the long poll and the release
//     fetch in flight, and a response is applied to a partition only if its
//     fetch offset is still the one fetched from.
//   - Deliveries happen with the Manager's lock held; after Remove returns,
//     the partition's Sink receives nothing more.
//   - The fetch offset only moves forward, to the NextOffset of the last
//     delivered batch; it is never reset (out of range and divergence are
//     reported, not repaired).
//   - The first delivered batch of a fetch may start before the fetch offset
//     (it is the batch that holds it); batches that end before it are
//     dropped. A trailing partial batch is dropped and fetched again.
//   - Memory: one Budget, shared by the daemon's Managers, bounds the bytes
//     fetched and not yet acknowledged (Done): a fetch reserves the most its
//     response may bring before it is sent, and the bytes it delivers count
//     until they are acknowledged, so the total exceeds the budget by at
//     most one batch (a response's first batch comes whole). Delivered
//     batches alias the response buffer they came in, which stays alive
//     while any of them is held: the bytes of that buffer no delivery counts
//     stay in the budget until its last delivery is acknowledged. Fetch
//     sizes shrink as partitions are added (Budget). A partition with twice
//     its fetch size (or MaxBufferedBytes) delivered and not acknowledged is
//     also left out of fetches (forgotten in the session) until the runner
//     catches up, so one slow partition never takes the whole budget.
//   - The session's view of the broker (session id, epoch, the partitions
//     the broker holds for it) changes only when a response is accepted; any
//     failure resets it, and the next request is a full fetch.
//
// # Stop
//
// Run owns every goroutine; a session owns the goroutines of its requests
// in flight. When its context ends, sessions stop (in-flight fetches are
// abandoned, and each session waits for their goroutines), each closes its
// broker fetch session with a short best-effort request, Run waits for all
// of them, closes the extra clients it opened for fetcher ids above 0 and
// for release fetches, and returns.
package fetcher
