package syncloop

import (
	"context"
	"time"
)

// Loop is the one template every sync loop of a mirror follows: sync is
// idempotent (it compares the source with the destination and changes only
// what differs), Run calls it at once, then every interval and whenever
// trigger is called. An error is reported to onErr (logged, counted, shown
// in the mirror status) and never ends the loop: the next round retries, and
// one loop's failure does not stop the mirror's other loops.
//
// A loop with a gate runs a round only while the gate is open (the mirror's
// metadata-sync lease is this daemon's); a round due while it is closed is
// skipped and reported as no error, since the loop did nothing.
type Loop struct {
	name  string
	every time.Duration
	sync  func(ctx context.Context) error
	onErr func(name string, err error) // err nil: the round succeeded or was skipped
	gate  func() bool                  // nil: always open

	wake chan struct{} // buffered(1): a pending trigger
}

func NewLoop(name string, every time.Duration, sync func(context.Context) error, onErr func(string, error)) *Loop {
	return &Loop{name: name, every: every, sync: sync, onErr: onErr, wake: make(chan struct{}, 1)}
}

// gated makes the loop run rounds only while open returns true; it
// returns l.
func (l *Loop) Gated(open func() bool) *Loop {
	l.gate = open
	return l
}

// trigger asks for a round as soon as the current one (if any) ends; it
// never blocks, and triggers that arrive during a round collapse into one.
func (l *Loop) Trigger() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run runs rounds until ctx ends.
func (l *Loop) Run(ctx context.Context) {
	ticker := time.NewTicker(l.every)
	defer ticker.Stop()
	for {
		if l.gate == nil || l.gate() {
			err := l.sync(ctx)
			if ctx.Err() != nil {
				return
			}
			l.onErr(l.name, err)
		} else {
			l.onErr(l.name, nil)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-l.wake:
		}
	}
}
