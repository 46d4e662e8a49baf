package mirror

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// produceBig writes one record of size random (incompressible) bytes to
// partition 0 of topic, as one uncompressed batch.
func (f *fixture) produceBig(t *testing.T, topic string, size int) {
	t.Helper()
	cl := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(int32(size+1<<20)))
	v := make([]byte, size)
	_, _ = rand.Read(v)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Partition: 0, Value: v}).FirstErr(); err != nil {
		t.Fatalf("producing a %d-byte record to %s: %v", size, topic, err)
	}
}

// failures returns how often the mirror's partitions went to FAILED.
func failures(t *testing.T, e *Engine) float64 {
	t.Helper()
	var n float64
	for _, from := range []string{"PREPARING", "MIRRORING"} {
		v, _, err := e.opts.Metrics.Value("kmirror_partition_state_transitions_total", map[string]string{"mirror": "test", "from": from, "to": "FAILED"})
		if err != nil {
			t.Fatal(err)
		}
		n += v
	}
	return n
}

// TestBatchAboveADestinationLimitBelowTheSourcesIsMirrored: the destination
// topic exists with a max.message.bytes below the source's (an operator
// created it, or an older kmirror copied no broker-level limit); a source
// batch between the two limits is mirrored without a failure, and the
// destination's limit ends at the source's.
func TestBatchAboveADestinationLimitBelowTheSourcesIsMirrored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "big", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("3145728")})
	kfaketest.CreateTopic(t, f.dstCl, "big", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("200000")})
	f.produce(t, "big", 10, "tx-big")
	f.produceBig(t, "big", 2<<20)
	f.produce(t, "big", 10, "tx-big")
	e := startEngine(t, f.config(t, "big"), memstore.New())
	f.waitMirrored(t, e, "big", 1)
	f.verify(t, "big", 1)
	if n := failures(t, e); n != 0 {
		t.Fatalf("the partition failed %v times on the way", n)
	}
	if got := dynamicConfigs(t, f.dstCl, "big")["max.message.bytes"]; got != "3145728" {
		t.Fatalf("destination max.message.bytes = %q, want the source's 3145728", got)
	}
}

// TestBatchTheDestinationRefusesFailsThePartitionAtOnceNamingBothLimits:
// with max.message.bytes excluded (kmirror may not set it), a source batch
// above the destination's limit fails the partition at the first refusal,
// non-retryable, with a reason naming the batch size, both limits and the
// key to raise; the mirror status warns about the lower limit beforehand.
func TestBatchTheDestinationRefusesFailsThePartitionAtOnceNamingBothLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "huge", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("3145728")})
	f.produce(t, "huge", 10, "tx-huge")
	f.produceBig(t, "huge", 2<<20)
	e := startEngine(t, f.config(t, "huge", `    mirror.topic.properties.exclude: "max.message.bytes,min.insync.replicas"`), memstore.New())
	var ps admin.PartitionStatus
	kfaketest.WaitFor(t, "partition FAILED", func() (bool, string) {
		st := e.Status()
		if len(st.Mirrors) == 1 && len(st.Mirrors[0].Partitions) == 1 {
			ps = st.Mirrors[0].Partitions[0]
		}
		return ps.State == "FAILED", fmt.Sprintf("%+v", ps)
	})
	if ps.Retry != "NonRetryable" {
		t.Fatalf("retry = %q, want NonRetryable (the same batch would be refused again)", ps.Retry)
	}
	for _, want := range []string{"mirror test", "topic huge partition 0", "record batch of 2097", "3145728 (set on the topic)", "1048588 (the brokers' message.max.bytes)",
		"mirror.topic.properties.exclude", "set max.message.bytes of destination topic huge to at least", "MESSAGE_TOO_LARGE"} {
		if !strings.Contains(ps.LastError, want) {
			t.Errorf("reason %q does not contain %q", ps.LastError, want)
		}
	}
	if n := failures(t, e); n != 1 {
		t.Fatalf("the partition went to FAILED %v times, want once", n)
	}
	if ps.LastMirroredOffset < 0 {
		t.Fatalf("nothing before the big batch was mirrored: %+v", ps)
	}
	kfaketest.WaitFor(t, "status warns about the excluded lower limit", func() (bool, string) {
		errs := e.Status().Mirrors[0].TopicConfigErrors
		return len(errs) == 1 && errs[0].Topic == "huge" && errs[0].Key == "max.message.bytes" && strings.Contains(errs[0].Error, "below the source topic's 3145728"), fmt.Sprintf("%+v", errs)
	})
	if _, ok := dynamicConfigs(t, f.dstCl, "huge")["max.message.bytes"]; ok {
		t.Fatal("the excluded max.message.bytes was set on the destination")
	}
}

// TestBatchRefusedWhenTheDestinationWillNotRaiseItsLimit: a destination
// whose policy refuses max.message.bytes gets the topic without it; the
// first batch above its limit fails the partition at once, and the reason
// says why kmirror could not raise the limit.
func TestBatchRefusedWhenTheDestinationWillNotRaiseItsLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "fixed", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("3145728")})
	f.produceBig(t, "fixed", 2<<20)
	policy := "max.message.bytes is fixed on this cluster"
	f.dst.ControlKey(kmsg.CreateTopics.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		f.dst.KeepControl()
		req := kr.(*kmsg.CreateTopicsRequest)
		for _, rt := range req.Topics {
			for _, c := range rt.Configs {
				if c.Name == "max.message.bytes" {
					resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
					st := kmsg.NewCreateTopicsResponseTopic()
					st.Topic, st.ErrorCode, st.ErrorMessage = rt.Topic, kerr.PolicyViolation.Code, &policy
					resp.Topics = append(resp.Topics, st)
					return resp, nil, true
				}
			}
		}
		return nil, nil, false
	})
	f.dst.ControlKey(kmsg.IncrementalAlterConfigs.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		f.dst.KeepControl()
		req := kr.(*kmsg.IncrementalAlterConfigsRequest)
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			rr.ErrorCode, rr.ErrorMessage = kerr.PolicyViolation.Code, &policy
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
	e := startEngine(t, f.config(t, "fixed"), memstore.New())
	var ps admin.PartitionStatus
	kfaketest.WaitFor(t, "partition FAILED", func() (bool, string) {
		st := e.Status()
		if len(st.Mirrors) == 1 && len(st.Mirrors[0].Partitions) == 1 {
			ps = st.Mirrors[0].Partitions[0]
		}
		return ps.State == "FAILED", fmt.Sprintf("%+v", ps)
	})
	if ps.Retry != "NonRetryable" {
		t.Fatalf("retry = %q, want NonRetryable", ps.Retry)
	}
	for _, want := range []string{"3145728 (set on the topic)", "1048588 (the brokers' message.max.bytes)", "set max.message.bytes of destination topic fixed to at least",
		"or raise message.max.bytes of the destination brokers", "kmirror could not raise the destination's limit itself", "POLICY_VIOLATION"} {
		if !strings.Contains(ps.LastError, want) {
			t.Errorf("reason %q does not contain %q", ps.LastError, want)
		}
	}
	if n := failures(t, e); n != 1 {
		t.Fatalf("the partition went to FAILED %v times, want once", n)
	}
}

// produceRaw writes batch b as it is to partition 0 of topic on the source.
func (f *fixture) produceRaw(t *testing.T, topic string, b []byte) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	td, err := kadm.NewClient(f.srcCl).ListTopics(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, td[topic].ID // Produce v13 names topics by id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, b
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), f.srcCl.Broker(int(td[topic].Partitions[0].Leader)))
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("producing a raw batch to %s: %v", topic, err)
	}
}

// zstdBomb returns a batch of one record by its header whose zstd records
// section, a few kilobytes, inflates to size bytes of zeros; streamed, so
// that the frame does not declare its size.
func zstdBomb(t *testing.T, size int) []byte {
	t.Helper()
	plain, err := batch.Encode(batch.EncodeOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, []batch.Record{{Value: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	var section bytes.Buffer
	zw, err := zstd.NewWriter(&section, zstd.WithWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b := append(append([]byte{}, plain[:batch.HeaderSize]...), section.Bytes()...)
	binary.BigEndian.PutUint16(b[21:], uint16(batch.CompressionZstd))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// TestMapModeBatchOverTheDecodingBoundFailsThePartition: a partition in map
// mode (source log start beyond the filler budget) meets a zstd batch of a
// few kilobytes that inflates to 256 MiB; the destination topic's
// max.message.bytes is 100000, so the bound is the 16 MiB floor. The
// partition fails at once, non-retryable, with a reason naming the topic,
// partition, the batch's offsets and the bound; what came before it is
// mirrored.
func TestMapModeBatchOverTheDecodingBoundFailsThePartition(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "bomb", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("100000")})
	plain := kfaketest.NewClient(t, f.src, kgo.DefaultProduceTopic("bomb"))
	for i := 0; i < 5; i++ {
		if err := plain.ProduceSync(context.Background(), &kgo.Record{Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "bomb", Partition: 0, At: 2})
	if _, err := kadm.NewClient(f.srcCl).DeleteRecords(context.Background(), os); err != nil {
		t.Fatal(err)
	}
	bomb := zstdBomb(t, 256<<20)
	f.produceRaw(t, "bomb", bomb)
	cfg := f.config(t, "bomb")
	cfg.OffsetAlignmentMaxRecords = 0 // a log start beyond 0 means map mode
	e := startEngine(t, cfg, memstore.New())
	var ps admin.PartitionStatus
	kfaketest.WaitFor(t, "partition FAILED", func() (bool, string) {
		st := e.Status()
		if len(st.Mirrors) == 1 && len(st.Mirrors[0].Partitions) == 1 {
			ps = st.Mirrors[0].Partitions[0]
		}
		return ps.State == "FAILED", fmt.Sprintf("%+v", ps)
	})
	if ps.Retry != "NonRetryable" || ps.Mode != "map" {
		t.Fatalf("retry %q, mode %q; want NonRetryable in map mode (%s)", ps.Retry, ps.Mode, ps.LastError)
	}
	for _, want := range []string{"mirror test: topic bomb partition 0", "offsets 5 to 5", fmt.Sprintf("section of %d bytes", len(bomb)-batch.HeaderSize),
		"the bound is 16777216 bytes", "max.message.bytes 100000", "raise max.message.bytes of destination topic bomb"} {
		if !strings.Contains(ps.LastError, want) {
			t.Errorf("reason %q does not contain %q", ps.LastError, want)
		}
	}
	if ps.LastMirroredOffset != 4 {
		t.Fatalf("last mirrored offset %d, want 4 (offsets 2 to 4 before the batch)", ps.LastMirroredOffset)
	}
	if n := failures(t, e); n != 1 {
		t.Fatalf("the partition went to FAILED %v times, want once", n)
	}
}
