package runner

import "context"

// healthyCheck clears a retried partition's count of consecutive failures
// (partition.Partition.MarkHealthy) once mirroring has made healthy progress
// again: a delivery fully written past the offset mirroring resumed from.
// Without it the retry budget (mirror.failed.retry.max.attempts) would count
// a partition's failures over its whole life. The check costs a comparison
// per delivery and writes to the state store at most once per retry: never
// when the partition had not failed.
type healthyCheck struct {
	r    *Runner
	from int64 // the next source offset when mirroring (re)started; -1: nothing to clear
}

// healthyAfter starts the check for a mirroring run of r that resumed at its
// current next offset.
func healthyAfter(r *Runner) *healthyCheck {
	h := &healthyCheck{r: r, from: -1}
	if r.state.Record().Attempts > 0 {
		h.from = r.Next()
	}
	return h
}

// check runs after each delivery is written.
func (h *healthyCheck) check(ctx context.Context) {
	if h.from < 0 || h.r.Next() <= h.from {
		return
	}
	h.from = -1
	if err := h.r.state.MarkHealthy(ctx); err != nil {
		// Not fatal: the count stays, and the next retry clears it again.
		h.r.log.Warn("cannot clear the partition's count of consecutive failures", "error", err)
		return
	}
	h.r.log.Info("partition mirrors again after a retry: its count of consecutive failures is cleared")
}
