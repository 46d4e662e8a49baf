package writer

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OnRetry is told what an append waits for while it is retried — here a
// broker whose disk is full (KAFKA_STORAGE_ERROR, twice) — and nil once it
// lands; an append that lands at once tells it nothing.
func TestOnRetryIsToldWhatAnAppendWaitsForAndWhenItLands(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	refusals := 2
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if refusals == 0 {
			return nil, nil, false
		}
		refusals--
		return produceAnswer(req, kerr.KafkaStorageError.Code), nil, true
	})
	p := openPartition(t, newWriter(t, c, RetryBackoff(time.Millisecond, 10*time.Millisecond)), testTopic, 0, &recorder{})
	var (
		mu   sync.Mutex
		told []error
	)
	p.OnRetry(func(err error) {
		mu.Lock()
		told = append(told, err)
		mu.Unlock()
	})
	mustAppend(t, p, kvBatch(t, 0, -1, false, "a", "1"))
	mustAppend(t, p, kvBatch(t, 1, -1, false, "b", "2"))

	mu.Lock()
	defer mu.Unlock()
	if len(told) != 3 || !errors.Is(told[0], kerr.KafkaStorageError) || !errors.Is(told[1], kerr.KafkaStorageError) || told[2] != nil {
		t.Fatalf("OnRetry was told %v; want KAFKA_STORAGE_ERROR twice, then nil (the first append landed), and nothing for the second", told)
	}
}
