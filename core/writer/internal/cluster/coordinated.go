package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Coordinated sends a transaction request of transactional id txid to its
// coordinator (*coordinator, -1 to look it up; kept for the next request)
// at most at version maxVersion, retrying coordinator moves and loads,
// transport errors and CONCURRENT_TRANSACTIONS (a previous transaction of
// the id still completing) for up to the retry timeout. check extracts the
// response's error. Errors say "<what> for <txid>"; retries are logged to
// log.
func (c *Client) Coordinated(ctx context.Context, log hclog.Logger, coordinator *int32, txid, what string, req kmsg.Request, maxVersion int16,
	check func(kmsg.Response) error,
) (kmsg.Response, error) {
	what = what + " for " + txid
	r := c.NewRetrier()
	pin := &Pinned{Request: req, Max: maxVersion}
	for {
		var err error
		if *coordinator < 0 {
			*coordinator, err = c.FindCoordinator(ctx, txid)
		}
		if err == nil {
			var resp kmsg.Response
			if resp, err = c.Request(ctx, *coordinator, pin); err == nil {
				if err = check(resp); err == nil {
					return resp, nil
				}
			}
		}
		var ke *kerr.Error
		switch {
		case ctx.Err() != nil:
			return nil, whatErr(what, errors.Join(context.Cause(ctx), err))
		case errors.Is(err, kerr.NotCoordinator), errors.Is(err, kerr.CoordinatorNotAvailable):
			*coordinator = -1
		case errors.Is(err, kerr.CoordinatorLoadInProgress), errors.Is(err, kerr.ConcurrentTransactions):
		case errors.As(err, &ke):
			if !ke.Retriable {
				return nil, whatErr(what, err)
			}
		case !IsRetriable(err):
			return nil, whatErr(what, err)
		default: // transport error: the coordinator may have moved or be unknown to the client
			*coordinator = -1
			c.RefreshBrokers(ctx)
		}
		log.Debug("retrying transaction request", "request", what, "error", err)
		if err := r.Backoff(ctx, err); err != nil {
			return nil, whatErr(what, err)
		}
	}
}

// whatErr says what failed: "<what>: <err>".
func whatErr(what string, err error) error {
	return fmt.Errorf("%s: %w", what, err)
}
