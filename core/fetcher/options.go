package fetcher

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Defaults, the values of Kafka's broker keys of the same names.
const (
	DefaultFetchersPerBroker = 1                      // mirror.num.replica.fetchers
	DefaultPartitionMaxBytes = 1048576                // replica.fetch.max.bytes
	DefaultMinBytes          = 1                      // replica.fetch.min.bytes
	DefaultResponseMaxBytes  = 10485760               // replica.fetch.response.max.bytes
	DefaultMaxWait           = 500 * time.Millisecond // replica.fetch.wait.max.ms
	DefaultBackoff           = time.Second            // replica.fetch.backoff.ms
)

// ThrottleFunc is called with the record bytes of each fetch response before
// they are delivered, so the engine can apply
// mirror.replication.throttled.rate. It may block; it blocks only the
// session that received the response. An error (normally ctx's) abandons
// the response without delivering it; the same data is fetched again.
type ThrottleFunc func(ctx context.Context, n int) error

// Option configures a Manager. Options are validated once, by New.
type Option func(*config)

type config struct {
	fetchers          int
	partitionMaxBytes int32
	minBytes          int32
	responseMaxBytes  int32
	maxWait           time.Duration
	backoff           time.Duration
	maxBuffered       int64 // 0: derived from partitionMaxBytes
	maxBufferedSet    bool
	log               hclog.Logger
	throttle          ThrottleFunc
	budget            *Budget
	fetchHook         FetchHook
	releaseFetch      bool // tests turn it off to compare
	closeTimeout      time.Duration
}

func defaultConfig() config {
	return config{
		fetchers:          DefaultFetchersPerBroker,
		partitionMaxBytes: DefaultPartitionMaxBytes,
		minBytes:          DefaultMinBytes,
		responseMaxBytes:  DefaultResponseMaxBytes,
		maxWait:           DefaultMaxWait,
		backoff:           DefaultBackoff,
		log:               hclog.NewNullLogger(),
		releaseFetch:      true,
		closeTimeout:      500 * time.Millisecond,
	}
}

// WithFetchersPerBroker sets mirror.num.replica.fetchers: how many fetch
// sessions run to each source broker. A partition goes to fetcher
// hash(topic, partition) % n, Kafka's own assignment. Fetcher 0 uses the
// client given to New; each other fetcher id gets its own client (a copy of
// its options) so that its long polls do not queue behind the others' on one
// connection. Default 1; at least 1.
func WithFetchersPerBroker(n int) Option { return func(c *config) { c.fetchers = n } }

// WithPartitionMaxBytes sets replica.fetch.max.bytes: the most bytes fetched
// for one partition per request (a larger first batch is still returned
// whole). Default 1048576; at least 1.
func WithPartitionMaxBytes(n int32) Option { return func(c *config) { c.partitionMaxBytes = n } }

// WithMinBytes sets replica.fetch.min.bytes: how many bytes a broker waits
// for (up to the max wait) before answering. Default 1; at least 0.
func WithMinBytes(n int32) Option { return func(c *config) { c.minBytes = n } }

// WithResponseMaxBytes sets replica.fetch.response.max.bytes: the most bytes
// of one fetch response (a larger first batch is still returned whole).
// Default 10485760; at least 1 and not below the min bytes.
func WithResponseMaxBytes(n int32) Option { return func(c *config) { c.responseMaxBytes = n } }

// WithMaxWait sets replica.fetch.wait.max.ms: how long a broker holds a fetch
// that has less than the min bytes. A partition added or resumed while a
// long poll is out does not wait for it: it gets a release fetch at once.
// Default 500ms; from 0 to MaxInt32 milliseconds.
func WithMaxWait(d time.Duration) Option { return func(c *config) { c.maxWait = d } }

// WithBackoff sets replica.fetch.backoff.ms: how long a partition waits
// after a retriable error (leader change, broker unreachable) before it is
// placed again from fresh metadata, and how long a session waits after an
// unexpected broker answer. Default 1s; at least 0.
func WithBackoff(d time.Duration) Option { return func(c *config) { c.backoff = d } }

// WithMaxBufferedBytes sets how many bytes of one partition may be delivered
// and not yet acknowledged with Done before the partition is left out of
// fetches. Default twice the partition's fetch size (the partition max
// bytes, or less when the Budget is shared by many partitions); at least 1.
func WithMaxBufferedBytes(n int64) Option {
	return func(c *config) { c.maxBuffered, c.maxBufferedSet = n, true }
}

// WithBudget shares a Budget, the bound on bytes buffered between fetch and
// append, with the other Managers of the daemon (mirror.buffer.max.bytes).
// Default: a budget of DefaultBudgetBytes for this Manager alone.
func WithBudget(b *Budget) Option { return func(c *config) { c.budget = b } }

// FetchInfo describes one fetch request once its response (or error) has
// arrived, for metrics.
type FetchInfo struct {
	Broker  int32
	Latency time.Duration // from send to response
	Bytes   int           // record bytes in the response
	// Release is true for a short fetch sent for partitions released
	// while the session's long poll was in flight.
	Release bool
	Err     error
}

// FetchHook is called by a session goroutine after each fetch request. It
// must return promptly and must not call the Manager.
type FetchHook func(FetchInfo)

// WithFetchHook sets the hook called after each fetch request, e.g. to
// record the request latency in a histogram. Default none.
func WithFetchHook(f FetchHook) Option { return func(c *config) { c.fetchHook = f } }

// WithLogger sets the logger. Default: discard.
func WithLogger(l hclog.Logger) Option { return func(c *config) { c.log = l } }

// WithThrottle sets the hook called with each response's record bytes before
// delivery, e.g. the Wait method of the daemon's core/throttle Limiter.
// Default none.
func WithThrottle(f ThrottleFunc) Option { return func(c *config) { c.throttle = f } }

// ErrInvalidOption: New was given an option value out of range.
var ErrInvalidOption = errors.New("invalid fetcher option")

func (c *config) validate() error {
	var errs []error
	bad := func(key string, v any, want string) {
		errs = append(errs, fmt.Errorf("%w: %s = %v: %s", ErrInvalidOption, key, v, want))
	}
	if c.fetchers < 1 {
		bad("mirror.num.replica.fetchers", c.fetchers, "must be at least 1")
	}
	if c.partitionMaxBytes < 1 {
		bad("replica.fetch.max.bytes", c.partitionMaxBytes, "must be at least 1")
	}
	if c.minBytes < 0 {
		bad("replica.fetch.min.bytes", c.minBytes, "must be at least 0")
	}
	if c.responseMaxBytes < 1 {
		bad("replica.fetch.response.max.bytes", c.responseMaxBytes, "must be at least 1")
	} else if c.minBytes > c.responseMaxBytes {
		bad("replica.fetch.min.bytes", c.minBytes, fmt.Sprintf("must not exceed replica.fetch.response.max.bytes (%d)", c.responseMaxBytes))
	}
	if c.maxWait < 0 || c.maxWait.Milliseconds() > math.MaxInt32 {
		bad("replica.fetch.wait.max.ms", c.maxWait, "must be from 0 to 2147483647 ms")
	}
	if c.backoff < 0 {
		bad("replica.fetch.backoff.ms", c.backoff, "must be at least 0")
	}
	if c.maxBufferedSet && c.maxBuffered < 1 {
		bad("max buffered bytes per partition", c.maxBuffered, "must be at least 1")
	}
	if c.log == nil {
		bad("logger", "nil", "pass a logger or leave the option out")
	}
	if c.budget == nil {
		c.budget = NewBudget(DefaultBudgetBytes)
	}
	return errors.Join(errs...)
}
