package writer

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceLog is a ProduceObserver that keeps what it was told.
type produceLog struct {
	mu       sync.Mutex
	inflight int
	sent     []ProduceRequestInfo
	done     []ProduceResult
}

func (l *produceLog) ProduceSent(info ProduceRequestInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight++
	l.sent = append(l.sent, info)
}

func (l *produceLog) ProduceDone(info ProduceRequestInfo, res ProduceResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	l.done = append(l.done, res)
}

func (l *produceLog) snapshot() (inflight int, sent []ProduceRequestInfo, done []ProduceResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight, append([]ProduceRequestInfo(nil), l.sent...), append([]ProduceResult(nil), l.done...)
}

// The observer is told of every ProduceRequest, its batch bytes and
// partitions, and how it ended (a partition answered with an error counts
// as failed), before the append it carried returns.
func TestObserverSeesEveryProduceRequest(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		return produceAnswer(req, kerr.NotLeaderForPartition.Code), nil, true // once: the append retries
	})
	var log produceLog
	p := openPartition(t, newWriter(t, c, Observer(&log), RetryBackoff(time.Millisecond, 10*time.Millisecond)), testTopic, 0, &recorder{})
	b0 := kvBatch(t, 0, -1, false, "a", "1")
	size0 := len(b0)
	mustAppend(t, p, b0)
	b1 := kvBatch(t, 1, -1, false, "b", "2", "c", "3")
	size1 := len(b1)
	mustAppend(t, p, b1)

	inflight, sent, done := log.snapshot()
	if inflight != 0 || len(sent) != 3 || len(done) != 3 {
		t.Fatalf("observer: %d in flight, %d sent, %d done; want 0, 3 (a refused request, its retry, the second append), 3", inflight, len(sent), len(done))
	}
	for i, want := range []int{size0, size0, size1} {
		if s := sent[i]; s.Bytes != want || s.Partitions != 1 || s.Transactional {
			t.Errorf("request %d: %+v, want %d bytes in 1 partition, not transactional", i, s, want)
		}
		if done[i].Latency <= 0 || done[i].Err != nil {
			t.Errorf("request %d: result %+v, want a latency and no request error", i, done[i])
		}
	}
	if done[0].FailedPartitions != 1 || done[1].FailedPartitions != 0 || done[2].FailedPartitions != 0 {
		t.Errorf("failed partitions %d, %d, %d; want 1 (NOT_LEADER), 0, 0", done[0].FailedPartitions, done[1].FailedPartitions, done[2].FailedPartitions)
	}
}
