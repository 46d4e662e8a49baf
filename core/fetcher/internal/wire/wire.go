// Package wire holds the fetcher's Kafka requests and responses that carry
// no fetcher state: the version-capped FetchRequest, a response's records
// cut into batches, closing a broker's fetch session, the ListOffsets and
// Metadata requests, which Kafka errors are worth retrying, and Kafka's
// fetcher id hash.
package wire

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
)

// FetchRequest is a FetchRequest whose highest version the session decides:
// sessions without topic ids stay at v12 (names), since kgo picks the
// version only at send time. Timeout lets kgo extend the read deadline by
// the long-poll wait, as it does for its own fetches.
type FetchRequest struct {
	*kmsg.FetchRequest
	// Highest is the highest version to send.
	Highest int16
}

// MaxVersion is Highest.
func (r *FetchRequest) MaxVersion() int16 { return r.Highest }

// Timeout is the long-poll wait, in milliseconds.
func (r *FetchRequest) Timeout() int32 { return r.MaxWaitMillis }

// Scanned is one partition's Records cut into whole, CRC-checked batches.
type Scanned struct {
	Batches []batch.Batch
	Err     error  // the batch at Rest is invalid
	Rest    []byte // trailing partial batch, or the invalid batch onwards
}

// ScannedResponse is a response's partitions cut into batches.
type ScannedResponse struct {
	Parts [][]Scanned // indexed like resp.Topics and their Partitions
	Bytes int         // record bytes of the whole response
}

// Scan cuts every partition's Records.
func Scan(resp *kmsg.FetchResponse) *ScannedResponse {
	sr := &ScannedResponse{Parts: make([][]Scanned, len(resp.Topics))}
	out := sr.Parts
	for i := range resp.Topics {
		parts := resp.Topics[i].Partitions
		out[i] = make([]Scanned, len(parts))
		for j := range parts {
			if len(parts[j].RecordBatches) == 0 {
				continue
			}
			sr.Bytes += len(parts[j].RecordBatches)
			sc := batch.NewScanner(parts[j].RecordBatches)
			var bs []batch.Batch
			for sc.Next() {
				bs = append(bs, sc.Batch())
			}
			out[i][j] = Scanned{Batches: bs, Err: sc.Err(), Rest: sc.Rest()}
		}
	}
	return sr
}

// RecordBytes is the size of a response's Records, over all partitions.
func RecordBytes(resp *kmsg.FetchResponse) int {
	n := 0
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			n += len(resp.Topics[i].Partitions[j].RecordBatches)
		}
	}
	return n
}

// NextEpoch is the fetch session epoch after e (it wraps to 1, not 0).
func NextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// CloseSession tells broker to drop fetch session id (epoch -1), so
// stopped mirrors do not hold slots of its session cache. It waits at most
// timeout, even when ctx is already done.
func CloseSession(ctx context.Context, cl *kgo.Client, broker, id int32, timeout time.Duration) error {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.SessionID = id
	req.SessionEpoch = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 0
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	_, err := cl.Broker(int(broker)).Request(cctx, &FetchRequest{FetchRequest: req, Highest: req.MaxVersion()})
	return err
}

// Partition names a topic's partition.
type Partition struct {
	Topic     string
	Partition int32
}

// ListOffsets returns the offsets for timestamp ts (-2 log start, -1 end)
// of parts, leaving out any it cannot read.
func ListOffsets(ctx context.Context, cl *kgo.Client, parts []Partition, ts int64) (map[Partition]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	idx := make(map[string]int)
	for _, k := range parts {
		i, ok := idx[k.Topic]
		if !ok {
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = k.Topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
			idx[k.Topic] = i
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition = k.Partition
		p.Timestamp = ts
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	out := make(map[Partition]int64)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return out, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Offset >= 0 {
				out[Partition{t.Topic, p.Partition}] = p.Offset
			}
		}
	}
	return out, nil
}

// Metadata reads the metadata of topics, never creating one.
func Metadata(ctx context.Context, cl *kgo.Client, topics map[string]struct{}) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = false
	return req.RequestWith(ctx, cl)
}

// IsAuthenticationErr reports whether err is a SASL failure on a broker
// connection.
func IsAuthenticationErr(err error) bool {
	return errors.Is(err, kerr.SaslAuthenticationFailed) ||
		errors.Is(err, kerr.IllegalSaslState) ||
		errors.Is(err, kerr.UnsupportedSaslMechanism)
}

// Retriable reports whether a partition error code is worth retrying from
// fresh metadata rather than failing the partition.
func Retriable(err error) bool {
	switch {
	case errors.Is(err, kerr.NotLeaderForPartition),
		errors.Is(err, kerr.FencedLeaderEpoch),
		errors.Is(err, kerr.UnknownLeaderEpoch),
		errors.Is(err, kerr.LeaderNotAvailable),
		errors.Is(err, kerr.ReplicaNotAvailable),
		errors.Is(err, kerr.KafkaStorageError),
		errors.Is(err, kerr.UnknownTopicOrPartition),
		errors.Is(err, kerr.UnknownTopicID),
		errors.Is(err, kerr.InconsistentTopicID),
		errors.Is(err, kerr.OffsetNotAvailable),
		errors.Is(err, kerr.NotCoordinator),
		errors.Is(err, kerr.RequestTimedOut),
		errors.Is(err, kerr.UnknownServerError):
		return true
	}
	return kerr.IsRetriable(err)
}

// FetcherID is Kafka's AbstractFetcherManager.getFetcherId:
// abs(31 * topic.hashCode() + partition) % n, with Java's String.hashCode
// over UTF-16 code units, so a partition lands on the same fetcher id as on
// a Kafka broker.
func FetcherID(topic string, partition int32, n int) int {
	if n <= 1 {
		return 0
	}
	var h int32
	for _, c := range utf16.Encode([]rune(topic)) {
		h = 31*h + int32(c)
	}
	v := 31*h + partition
	if v == -1<<31 {
		v = 0 // Kafka's Utils.abs
	} else if v < 0 {
		v = -v
	}
	return int(v) % n
}

// UUIDString renders a topic id in the 8-4-4-4-12 hex form.
func UUIDString(id [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
}
