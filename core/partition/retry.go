package partition

import (
	"errors"
	"fmt"
	"time"

	"github.com/kmirror/kmirror/core/backoff"
)

// Backoff is the retry policy for FAILED partitions: exponential backoff
// with full jitter. It mirrors the mirror.failed.retry.* configuration keys.
type Backoff struct {
	// Initial is the cap of the first retry's delay
	// (mirror.failed.retry.initial.backoff.ms). Must be > 0.
	Initial time.Duration
	// Max caps every delay (mirror.failed.retry.max.backoff.ms). Must be
	// >= Initial.
	Max time.Duration
	// MaxAttempts is how many automatic retries follow consecutive
	// failures before the partition waits for an operator
	// (mirror.failed.retry.max.attempts). 0 means no automatic retries.
	MaxAttempts int
}

// DefaultBackoff matches the defaults of the mirror.failed.retry.* keys.
var DefaultBackoff = Backoff{Initial: time.Second, Max: 5 * time.Minute, MaxAttempts: 10}

// Validate reports the first field out of range.
func (b Backoff) Validate() error {
	switch {
	case b.Initial <= 0:
		return fmt.Errorf("retry backoff: initial backoff %v must be positive", b.Initial)
	case b.Max < b.Initial:
		return fmt.Errorf("retry backoff: max backoff %v must be at least the initial backoff %v", b.Max, b.Initial)
	case b.MaxAttempts < 0:
		return fmt.Errorf("retry backoff: max attempts %d must be 0 (no automatic retries) or more", b.MaxAttempts)
	}
	return nil
}

// policy is b as a core/backoff policy: waits doubling from Initial up to
// Max, with full jitter. MaxAttempts stays with b, whose zero means "no
// automatic retries" (RetriesLeft), not "no limit".
func (b Backoff) policy() backoff.Policy { return backoff.Exponential(b.Initial, b.Max) }

// Cap is the upper bound of the delay before retry number attempt (1 for
// the retry after the first failure): Initial * 2^(attempt-1), at most Max.
// The delay itself is drawn uniformly from [0, Cap] (full jitter), which
// spreads the retries of many partitions that failed together.
func (b Backoff) Cap(attempt int) time.Duration { return b.policy().Cap(attempt) }

// RetriesLeft reports whether a partition that has failed attempts times in
// a row may still be retried automatically.
func (b Backoff) RetriesLeft(attempts int) bool { return attempts <= b.MaxAttempts }

// nonRetryable marks an error as one an automatic retry cannot fix.
type nonRetryable struct{ err error }

func (e nonRetryable) Error() string   { return e.err.Error() }
func (e nonRetryable) Unwrap() error   { return e.err }
func (e nonRetryable) Retryable() bool { return false }

// NonRetryable marks err as a failure that retrying cannot fix (a recreated
// source topic, a changed source cluster ID, source truncation, a
// destination written by someone else): Fail then leaves the partition
// waiting for an operator. errors.Is and errors.As still see err. It returns
// nil for nil.
func NonRetryable(err error) error {
	if err == nil {
		return nil
	}
	return nonRetryable{err}
}

// IsRetryable classifies err for Fail. The outermost error in the chain that
// has a method Retryable() bool decides (NonRetryable's wrapper says false;
// other packages can classify their errors the same way without importing
// this one); an error without one is retryable.
func IsRetryable(err error) bool {
	var r interface{ Retryable() bool }
	if errors.As(err, &r) {
		return r.Retryable()
	}
	return true
}
