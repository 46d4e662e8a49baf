package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kmirror/kmirror/core/backoff"
)

// A retry loop: waits from 10ms doubling to 1s with full jitter, giving up
// when the next wait would end more than two minutes after the first
// attempt, or when ctx ends.
func ExampleRetry() {
	attempts := 0
	try := func(context.Context) error {
		if attempts++; attempts < 3 {
			return errors.New("NOT_LEADER_OR_FOLLOWER")
		}
		return nil
	}

	p := backoff.Exponential(10*time.Millisecond, time.Second)
	p.Timeout = 2 * time.Minute
	ctx := context.Background()
	r := p.Start()
	for {
		err := try(ctx)
		if err == nil {
			break
		}
		if serr := r.Sleep(ctx); serr != nil {
			fmt.Println("giving up:", errors.Join(serr, err))
			return
		}
	}
	fmt.Println("succeeded after", r.Retries(), "retries")
	// Output: succeeded after 2 retries
}
