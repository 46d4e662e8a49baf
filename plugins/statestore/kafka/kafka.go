// Package kafka is a statestore.Store on a compacted Kafka topic, normally
// on the destination cluster, which several kmirror daemons can share.
// docs/design/statestore-kafka.md is the design; this is its summary.
//
// # The topic
//
// Every key lives in one partition of the topic, fixed by a hash of the key
// (FNV-1a, modulo the partition count, which therefore never changes: Open
// refuses a topic with another count). A write is one record: the key, and
// the value behind a one-byte format tag; a delete is a tombstone (a null
// value), so compaction keeps the last record of each key. Open creates a
// missing topic (cleanup.policy=compact, min.insync.replicas 2 with three
// replicas or more, unclean leader election off, max.message.bytes) and
// refuses one that is not compacted, has another partition count or fewer
// replicas, naming the setting.
//
// # Versions
//
// A key's version is the offset of its last record in its partition, plus
// one. Offsets are never reused, compaction keeps them, so versions
// strictly increase across Delete and re-create.
//
// # Reads
//
// The store materialises the topic in memory: Open reads every partition
// to its end (read_committed, up to the last stable offset), and every
// operation first reads the partitions it touches to their current end
// (one Fetch round trip when nothing is new), then answers from memory. So
// a Get sees every write that returned before it started, whichever client
// wrote it.
//
// # Writes and compare-and-set
//
// Every client of the store writes in Kafka transactions under one
// transactional.id (Config.TransactionalID). When a client's producer
// starts (InitProducerId), the transaction coordinator fences every other
// client's producer and aborts any transaction it left open: from then on
// only this client can append. Writes of one client issued at the same
// time share a transaction (group commit). A batch of writes is:
//
//  1. begin a transaction and produce the records (acks=all, idempotent);
//     they land at offsets o1, o2, ..., invisible to read_committed
//     readers;
//  2. read each partition involved up to our first record in it:
//     everything committed before our records, since no other producer
//     can have appended after our producer started;
//  3. check each write's expected version against that state and the
//     writes before it in the batch; if all pass, commit; else abort, and
//     produce and commit the ones that passed in a second transaction
//     (no new read is needed: a write by anybody else since our producer
//     started would make the commit fail);
//  4. read the partitions past our records, so that the writes are in
//     memory (and visible to every reader) when they return.
//
// If another client started its producer in between, the coordinator
// aborted our transaction and our commit fails: nothing of ours is
// visible. The client then starts a new producer (fencing the other in
// turn) and tries again from step 1; before deciding, it looks whether
// its earlier records were committed after all (an unanswered commit), so
// a write is never applied twice nor reported lost when it happened. Of
// several clients writing with the same expected version, exactly one
// wins: the brokers enforce it, not timing.
//
// The cost: writes of all daemons go through one producer at a time. A
// daemon writing after another one's write starts a new producer (about
// three more round trips), and its predecessor does the same for its next
// write. See the design document.
//
// # Leases
//
// Leases are the generic compare-and-set leases of package statestore.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// formatV1 is the tag before every value: the record's format.
const formatV1 = 1

// Store is a statestore.Store on a compacted Kafka topic. Create it with
// Open.
type Store struct {
	cfg  Config
	name string // "kafka state store topic "t" at [brokers]", for errors

	cl  *kgo.Client // metadata, fetches, admin requests
	adm *kadm.Client
	log *partitionLog

	// wmu serialises writes: one batch of transactions at a time. It
	// guards producer.
	wmu      sync.Mutex
	producer *kgo.Client // nil until the first write, or after a failure
	// qmu guards queue: the writes waiting for the next batch.
	qmu   sync.Mutex
	queue []*writeOp

	// gate is held by every operation and closed by Close, so that an
	// operation either runs on an open store or fails with ErrClosed.
	gate *statestore.Gate
}

var (
	_ statestore.Store    = (*Store)(nil)
	_ statestore.Informer = (*Store)(nil)
)

// Open validates cfg, connects to the cluster, creates the topic if it is
// missing (or refuses it if it has the wrong shape) and reads it to its
// end. Errors wrap ErrInvalidConfig for a bad cfg or a topic of the wrong
// shape, and never contain the password.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	cfg.Brokers = append([]string(nil), cfg.Brokers...)
	name := fmt.Sprintf("kafka state store topic %q at %v", cfg.Topic, cfg.Brokers)
	opts, err := cfg.clientOpts()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrInvalidConfig, err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &Store{cfg: cfg, name: name, cl: cl, adm: kadm.NewClient(cl), gate: &statestore.Gate{Name: name, Timeout: cfg.RequestTimeout}}
	octx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	meta, err := s.ensureTopic(octx)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("%s: %w", name, describe(err))
	}
	s.log = newPartitionLog(cl, cfg.Topic, meta)
	if err := s.log.catchUp(octx, s.log.all(), toEnd); err != nil {
		cl.Close()
		return nil, fmt.Errorf("%s: reading the topic to its end: %w", name, err)
	}
	return s, nil
}

// Info implements statestore.Informer: "kafka", shared, generic leases.
func (s *Store) Info() statestore.Info {
	return statestore.Info{
		Name:          "kafka",
		Version:       "1",
		ProtocolMajor: statestore.ProtocolMajor,
		ProtocolMinor: statestore.ProtocolMinor,
		Shared:        true,
	}
}

// partition is key's partition: FNV-1a of the key modulo the count.
func (s *Store) partition(key string) int32 {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int32(h.Sum32() % uint32(s.cfg.Partitions))
}

// begin starts an operation (statestore.Gate.Begin): the caller calls the
// returned done; the context is bounded by the request timeout.
func (s *Store) begin(ctx context.Context, op, key string, isKey bool) (context.Context, func(), error) {
	return s.gate.Begin(ctx, op, key, isKey)
}

// fail wraps err of op on key. When the caller's context ended it wraps
// ctx.Err(); when the request timeout did, it says so.
func (s *Store) fail(ctx, rctx context.Context, op, key string, err error) error {
	switch {
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		return fmt.Errorf("%s: %s %q: %w (%w)", s.name, op, key, ctx.Err(), err)
	case rctx.Err() != nil && ctx.Err() == nil:
		return fmt.Errorf("%s: %s %q: no answer within request.timeout %s: %w", s.name, op, key, s.cfg.RequestTimeout, err)
	}
	return fmt.Errorf("%s: %s %q: %w", s.name, op, key, err)
}

// Get implements statestore.Store: it reads the key's partition to its
// end, then answers from memory.
func (s *Store) Get(ctx context.Context, key string) (statestore.Entry, error) {
	rctx, done, err := s.begin(ctx, "get", key, true)
	if err != nil {
		return statestore.Entry{}, err
	}
	defer done()
	p := s.partition(key)
	if err := s.log.catchUp(rctx, []int32{p}, toEnd); err != nil {
		return statestore.Entry{}, s.fail(ctx, rctx, "get", key, err)
	}
	e, ok := s.log.get(key)
	if !ok {
		return statestore.Entry{}, fmt.Errorf("%s: get %q: %w", s.name, key, statestore.ErrNotFound)
	}
	return e, nil
}

// List implements statestore.Store: it reads every partition to its end,
// then answers from memory.
func (s *Store) List(ctx context.Context, prefix string) ([]statestore.Entry, error) {
	rctx, done, err := s.begin(ctx, "list", prefix, false)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := s.log.catchUp(rctx, s.log.all(), toEnd); err != nil {
		return nil, s.fail(ctx, rctx, "list", prefix, err)
	}
	out := s.log.list(func(k string) bool { return strings.HasPrefix(k, prefix) })
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Put implements statestore.Store. When it returns without error the
// record is committed on the in-sync replicas (acks=all, the topic's
// min.insync.replicas) and visible to every client.
func (s *Store) Put(ctx context.Context, key string, value []byte, expect int64) (int64, error) {
	if err := statestore.ValidatePutVersion(expect); err != nil {
		return 0, fmt.Errorf("%s: put %q: %w", s.name, key, err)
	}
	rctx, done, err := s.begin(ctx, "put", key, true)
	if err != nil {
		return 0, err
	}
	defer done()
	rec := make([]byte, 1+len(value))
	rec[0] = formatV1
	copy(rec[1:], value)
	v, err := s.write(rctx, key, rec, expect, false)
	if err != nil {
		return 0, s.writeFail(ctx, rctx, "put", key, err)
	}
	return v, nil
}

// Delete implements statestore.Store: it writes a tombstone.
func (s *Store) Delete(ctx context.Context, key string, expect int64) error {
	if err := statestore.ValidateDeleteVersion(expect); err != nil {
		return fmt.Errorf("%s: delete %q: %w", s.name, key, err)
	}
	rctx, done, err := s.begin(ctx, "delete", key, true)
	if err != nil {
		return err
	}
	defer done()
	if _, err := s.write(rctx, key, nil, expect, true); err != nil {
		return s.writeFail(ctx, rctx, "delete", key, err)
	}
	return nil
}

// writeFail wraps an error of a write; the CAS outcomes pass through
// with the store's name, other errors say the write may have happened.
func (s *Store) writeFail(ctx, rctx context.Context, op, key string, err error) error {
	if errors.Is(err, statestore.ErrVersionMismatch) || errors.Is(err, statestore.ErrNotFound) {
		return fmt.Errorf("%s: %s: %w", s.name, op, err)
	}
	if errors.Is(err, errOutcomeUnknown) {
		return s.fail(ctx, rctx, op, key, err)
	}
	return s.fail(ctx, rctx, op, key, fmt.Errorf("nothing was written: %w", err))
}

// Close implements statestore.Store: it waits for operations in flight
// (each bounded by the request timeout) and closes the clients. A
// transaction cannot be open then: each write ends its own.
func (s *Store) Close() error {
	return s.gate.Close(func() error {
		s.wmu.Lock()
		if s.producer != nil {
			s.producer.Close()
			s.producer = nil
		}
		s.wmu.Unlock()
		s.cl.Close()
		return nil
	})
}
