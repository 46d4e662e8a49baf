package fetcher

import "github.com/kmirror/kmirror/core/fetcher/delivery"

// The delivery contract with a partition's consumer lives in core/fetcher/delivery,
// which a consumer can import alone; these names keep it reachable here.
type (
	// Fetched is one delivery for one partition (delivery.Fetched).
	Fetched = delivery.Fetched
	// Sink receives a partition's deliveries (delivery.Sink).
	Sink = delivery.Sink
	// SinkFunc adapts a function to Sink (delivery.SinkFunc).
	SinkFunc = delivery.SinkFunc
	// Queue is a Sink for one consumer goroutine (delivery.Queue).
	Queue = delivery.Queue
)

// NewQueue returns an empty Queue.
func NewQueue() *Queue { return delivery.NewQueue() }
