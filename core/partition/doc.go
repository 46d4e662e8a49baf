// Package partition owns the per-partition state machine of kmirror: the
// states a mirrored partition can be in, the table of allowed transitions,
// the persisted record of each partition, and the code that persists every
// transition before it takes effect. Nothing else changes a partition's
// state.
//
// # States
//
//	             (new partition)
//	                    |
//	                    v
//	+-----------> PREPARING ------------------> MIRRORING <----------+
//	|               |    ^                       |  |   ^  |         |
//	|          fail |    | retry, reset     fail |  |   |  | pause   | resume
//	|               v    |                       |  |   |  v         |
//	|              FAILED <----------------------+  |   |  PAUSED ---+
//	|               |  |                            |   |    |
//	|               |  +------------ retry ---------|---+    |
//	|               |  (if it failed in MIRRORING)  |        |
//	|          stop |                          stop |        | stop
//	|               v                               v        |
//	|             STOPPING <------------------------+--------+
//	|               |
//	|               v
//	+------------ STOPPED
//	    start again (failback, restart, operator)
//
// The table (docs/design/contract.md §2) is the authority:
//
//	PREPARING -> MIRRORING, FAILED
//	MIRRORING -> PAUSED, STOPPING, FAILED
//	PAUSED    -> MIRRORING, STOPPING
//	STOPPING  -> STOPPED
//	STOPPED   -> PREPARING
//	FAILED    -> its previous state (PREPARING or MIRRORING), STOPPING,
//	             PREPARING (operator reset)
//
// A new partition starts in PREPARING. Decisions where the KIP and the table
// differ, and why:
//
//   - FAILED is entered only from PREPARING and MIRRORING, not "from any
//     state" as the KIP's prototype allows. Those are the states that run
//     work which can fail (alignment, the fetch/append loop). PAUSED runs
//     nothing. STOPPING must finish, because a partition left short of
//     STOPPED may hold destination transactions open; its work (abort open
//     transactions, record the last mirrored offset) is idempotent and its
//     owner retries it in place. STOPPED belongs to nobody. As a result a
//     FAILED partition's previous state is always PREPARING or MIRRORING.
//   - FAILED -> PREPARING is allowed even when the partition failed in
//     MIRRORING: it is the operator's reset (KIP-1279's RecoverMirrorTopics /
//     start command; the KIP's retry goes "to the previous state or
//     PREPARING"). PREPARING re-derives the resume point and the mode from
//     the destination, so it is a safe restart from anywhere.
//   - PAUSED -> MIRRORING resumes directly, as in the KIP's later design:
//     a paused partition's destination log has not moved.
//
// # Failures and retries
//
// Fail moves a partition to FAILED with the error's text as the reason and
// classifies it: errors wrapped with NonRetryable (source topic recreated,
// source cluster ID changed, truncation, a destination written by someone
// else, ...) wait for an operator; others are retried. Retryable failures get
// a retry time from exponential backoff with full jitter (Backoff, drawn by
// core/backoff); after Backoff.MaxAttempts consecutive failures, or when
// MaxAttempts is 0, the partition waits for an operator too. Retry returns a due partition to its
// previous state; Reset (the operator) returns it to PREPARING and clears the
// attempt count. The count of consecutive failures survives retries and is
// cleared by a transition that makes progress (one neither into nor out of
// FAILED, e.g. PREPARING -> MIRRORING), by Reset, and by MarkHealthy.
//
// A partition that fails in MIRRORING returns to MIRRORING on retry, which
// clears nothing; the engine's runner calls MarkHealthy once that run has
// made healthy progress: a fetched delivery fully written past the offset
// mirroring resumed from. So the budget counts failures with no progress in
// between, not a partition's failures over its life: faults a month apart
// are each a first retry, while a fault that recurs before anything is
// written uses the budget up. The runner checks the in-memory count first
// and calls MarkHealthy at most once per retry, so healthy mirroring never
// writes to the state store for it.
//
// # Invariants
//
//   - Persist before effect: a transition is written to the state store,
//     compare-and-set on the version this Partition last read or wrote,
//     before the in-memory state changes. If the write fails, or someone
//     else wrote the record meanwhile (statestore.ErrVersionMismatch: another
//     daemon may own the partition), the in-memory state is unchanged and
//     the error is returned.
//   - Every transition that persisted is reported to the observers exactly
//     once, in the order the transitions happened, after it took effect.
//     Data-only updates (Update, MarkHealthy) are not transitions and are
//     not reported.
//   - After a crash, Load resumes a partition in its persisted state, with
//     its reason, attempt count and retry time.
//   - A record written by a newer kmirror whose schema this one does not
//     know is refused, not rewritten. Fields later features add go in
//     Data.Extensions, which every version carries over unchanged.
package partition
