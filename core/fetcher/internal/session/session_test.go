package session

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/fetcher/delivery"
	"github.com/kmirror/kmirror/core/fetcher/internal/wire"
)

// Delivered batches alias their response's buffer. The part of the buffer
// that no delivery counts (here a batch before the fetch offset, dropped)
// stays in the budget until the last delivery aliasing the buffer is
// acknowledged, so the budget counts what the buffer really holds.
func TestResponseBufferCountsUntilItsLastDeliveryIsAcknowledged(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	m := testShared(cl)
	s := New(m, Key{}, cl)
	got := map[int32][]batch.Batch{}
	in := &inflight{next: make(map[TP]sentEntry), names: map[[16]byte]string{}}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "pin"
	buf := make([]byte, 0, 1<<20) // one response buffer, never grown
	var sizes [2]int
	// Partition 0: 8 batches of 1 KiB from offset 0. Partition 1: 2
	// batches, fetched from offset 1, so the first is dropped.
	for p, n := range []int{8, 2} {
		part := &Cursor{Key: TP{"pin", int32(p)}, Phase: Active, HW: -1, LSO: -1, LogStart: -1, Offset: int64(p),
			Sink: delivery.SinkFunc(func(f delivery.Fetched) { got[f.Partition] = f.Batches })}
		s.Parts[part.Key], m.Parts[part.Key] = part, part
		in.next[part.Key] = sentEntry{p: part, offset: part.Offset, maxBytes: 1 << 20}
		start := len(buf)
		for i := range n {
			bt, err := batch.Encode(batch.EncodeOptions{BaseOffset: int64(i)}, []batch.Record{{Offset: int64(i), Value: make([]byte, 1024)}})
			if err != nil {
				t.Fatal(err)
			}
			buf = append(buf, bt...)
			sizes[p] = len(bt)
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = int32(p)
		rp.RecordBatches = buf[start:len(buf):len(buf)]
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, rt)
	m.Mu.Lock()
	_, _, counted := s.handle(in, resp, wire.Scan(resp))
	m.Budget.Settle(0, counted) // what the session does once handle returns
	m.Mu.Unlock()

	n0, n1 := int64(8*sizes[0]), int64(sizes[1])
	if len(got[0]) != 8 || len(got[1]) != 1 || counted != int64(len(buf)) {
		t.Fatalf("delivered %d and %d batches, %d bytes counted; want 8 and 1, and the whole %d-byte response", len(got[0]), len(got[1]), counted, len(buf))
	}
	check := func(when string, want int64) {
		t.Helper()
		if st := stats(m); st.BufferedBytes != want || st.BudgetBufferedBytes != want {
			t.Errorf("%s: buffered %d, budget %d; want %d", when, st.BufferedBytes, st.BudgetBufferedBytes, want)
		}
	}
	check("delivered", int64(len(buf)))
	done(m, "pin", 1, int(n1))
	check("the small partition acknowledged", n0+int64(len(buf))-n0-n1)
	done(m, "pin", 0, int(n0/2))
	check("half of the large partition acknowledged", int64(len(buf))-n1-n0/2)
	done(m, "pin", 0, int(n0-n0/2))
	check("everything acknowledged", 0)
}
