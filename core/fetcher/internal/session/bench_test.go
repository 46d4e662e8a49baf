package session

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/fetcher/delivery"
	"github.com/kmirror/kmirror/core/fetcher/internal/wire"
)

// BenchmarkResponse measures what a session does with one fetch response
// once it has arrived: cutting and CRC-checking the batches of every
// partition, then, under the Manager's lock, delivering them and advancing
// the fetch offsets. No network.
func BenchmarkResponse(b *testing.B) {
	for _, tc := range []struct {
		parts, batches, recordBytes int
	}{
		{1, 64, 16 << 10},  // one busy partition, 1 MiB
		{4, 16, 16 << 10},  // four busy partitions, 1 MiB
		{100, 10, 1 << 10}, // many quiet partitions, 1 MiB
		{1000, 0, 0},       // watermarks only
	} {
		b.Run(fmt.Sprintf("%dx%dx%dB", tc.parts, tc.batches, tc.recordBytes), func(b *testing.B) {
			cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			m := testShared(cl)
			m.Config.MaxBuffered, m.Config.MaxBufferedSet = 1<<62, true
			s := New(m, Key{}, cl)
			id := [16]byte{1}
			in := &inflight{next: make(map[TP]sentEntry), names: map[[16]byte]string{id: "bench"}}
			resp := kmsg.NewPtrFetchResponse()
			resp.Version = 18
			resp.SessionID = 1
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = "bench", id
			value := make([]byte, tc.recordBytes)
			total := 0
			for p := range int32(tc.parts) {
				part := &Cursor{Key: TP{"bench", p}, TopicID: id, Phase: Active, Sink: delivery.SinkFunc(func(delivery.Fetched) {}), HW: -1, LSO: -1, LogStart: -1}
				s.Parts[part.Key] = part
				m.Parts[part.Key] = part
				in.next[part.Key] = sentEntry{p: part}
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition = p
				for i := range tc.batches {
					bt, err := batch.Encode(batch.EncodeOptions{BaseOffset: int64(i)}, []batch.Record{{Offset: int64(i), Value: value}})
					if err != nil {
						b.Fatal(err)
					}
					rp.RecordBatches = append(rp.RecordBatches, bt...)
				}
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = int64(tc.batches), int64(tc.batches), 0
				total += len(rp.RecordBatches)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
			b.SetBytes(int64(total))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				// Each round replays the same response from offset 0,
				// with watermarks that change, as fresh data would.
				for _, p := range s.Parts {
					p.Offset, p.HW = 0, -1
					p.Ledger.Reset() // as if acknowledged
				}
				s.epoch = int32(i%1000 + 1)
				scans := wire.Scan(resp)
				m.Mu.Lock()
				oor, _, _ := s.handle(in, resp, scans)
				m.Mu.Unlock()
				if len(oor) > 0 {
					b.Fatal("unexpected out of range")
				}
			}
			for _, p := range s.Parts {
				if p.Offset != int64(tc.batches) {
					b.Fatalf("%s at offset %d, want %d", p.Key, p.Offset, tc.batches)
				}
			}
		})
	}
}
