package raw

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

// The raw forwarder copies every batch of every partition to the
// destination, in order, with several ProduceRequests in flight: each
// destination partition holds the source partition's records at the same
// offsets, byte for byte.
func TestRawForwarderCopiesEveryPartitionInOrder(t *testing.T) {
	const topic, partitions, perPartition = "raw", 3, 2000
	src := kfaketest.NewCluster(t, kfake.SeedTopics(partitions, topic))
	dst := kfaketest.NewCluster(t)
	prod := kfaketest.NewClient(t, src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(4096), kgo.ProducerLinger(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for i := range partitions * perPartition {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: fmt.Appendf(nil, "record-%06d-%s", i, strings.Repeat("x", 100))})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(fctx, Options{
			Source: strings.Join(src.ListenAddrs(), ","), Destination: strings.Join(dst.ListenAddrs(), ","), Topic: topic,
			InFlight: 5, FetchMaxBytes: 8 << 10, ResponseMaxBytes: 64 << 10, PartitionQueue: 32 << 10, TotalQueue: 64 << 10,
		})
	}()
	adm := kfaketest.NewAdmin(t, dst)
	kfaketest.WaitFor(t, "every record copied to the destination", func() (bool, string) {
		ends, err := adm.ListEndOffsets(ctx, topic)
		n := int64(0)
		if err == nil {
			ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		}
		if n >= partitions*perPartition {
			return true, ""
		}
		select {
		case err := <-done:
			t.Fatalf("the forwarder stopped with %d of %d records copied: %v", n, partitions*perPartition, err)
		default:
		}
		if err != nil {
			return false, fmt.Sprintf("listing the destination's end offsets: %v", err)
		}
		return false, fmt.Sprintf("%d of %d records copied", n, partitions*perPartition)
	})
	stop()
	if err := <-done; err != nil && fctx.Err() == nil {
		t.Fatalf("forwarder: %v", err)
	}

	read := func(c *kfake.Cluster) map[int32][]*kgo.Record {
		cl := kfaketest.NewClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		out := map[int32][]*kgo.Record{}
		for n := 0; n < partitions*perPartition; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("reading back: %d records: %v", n, ctx.Err())
			}
			fs.EachRecord(func(r *kgo.Record) { out[r.Partition] = append(out[r.Partition], r); n++ })
		}
		return out
	}
	want, got := read(src), read(dst)
	for p := int32(0); p < partitions; p++ {
		if len(got[p]) != len(want[p]) {
			t.Fatalf("partition %d: %d records on the destination, %d on the source", p, len(got[p]), len(want[p]))
		}
		for i := range want[p] {
			if got[p][i].Offset != want[p][i].Offset || !bytes.Equal(got[p][i].Value, want[p][i].Value) {
				t.Fatalf("partition %d record %d: offset %d %q, want offset %d %q", p, i, got[p][i].Offset, got[p][i].Value, want[p][i].Offset, want[p][i].Value)
			}
		}
	}
}

// A flexible response's header tags are skipped and the body decoded for the
// request's version; a wrong correlation id is an error.
func TestParseResponseSkipsHeaderTagsAndChecksTheCorrelationID(t *testing.T) {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.SetVersion(9)
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceResponseTopicPartition()
	rp.Partition, rp.BaseOffset, rp.ErrorCode = 2, 42, 6
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)

	body := []byte{0, 0, 0, 7}               // correlation id
	body = append(body, 1, 5, 2, 0xAA, 0xBB) // one header tag: key 5, two bytes
	body = resp.AppendTo(body)
	parsed, err := parseResponse(req, 7, body)
	if err != nil {
		t.Fatal(err)
	}
	got := parsed.(*kmsg.ProduceResponse)
	if len(got.Topics) != 1 || got.Topics[0].Topic != "t" || len(got.Topics[0].Partitions) != 1 {
		t.Fatalf("parsed %+v", got)
	}
	if p := got.Topics[0].Partitions[0]; p.Partition != 2 || p.BaseOffset != 42 || p.ErrorCode != 6 {
		t.Errorf("partition %+v, want partition 2 base offset 42 error 6", p)
	}
	if _, err := parseResponse(req, 8, body); err == nil {
		t.Error("a response with another correlation id was accepted")
	}
}
