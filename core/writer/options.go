package writer

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/backoff"
	"github.com/kmirror/kmirror/core/writer/internal/cluster"
)

// Option configures a Writer. Options are validated once, by New.
type Option func(*config)

type config struct {
	mirror               string
	txnTimeout           time.Duration // 0: read from the destination brokers
	maxInflight          int
	maxInflightPartition int
	maxRequestBytes      int
	requestTimeout       time.Duration
	retryTimeout         time.Duration
	backoffMin           time.Duration
	backoffMax           time.Duration
	idleWriter           time.Duration
	logger               hclog.Logger
	observer             ProduceObserver // nil: none
}

// Defaults of the options.
const (
	DefaultMirrorName              = "default"
	DefaultMaxInflight             = 5
	DefaultMaxInflightPerPartition = 5
	DefaultMaxRequestBytes         = 16 << 20
	DefaultRequestTimeout          = 30 * time.Second
	DefaultRetryTimeout            = 2 * time.Minute
	DefaultRetryBackoffMin         = 10 * time.Millisecond
	DefaultRetryBackoffMax         = time.Second
	DefaultIdleWriterTimeout       = 15 * time.Minute
	DefaultTransactionTimeout      = cluster.DefaultTransactionTimeout // Kafka's transaction.max.timeout.ms default
)

func defaultConfig() config {
	return config{
		mirror:               DefaultMirrorName,
		maxInflight:          DefaultMaxInflight,
		maxInflightPartition: DefaultMaxInflightPerPartition,
		maxRequestBytes:      DefaultMaxRequestBytes,
		requestTimeout:       DefaultRequestTimeout,
		retryTimeout:         DefaultRetryTimeout,
		backoffMin:           DefaultRetryBackoffMin,
		backoffMax:           DefaultRetryBackoffMax,
		idleWriter:           DefaultIdleWriterTimeout,
		logger:               hclog.NewNullLogger(),
	}
}

// MirrorName names the mirror this Writer writes for. It appears in every
// error and log line, and in destination transactional ids
// (kmirror-<mirror>-<topic>-<partition>-<source producer id>), so it must
// stay the same across restarts. Default "default".
func MirrorName(name string) Option { return func(c *config) { c.mirror = name } }

// TransactionTimeout is the timeout of destination transactions
// (InitProducerId's transaction timeout). A mirrored transaction stays open
// on the destination as long as it is open on the source, so the default is
// the largest the destination allows: the smallest transaction.max.timeout.ms
// of the destination brokers (read with DescribeConfigs when the first
// transactional writer starts), or 900000 (15 minutes, Kafka's default) when
// it cannot be read.
func TransactionTimeout(d time.Duration) Option { return func(c *config) { c.txnTimeout = d } }

// MaxInflightPerBroker is how many ProduceRequests may be in flight to one
// destination broker at once (they travel on one connection, which the
// broker serves in order). A request carries at most one append per
// partition, so a partition has at most this many appends in flight whatever
// MaxInflightPerPartition says. Default 5. More helps a few partitions far
// from the destination keep their windows full (a bench at 50 ms round trip
// with 4 partitions moved 22% more with 20), and costs on a near one: appends
// then leave in requests of one partition each instead of gathering
// (docs/benchmarks.md).
func MaxInflightPerBroker(n int) Option { return func(c *config) { c.maxInflight = n } }

// MaxInflightPerPartition is how many appends of one partition AppendAll
// keeps in flight (Kafka's max.in.flight.requests.per.connection for an
// idempotent producer): 1 sends each batch after the previous one was
// answered. At most 5, the number of batches per producer whose sequences
// a Kafka broker remembers to recognise a retried duplicate. Default 5.
func MaxInflightPerPartition(n int) Option { return func(c *config) { c.maxInflightPartition = n } }

// MaxRequestBytes bounds the record bytes gathered into one ProduceRequest;
// a single batch larger than this is still sent, alone. Default 16 MiB.
func MaxRequestBytes(n int) Option { return func(c *config) { c.maxRequestBytes = n } }

// RequestTimeout bounds one request to a destination broker. A
// ProduceRequest carries it as its timeout (how long the broker may wait for
// acks=all), and franz-go waits that plus the client's
// RequestTimeoutOverhead for the answer. Default 30s.
func RequestTimeout(d time.Duration) Option { return func(c *config) { c.requestTimeout = d } }

// RetryTimeout bounds how long one operation (an append, a transaction
// request, waiting for a marker) keeps retrying retriable errors — leader
// changes, coordinator moves, CONCURRENT_TRANSACTIONS, unreachable brokers —
// before it returns the last error. Default 2m.
func RetryTimeout(d time.Duration) Option { return func(c *config) { c.retryTimeout = d } }

// RetryBackoff sets the first and the largest wait between retries, and the
// polling interval while waiting for a marker to become visible; waits
// double from min to max, each drawn uniformly from zero to that value
// (full jitter, so partitions that failed together do not retry together).
// Default 10ms and 1s.
func RetryBackoff(minWait, maxWait time.Duration) Option {
	return func(c *config) { c.backoffMin, c.backoffMax = minWait, maxWait }
}

// IdleWriterTimeout is how long a destination transactional writer with no
// open transaction is kept in memory after its last use. A writer needed
// again later is initialised again (a new epoch, reported to OnTxnWriter).
// Default 15m.
func IdleWriterTimeout(d time.Duration) Option { return func(c *config) { c.idleWriter = d } }

// Logger is where the Writer logs (retries, leader moves, resumed
// transactions). Default: no logging.
func Logger(l hclog.Logger) Option { return func(c *config) { c.logger = l } }

// Observer sets the ProduceObserver told of every ProduceRequest sent, for
// metrics. Default none (and then nothing is measured).
func Observer(o ProduceObserver) Option { return func(c *config) { c.observer = o } }

// mirrorNameRE keeps mirror names to the characters Kafka allows in topic
// names, so a transactional id built from one (fields separated by ':') is
// unambiguous and printable.
var mirrorNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func (c *config) validate() error {
	var errs []error
	if !mirrorNameRE.MatchString(c.mirror) {
		errs = append(errs, fmt.Errorf("MirrorName %q: use letters, digits, '.', '_' and '-' only", c.mirror))
	}
	if c.txnTimeout < 0 || (c.txnTimeout > 0 && c.txnTimeout < time.Millisecond) || c.txnTimeout > time.Duration(1<<31-1)*time.Millisecond {
		errs = append(errs, fmt.Errorf("TransactionTimeout %v: must be 0 (read from the destination) or between 1ms and 2^31-1 ms", c.txnTimeout))
	}
	if c.maxInflight < 1 {
		errs = append(errs, fmt.Errorf("MaxInflightPerBroker %d: must be at least 1", c.maxInflight))
	}
	if c.maxInflightPartition < 1 || c.maxInflightPartition > 5 {
		errs = append(errs, fmt.Errorf("MaxInflightPerPartition %d: must be from 1 to 5 (brokers recognise a retried duplicate among a producer's last 5 batches only)", c.maxInflightPartition))
	}
	if c.maxRequestBytes < 1 {
		errs = append(errs, fmt.Errorf("MaxRequestBytes %d: must be positive", c.maxRequestBytes))
	}
	if c.requestTimeout <= 0 || c.requestTimeout > time.Duration(1<<31-1)*time.Millisecond {
		errs = append(errs, fmt.Errorf("RequestTimeout %v: must be positive and below 2^31 ms", c.requestTimeout))
	}
	if c.retryTimeout <= 0 {
		errs = append(errs, fmt.Errorf("RetryTimeout %v: must be positive", c.retryTimeout))
	}
	if c.backoffMin <= 0 || c.backoffMax < c.backoffMin {
		errs = append(errs, fmt.Errorf("RetryBackoff %v, %v: min must be positive and max at least min", c.backoffMin, c.backoffMax))
	}
	if c.idleWriter <= 0 {
		errs = append(errs, fmt.Errorf("IdleWriterTimeout %v: must be positive", c.idleWriter))
	}
	if c.logger == nil {
		errs = append(errs, errors.New("Logger: nil logger (leave the option out to disable logging)"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("writer: invalid options: %w", err)
	}
	return nil
}

// retryPolicy is the policy of one operation's retries (RetryBackoff,
// RetryTimeout).
func (c *config) retryPolicy() backoff.Policy {
	p := backoff.Exponential(c.backoffMin, c.backoffMax)
	p.Timeout = c.retryTimeout
	return p
}
