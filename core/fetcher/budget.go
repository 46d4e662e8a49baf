package fetcher

import "github.com/kmirror/kmirror/core/fetcher/internal/budget"

// DefaultBudgetBytes is the default of mirror.buffer.max.bytes: 64 MiB,
// so that a daemon catching up on hundreds of partitions stays well under
// 256 MiB of resident memory (docs/design/datapath.md, "Memory").
const DefaultBudgetBytes = 64 << 20

// Budget bounds the bytes buffered between fetch and append for every
// Manager that shares it (one per daemon; franz-go's MaxBufferedBytes is the
// model). Bytes count from the moment a fetch is sent (its response's
// possible size is reserved) and, once delivered, until the runner
// acknowledges them with Manager.Done.
//
// A session sends a fetch only when its reservation fits in what remains,
// capping the response's MaxBytes to it, so the bytes buffered never exceed
// the budget by more than one batch (Kafka returns the first batch of a
// response whole even when it is larger than MaxBytes). When nothing at all
// is buffered or reserved a fetch is always allowed, so a batch larger than
// the budget is still fetched.
//
// The budget also sets how much one partition fetches per request:
// min(replica.fetch.max.bytes, budget / partitions), rounded down to a power
// of two and at least 16 KiB, so that fetch sizes shrink as the number of
// mirrored partitions grows.
//
// All methods are safe for concurrent use. The mechanism is in
// core/fetcher/internal/budget.
type Budget struct{ b *budget.Budget }

// NewBudget returns a budget of max bytes (at least 1).
func NewBudget(max int64) *Budget { return &Budget{b: budget.New(max)} }

// SetMax changes the budget (at least 1), e.g. on a configuration reload.
// A smaller budget takes effect as buffered bytes are acknowledged.
func (b *Budget) SetMax(n int64) { b.b.SetMax(n) }

// Max is the budget in bytes.
func (b *Budget) Max() int64 { return b.b.Max() }

// Buffered is how many bytes are delivered and not yet acknowledged, over
// every Manager that shares the budget.
func (b *Budget) Buffered() int64 { return b.b.Buffered() }

// Reserved is how many bytes fetches in flight may still bring.
func (b *Budget) Reserved() int64 { return b.b.Reserved() }
