package runner

import (
	"context"

	"github.com/kmirror/kmirror/core/partition"
)

// Reasons recorded with the operator's transitions.
const (
	reasonPaused  = "paused by an operator"
	reasonResumed = "resumed by an operator"
	// ReasonStopped is the reason of an operator's stop (stop, failover).
	ReasonStopped = "stopped by an operator (stop or failover); the destination topic is writable"
	reasonStarted = "started again by an operator"
)

// applyControl moves the partition where the mirror's control record and
// the operator's requests say it should be. It returns handled true when it
// made a transition (or asked for one), so that the run loop looks again.
func (r *Runner) applyControl(ctx context.Context, st partition.State) (bool, error) {
	stopped, err := r.d.Control.Stopped(ctx, r.topic)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	start := r.startWanted
	r.mu.Unlock()
	switch {
	case stopped && !r.stopRequested() && (st == partition.Mirroring || st == partition.Paused || st == partition.Failed):
		r.RequestStop(ReasonStopped)
		return true, nil
	case stopped && st == partition.Preparing:
		// Nothing mirrored yet: wait, unprepared, until started again.
		select {
		case <-ctx.Done():
		case <-r.ctl:
		}
		return true, nil
	case st == partition.Stopped && start && !stopped:
		if err := r.state.Transition(ctx, partition.Preparing, reasonStarted); err != nil {
			return true, r.errorf("recording the transition to PREPARING: %w", err)
		}
		r.mu.Lock()
		r.startWanted = false
		r.mu.Unlock()
		r.setNext(-1)
		return true, nil
	case st == partition.Stopped && start:
		r.mu.Lock()
		r.startWanted = false // stopped again meanwhile
		r.mu.Unlock()
	case st == partition.Failed && start && !stopped:
		// An operator's start retries a FAILED partition at once (KIP-1279's
		// recover/start), through PREPARING, which proves the destination
		// again. A partition failed for good by a fatal request (a recreated
		// source topic, a deleted destination topic) needs a reset instead.
		r.mu.Lock()
		r.startWanted = false
		r.mu.Unlock()
		if r.fatalDone {
			return false, nil
		}
		if err := r.state.Reset(ctx, reasonStarted); err != nil {
			return true, r.errorf("recording the transition to PREPARING: %w", err)
		}
		r.setNext(-1)
		return true, nil
	}
	if st != partition.Mirroring && st != partition.Paused {
		return false, nil
	}
	paused, err := r.d.Control.Paused(ctx, r.topic)
	if err != nil {
		return false, err
	}
	switch {
	case paused && st == partition.Mirroring:
		if err := r.state.Transition(ctx, partition.Paused, reasonPaused); err != nil {
			return true, r.errorf("recording the transition to PAUSED: %w", err)
		}
		return true, nil
	case !paused && st == partition.Paused:
		r.forgetSourceHW()
		if err := r.state.Transition(ctx, partition.Mirroring, reasonResumed); err != nil {
			return true, r.errorf("recording the transition to MIRRORING: %w", err)
		}
		return true, nil
	}
	return false, nil
}

// forgetSourceHW marks the source high watermark unknown before the
// partition goes back to MIRRORING, where resuming reads it again: until
// then its lag is unknown (-1), so that a planned failover never takes the
// high watermark seen before a pause or a failure for "caught up".
func (r *Runner) forgetSourceHW() {
	r.mu.Lock()
	r.srcHW = -1
	r.mu.Unlock()
}
