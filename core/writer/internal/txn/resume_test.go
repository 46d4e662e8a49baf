package txn

import (
	"math"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classify as a real broker would answer: a producer without an open
// transaction is listed by DescribeProducers (kfake lists only open ones).
func TestClassifyRecordedWriters(t *testing.T) {
	t.Parallel()
	p := NewSet(Config{Mirror: "test", Topic: "mirrored", Partition: 0, Log: hclog.NewNullLogger()})
	w := Info{SourceProducerID: 7, TransactionalID: p.ID(7), ProducerID: 1000, Epoch: 4}
	producer := func(epoch int32, lastSeq int32, start int64) *kmsg.DescribeProducersResponseTopicPartitionActiveProducer {
		return &kmsg.DescribeProducersResponseTopicPartitionActiveProducer{ProducerID: 1000, ProducerEpoch: epoch, LastSequence: lastSeq, CurrentTxnStartOffset: start}
	}
	ongoing := txnState{found: true, State: "Ongoing", ProducerID: 1000, Epoch: 4, hasPartition: true}
	empty := txnState{found: true, State: "CompleteCommit", ProducerID: 1000, Epoch: 4}
	for _, tc := range []struct {
		name     string
		st       txnState
		ap       *kmsg.DescribeProducersResponseTopicPartitionActiveProducer
		fate     writerFate
		open     bool
		seq      int32
		start    int64
		needInit bool
	}{
		{"unknown id", txnState{}, nil, fateExpired, false, 0, 0, false},
		{"dead id", txnState{found: true, State: "Dead", ProducerID: 1000, Epoch: 4}, nil, fateExpired, false, 0, 0, false},
		{"epoch bumped (timed out)", txnState{found: true, State: "CompleteAbort", ProducerID: 1000, Epoch: 5}, nil, fateLost, false, 0, 0, false},
		{"other producer id", txnState{found: true, State: "Empty", ProducerID: 2000, Epoch: 0}, nil, fateLost, false, 0, 0, false},
		{"ongoing elsewhere", txnState{found: true, State: "Ongoing", ProducerID: 1000, Epoch: 4}, nil, fateLost, false, 0, 0, false},
		{"fencing", txnState{found: true, State: "PrepareEpochFence", ProducerID: 1000, Epoch: 4}, nil, fateLost, false, 0, 0, false},
		{"ongoing with data", ongoing, producer(4, 9, 120), fateResumed, true, 10, 120, false},
		{"ongoing with data, sequence wraps", ongoing, producer(4, math.MaxInt32, 5), fateResumed, true, 0, 5, false},
		{"ongoing without data", ongoing, nil, fateResumed, true, 0, -1, false},
		// Re-initialised (epoch 4), partition added, no data yet: the leader
		// still lists the previous epoch's last sequence, which a new epoch
		// does not continue.
		{"ongoing without data, listed with the previous epoch", ongoing, producer(3, 41, -1), fateResumed, true, 0, -1, false},
		{"idle, listed", empty, producer(4, 41, -1), fateIdle, false, 42, -1, false},
		{"idle, listed with another epoch", empty, producer(3, 41, -1), fateIdle, false, 0, -1, true},
		{"idle, not listed", empty, nil, fateIdle, false, 0, -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tw, fate := p.classify(w, tc.st, tc.ap)
			if fate != tc.fate {
				t.Fatalf("fate %d, want %d", fate, tc.fate)
			}
			if tw == nil {
				if fate == fateResumed || fate == fateIdle {
					t.Fatal("no writer for a kept fate")
				}
				return
			}
			if tw.Info != w || tw.Open != tc.open || tw.Seq != tc.seq || tw.StartOffset != tc.start || tw.NeedInit != tc.needInit {
				t.Fatalf("writer %+v, want open %v seq %d start %d needInit %v", *tw, tc.open, tc.seq, tc.start, tc.needInit)
			}
		})
	}
}
