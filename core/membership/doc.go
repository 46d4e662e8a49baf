// Package membership makes several kmirror daemons share work through
// Kafka's own group membership on the destination cluster, the way Kafka
// Connect's distributed workers do: the classic JoinGroup / SyncGroup /
// Heartbeat / LeaveGroup protocol with protocol type "kmirror"
// (ProtocolType) and one assignment protocol, "kmirror-sticky-v1"
// (ProtocolName). It owns the group's life cycle for one daemon (Member),
// the assignor (Assign, a pure function) and the bytes members exchange.
// It knows nothing of mirrors or partitions: work items are strings (the
// engine will use "mirror/topic/partition").
//
// franz-go's consumer groups always use protocol type "consumer" and assign
// topic partitions to consume, so the member speaks the raw protocol with
// kmsg over the destination's *kgo.Client; the client routes the group
// requests to the group's coordinator and finds it again after
// NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE.
//
// # One member's states
//
//	join ──► sync ──► apply ──► stable (heartbeat every interval)
//	 ▲                   │            │
//	 │◄── rejoin at once ┘            │  apply: OnRevoked(items lost), then
//	 │    (revoked an item            │  OnAssigned(items gained)
//	 │    the group moves)            │
//	 │◄── rejoin, keep items ─────────┤  REBALANCE_IN_PROGRESS, SetItems
//	 │◄── OnRevoked(every item) ──────┘  UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
//	                                     no answer within the session timeout
//
// JoinGroup answered MEMBER_ID_REQUIRED is sent again at once with the
// member id the broker gave (KIP-394); a request refused with
// NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or another transient error is
// retried after a backoff, the items kept while the session lasts.
//
// Run's goroutine runs the loop and calls the handler; a heartbeat goroutine,
// started after each SyncGroup and waited for before the next JoinGroup,
// keeps the session alive while the handler works. Run returns when its
// context ends (without LeaveGroup: like a crash) or on Close (every item
// revoked, then LeaveGroup), or on an error retrying does not cure
// (ErrFenced, ErrGroupInUse, ErrNotAuthorized, a session timeout the broker
// refuses). It never returns holding an item.
//
// # Cooperative handover
//
// A rebalance pauses no item that stays with its owner. Each member reports
// in its JoinGroup metadata the items it holds (Owned) and the generation
// that gave them. The leader runs Assign (sticky: owners keep their items
// while the spread allows) and then withholds every item whose target
// owner differs from a present member still holding it: that item goes to
// nobody this generation (View.Moving). Its old owner sees it missing from
// its assignment, revokes it (OnRevoked returns once it has stopped), and
// rejoins at once; its new metadata no longer claims the item, so the next
// generation gives it to its new owner. Two rebalances per move, as with
// Kafka's cooperative-sticky assignor.
//
// # What is guaranteed
//
//   - In one generation an item is assigned to at most one member, and to
//     no member while another member of the generation still holds it. (If
//     two members of a generation claim one item, which only a member that
//     lost its session without noticing can cause, the claim of the later
//     generation keeps it and the other claimant revokes it.)
//   - While its owner stays in the group, an item moves only after OnRevoked
//     returned on its owner: the generation that gives it to the new owner
//     is built from metadata the old owner sent after revoking. A member
//     that does not rejoin a rebalance within the rebalance timeout (its
//     OnRevoked or OnAssigned takes longer, or it is stuck) is dropped, and
//     its items are given away at once: keep the handler well within it.
//   - A member that loses its session (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
//     or no answer to any request sent within the last session timeout)
//     revokes every item before it joins again, and Run revokes every item
//     before it returns.
//
// What is not guaranteed: a member paused past its session timeout (SIGSTOP,
// a long GC or VM pause) still believes it owns its items until it runs
// again and notices, while the group has given them to others. Preventing
// its writes is not a matter of timing: it needs fencing by the brokers
// (#14 item 5: every destination append under a transactional id the new
// owner's InitProducerId fences), a later step.
//
// # The bytes
//
// Member metadata (JoinGroup) and the assignment (SyncGroup) are an
// encoding byte (1) then DEFLATE-compressed JSON with a version field; the
// leader sends every member the same bytes, the whole generation (every
// member's daemon id, host, admin address and items), so that any member
// can say which daemon owns what (Member.Members). At 10,000 items of
// ~50 bytes over 3 members the assignment is ~28 KB and a member's metadata
// listing all items ~36 KB (TestAssignmentSizeAt10000Items), far below the
// broker's message.max.bytes.
//
// The design and its choices are in docs/design/scaleout.md, "Group
// membership".
package membership
