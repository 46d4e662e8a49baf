// Package failover runs the failover of a mirror's topics to the
// destination: optionally wait until they have no lag (a planned
// failover), run a last group offset sync and ACL sync, stop the topics,
// remove their read-only ACLs, and say where each partition stopped.
// core/mirror gives it the mirror (a Mirror of functions, no back-pointer
// to the engine); docs/design/failover.md has the rules.
package failover

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/aclsync"
	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/core/groupsync"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/core/runner"
)

// Result says where each failed-over partition stopped and which groups
// had their offsets synced last.
type Result struct {
	Mirror string   `json:"mirror"`
	Topics []Topic  `json:"topics"`
	Groups []string `json:"groups"`
	// Warnings are steps that could not be done (for example the last
	// group sync when the source is down, in an unplanned failover).
	Warnings []string `json:"warnings,omitempty"`
}

// Topic is one topic of a failover.
type Topic struct {
	Topic      string      `json:"topic"`
	Partitions []Partition `json:"partitions"`
}

// Partition is where one partition stopped.
type Partition struct {
	Partition          int32 `json:"partition"`
	LastMirroredOffset int64 `json:"last_mirrored_offset"`
}

// Mirror is the mirror a failover acts on.
type Mirror struct {
	Name string
	Log  hclog.Logger
	// Groups and ACLs run the last syncs; nil when the mirror has none.
	Groups *groupsync.Syncer
	ACLs   *aclsync.Syncer
	// Wait polls the partitions of the topics match selects until done
	// holds for every one, or ctx ends, and returns their status.
	Wait func(ctx context.Context, what string, match func(string) bool, done func(runner.Status) bool) ([]runner.Status, error)
	// Stop stops the topics matching the patterns the way an operator's
	// stop does (recorded first), and returns once they are STOPPED.
	Stop func(ctx context.Context, topics []string) ([]runner.Status, error)
	// SyncReadOnly runs a round of the read-only ACL sync.
	SyncReadOnly func(ctx context.Context) error
}

// ErrLastSyncFailed: in a planned failover, the last group offset sync or
// ACL sync failed, so the failover did not start and nothing was changed.
var ErrLastSyncFailed = errors.New("a last sync failed")

// ErrNotCaughtUp: a planned failover's partitions did not catch up within
// its wait, so it did not start and nothing was changed.
var ErrNotCaughtUp = errors.New("not caught up")

// CaughtUp reports whether a partition is where a planned failover waits
// for it to be: MIRRORING with no lag (and a known source high watermark),
// or STOPPED (failed over already, as in a repeated request).
func CaughtUp(st runner.Status) bool {
	switch st.State {
	case partition.Stopped.String():
		return true
	case partition.Mirroring.String():
		return st.Lag == 0 && st.SourceHighWatermark >= 0
	}
	return false
}

// syncAttempts is how often a planned failover tries its last group and
// ACL sync, a second apart, before calling the step failed; an unplanned
// one (the source may be gone) tries twice.
const syncAttempts = 5

// Run fails the topics that match selects (named by the patterns pats)
// over; waitForCatchUp > 0 makes it a planned failover, which first waits
// up to that long until they have no lag. See core/mirror's
// Engine.Failover for the guarantees.
func Run(ctx context.Context, m Mirror, pats []string, match func(string) bool, waitForCatchUp time.Duration) (Result, error) {
	out := Result{Mirror: m.Name}
	planned := waitForCatchUp > 0
	if planned {
		wctx, cancel := context.WithTimeoutCause(ctx, waitForCatchUp, fmt.Errorf("%w within --wait-for-catch-up %v; nothing was changed", ErrNotCaughtUp, waitForCatchUp))
		_, err := m.Wait(wctx, "waiting for catch-up", match, CaughtUp)
		cancel()
		if err != nil {
			return out, err
		}
	}
	gs, as := m.Groups, m.ACLs
	attempts := syncAttempts
	if !planned {
		attempts = 2
	}
	warn := func(step string, err error) error {
		if planned {
			return fmt.Errorf("mirror %s: failover: %s failed, so the planned failover did not start and nothing was changed (%w); repeat it once the source is reachable, or fail over without --wait-for-catch-up (an unplanned failover goes on without the last sync): %w", m.Name, step, ErrLastSyncFailed, err)
		}
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s failed: %v", step, err))
		m.Log.Warn("failover: a last sync step failed; failing over anyway", "step", step, "error", err)
		return nil
	}
	if gs != nil {
		// A group coordinator still loading, or moving, fails a round:
		// retry a few times before calling the step failed.
		var (
			rep groupsync.Report
			err error
		)
		for attempt := 1; ; attempt++ {
			rep, err = gs.Sync(ctx)
			if err == nil && rep.Errors > 0 {
				err = fmt.Errorf("%d groups failed (see describe)", rep.Errors)
			}
			if err == nil || attempt == attempts || backoff.Sleep(ctx, time.Second) != nil {
				break
			}
			m.Log.Info("failover: the last group offset sync failed; retrying", "attempt", attempt, "error", err)
		}
		if err != nil {
			if err := warn("the last group offset sync", err); err != nil {
				return out, err
			}
		}
		// The groups this last round found in sync on the destination
		// (written now, or already up to date).
		for _, g := range append(rep.Groups, rep.ShareGroups...) {
			if g.Err == "" && !g.SkippedActive && !g.LastSynced.IsZero() && !g.LastSynced.Before(g.At) {
				out.Groups = append(out.Groups, g.Group)
			}
		}
	}
	if as != nil {
		var err error
		for attempt := 1; ; attempt++ {
			if _, err = as.Sync(ctx); err == nil || errors.Is(err, aclsync.ErrNoAuthorizer) {
				err = nil
				break
			}
			if attempt == attempts || backoff.Sleep(ctx, time.Second) != nil {
				break
			}
		}
		if err != nil {
			if err := warn("the last ACL sync", err); err != nil {
				return out, err
			}
		}
	}
	m.Log.Info("failover: stopping topics", "topics", pats, "planned", planned)
	parts, err := m.Stop(ctx, pats)
	if err != nil {
		return out, err
	}
	if err := m.SyncReadOnly(ctx); err != nil {
		return out, fmt.Errorf("mirror %s: failover: the topics are stopped, but removing their read-only ACLs failed (it is retried by the read-only loop): %w", m.Name, err)
	}
	index := map[string]int{}
	for _, p := range parts {
		if p.State != partition.Stopped.String() {
			continue
		}
		i, ok := index[p.Topic]
		if !ok {
			i = len(out.Topics)
			index[p.Topic] = i
			out.Topics = append(out.Topics, Topic{Topic: p.Topic})
		}
		out.Topics[i].Partitions = append(out.Topics[i].Partitions, Partition{Partition: p.Partition, LastMirroredOffset: p.LastMirroredOffset})
	}
	m.Log.Info("failover complete", "topics", len(out.Topics), "groups", len(out.Groups))
	return out, nil
}
