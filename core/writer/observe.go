package writer

import "github.com/kmirror/kmirror/core/writer/internal/produce"

// ProduceObserver is told of every ProduceRequest a Writer sends, for
// metrics (request latency, requests in flight, bytes produced). Its methods
// are called from the sink workers, up to MaxInflightPerBroker at once per
// destination broker: they must be safe for concurrent use, return
// promptly and not call the Writer.
type ProduceObserver = produce.Observer

// ProduceRequestInfo describes one ProduceRequest: the broker, its
// partitions and bytes, whether it is transactional.
type ProduceRequestInfo = produce.RequestInfo

// ProduceResult is how a ProduceRequest ended: its latency, its error when
// it failed as a whole, and how many of its partitions failed.
type ProduceResult = produce.Result
