package writer

import "time"

// ProduceObserver is told of every ProduceRequest a Writer sends, for
// metrics (request latency, requests in flight, bytes produced). Its methods
// are called from the sink workers, up to MaxInflightPerBroker at once per
// destination broker: they must be safe for concurrent use, return
// promptly and not call the Writer.
type ProduceObserver interface {
	// ProduceSent is called just before a request is sent.
	ProduceSent(ProduceRequestInfo)
	// ProduceDone is called once its answer is in (or it failed as a
	// whole), before the appends it carried return.
	ProduceDone(ProduceRequestInfo, ProduceResult)
}

// ProduceRequestInfo describes one ProduceRequest.
type ProduceRequestInfo struct {
	Broker        int32 // the destination broker's node id
	Partitions    int   // partitions (one batch each) in the request
	Bytes         int   // record batch bytes in the request
	Transactional bool  // the request carries a transactional id
}

// ProduceResult is how a ProduceRequest ended.
type ProduceResult struct {
	Latency time.Duration // from send to answer
	// Err is set when the request failed as a whole (transport, timeout,
	// the Writer closing); every partition of it is then failed.
	Err error
	// FailedPartitions counts the partitions answered with an error code,
	// or not answered (each is retried or returned by its append).
	FailedPartitions int
}
