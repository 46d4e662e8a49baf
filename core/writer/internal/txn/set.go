// Package txn holds the destination transactional writers of one
// partition: the destination producers that replay the transactions of the
// source's producers. A [Set] creates each writer (its transactional id
// recorded before first use), opens and ends its transactions
// (InitProducerId, AddPartitionsToTxn, EndTxn, transaction protocol v1),
// resumes the writers recorded before a restart from what the
// destination's coordinators and partition leader hold, and forgets idle
// ones. The Partition of core/writer drives them; the types its callers see
// are aliased there.
package txn

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/writer/internal/cluster"
)

// Request versions pinned to transaction protocol v1 (see core/writer's
// package doc): EndTxn v5 would bump the epoch after every transaction
// (KIP-890 part 2).
const (
	InitProducerIDVersion     int16 = 4
	AddPartitionsToTxnVersion int16 = 3
	EndTxnVersion             int16 = 4
)

// Sentinel errors, documented where core/writer re-exports them.
var (
	ErrUnresumedTransaction = errors.New("destination transaction is open for a transactional id that was not resumed")
	ErrWriterLost           = errors.New("destination transactional writer was fenced or its transaction aborted by the destination")
)

// Info identifies a destination transactional writer: the
// destination producer that replays the transactions of one source producer
// on one partition. The runner persists it (OnTxnWriter) before the writer
// opens a transaction, and hands the recorded ones to Partition.Resume after
// a restart.
type Info struct {
	// SourceProducerID is the source producer whose transactions the
	// writer replays.
	SourceProducerID int64 `json:"source_producer_id"`
	// TransactionalID is
	// kmirror-<mirror>:<topic>:<partition>:<source producer id>, e.g.
	// kmirror-dc1:eu-orders:0:4001. Mirror names ([A-Za-z0-9._-]) and
	// topic names ([A-Za-z0-9._-], at most 249 characters) never hold ':',
	// so two writers of different mirrors, topics or partitions never share
	// an id and never fence each other. Nothing is hashed: an id is at most
	// the mirror name plus 290 bytes, far below the 32767 bytes Kafka allows
	// for a transactional.id (a protocol string), and it keeps the
	// kmirror- prefix that ACLs on TransactionalId can match.
	//
	// Writers recorded by kmirror before this format hold
	// kmirror-<mirror>-<topic>-<partition>-<source producer id> (ambiguous:
	// mirror dc1 with topic eu-orders and mirror dc1-eu with topic orders
	// share it). Resume accepts such a writer of the partition so the
	// transaction it left open is finished under its id; once that
	// transaction ends the writer is retired, and the source producer's
	// next transaction gets a writer with the current format.
	TransactionalID string `json:"transactional_id"`
	// ProducerID and Epoch are what the destination's InitProducerId
	// assigned.
	ProducerID int64 `json:"producer_id"`
	Epoch      int16 `json:"epoch"`
}

// OpenTransaction is a destination transaction the partition holds open.
type OpenTransaction struct {
	Writer Info
	// StartOffset is the destination offset of the transaction's first
	// batch on the partition, -1 while it holds no data (a marker-only
	// transaction being opened, or one resumed without data).
	StartOffset int64
}

// Writer is a destination transactional writer of the partition. A Set's
// operations and the Partition (under its operation lock) change its
// fields; Info, Open and StartOffset change under the Set's Locked, since
// OpenTransactions and TxnWriters read them at any time.
type Writer struct {
	Info        Info
	Coordinator int32 // -1: look it up
	Seq         int32
	Open        bool
	StartOffset int64
	LastUsed    time.Time
	NeedInit    bool      // InitProducerId (a new epoch) before the next use; nothing is open
	Stale       bool      // open/sequence unknown after a failure: re-read from the destination
	Confirmed   time.Time // when the destination last answered an append of it (see core/writer's confirmTTL)
}

// Config is what a Set needs of its partition.
type Config struct {
	Dest      *cluster.Client
	Mirror    string
	Topic     string
	Partition int32
	// OnTxnWriter records a writer's producer id and epoch before any
	// transaction is opened with it (core/writer's Writer.Partition).
	OnTxnWriter func(context.Context, Info) error
	Log         hclog.Logger
}

// Set is the transactional writers of one destination partition, by
// source producer id.
type Set struct {
	dest        *cluster.Client
	mirror      string
	topic       string
	partition   int32
	onTxnWriter func(context.Context, Info) error
	log         hclog.Logger

	// mu guards writers, and the Info, Open and StartOffset fields of the
	// writers, which Open and Infos read while an operation runs.
	// Operations (one at a time, under the Partition's operation lock)
	// read them without it.
	mu      sync.Mutex
	writers map[int64]*Writer
}

// NewSet returns the empty set of cfg's partition.
func NewSet(cfg Config) *Set {
	return &Set{
		dest: cfg.Dest, mirror: cfg.Mirror, topic: cfg.Topic, partition: cfg.Partition,
		onTxnWriter: cfg.OnTxnWriter, log: cfg.Log, writers: make(map[int64]*Writer),
	}
}

// Get returns the writer of source producer src, nil when there is none.
// For operations (under the Partition's operation lock).
func (s *Set) Get(src int64) *Writer { return s.writers[src] }

// Add keeps tw as the writer of its source producer.
func (s *Set) Add(tw *Writer) {
	s.mu.Lock()
	s.writers[tw.Info.SourceProducerID] = tw
	s.mu.Unlock()
}

// Locked runs fn under the set's lock: for operations changing what Open
// and Infos read.
func (s *Set) Locked(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn()
}

// errorf wraps err with the mirror, the destination partition and what
// failed, as core/writer's Partition does.
func (s *Set) errorf(what string, err error) error {
	return cluster.Where{Mirror: s.mirror, Topic: s.topic, Partition: s.partition}.Errorf(what, err)
}

// wrap wraps err, which says what failed, with the mirror and the
// destination partition.
func (s *Set) wrap(err error) error {
	return cluster.Where{Mirror: s.mirror, Topic: s.topic, Partition: s.partition}.Wrap(err)
}

// ID returns the destination transactional id of the writer replaying
// source producer src on the set's partition (see Info.TransactionalID).
func (s *Set) ID(src int64) string { return ID(s.mirror, s.topic, s.partition, src) }

// ID returns the destination transactional id of mirror's writer
// replaying source producer src on topic/partition:
// kmirror-<mirror>:<topic>:<partition>:<source producer id>.
func ID(mirror, topic string, partition int32, src int64) string {
	return "kmirror-" + mirror + ":" + topic + ":" + strconv.Itoa(int(partition)) + ":" + strconv.FormatInt(src, 10)
}

// LegacyID is the transactional id kmirror gave the writer before ids
// became unambiguous: kmirror-<mirror>-<topic>-<partition>-<id>, where
// mirror dc1 with topic eu-orders and mirror dc1-eu with topic orders
// collide. Resume still accepts it for a writer recorded by an older
// kmirror, so that the transaction it left open is resumed rather than
// lost; the writer is retired once that transaction ends.
func (s *Set) LegacyID(src int64) string {
	return "kmirror-" + s.mirror + "-" + s.topic + "-" + strconv.Itoa(int(s.partition)) + "-" + strconv.FormatInt(src, 10)
}

// Sweep forgets the writers that have had no open transaction for idle.
func (s *Set) Sweep(idle time.Duration, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for x, tw := range s.writers {
		if !tw.Open && !tw.Stale && now.Sub(tw.LastUsed) >= idle {
			delete(s.writers, x)
			s.log.Debug("idle transactional writer forgotten", "transactional_id", tw.Info.TransactionalID)
		}
	}
}

// OpenTransactions lists the destination transactions the writers hold
// open, by start offset.
func (s *Set) OpenTransactions() []OpenTransaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []OpenTransaction
	for _, tw := range s.writers {
		if tw.Open {
			out = append(out, OpenTransaction{Writer: tw.Info, StartOffset: tw.StartOffset})
		}
	}
	slices.SortFunc(out, func(a, b OpenTransaction) int {
		return cmp.Or(cmp.Compare(a.StartOffset, b.StartOffset), cmp.Compare(a.Writer.SourceProducerID, b.Writer.SourceProducerID))
	})
	return out
}

// Infos lists the writers, by source producer id.
func (s *Set) Infos() []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Info, 0, len(s.writers))
	for _, tw := range s.writers {
		out = append(out, tw.Info)
	}
	slices.SortFunc(out, func(a, b Info) int { return cmp.Compare(a.SourceProducerID, b.SourceProducerID) })
	return out
}

// All returns the writers, by source producer id.
func (s *Set) All() []*Writer {
	s.mu.Lock()
	tws := make([]*Writer, 0, len(s.writers))
	for _, tw := range s.writers {
		tws = append(tws, tw)
	}
	s.mu.Unlock()
	slices.SortFunc(tws, func(a, b *Writer) int { return cmp.Compare(a.Info.SourceProducerID, b.Info.SourceProducerID) })
	return tws
}

// LegalTopic says whether topic is made of what Kafka allows in a topic
// name: [A-Za-z0-9._-], at most 249 characters. Transactional ids rely
// on topic names holding no ':'.
func LegalTopic(topic string) bool {
	if len(topic) > 249 {
		return false
	}
	for i := 0; i < len(topic); i++ {
		switch c := topic[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}
