package txn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/writer/internal/cluster"
)

// ResumeReport says what Partition.Resume found on the destination for each
// recorded transactional writer.
type ResumeReport struct {
	// Resumed writers have an open destination transaction. They continue
	// it with the destination's producer id, epoch and next sequence (no
	// InitProducerId, which would abort it) and end it when the source's
	// marker arrives.
	Resumed []ResumedWriter
	// Idle writers have no open transaction and are kept for reuse, except
	// one recorded with a transactional id of the format before the current
	// one (Info.TransactionalID): the source producer's next
	// transaction starts a writer with the current id.
	Idle []Info
	// Expired writers' transactional ids are unknown to the destination
	// (transactional.id.expiration.ms passed). Nothing of theirs is open;
	// the source producer's next transaction starts a new writer.
	Expired []Info
	// Lost writers' transactional ids now carry another producer id or
	// epoch, or a transaction that is not theirs: the destination timed
	// their transaction out and aborted it (its ABORT marker then sits where
	// the source has something else), or another producer took the id over.
	// They are not kept; the caller decides (compare the partition with the
	// source around the transaction, and continue in map mode from there).
	Lost []LostWriter
	// Foreign producers have an open transaction on the destination
	// partition that no recorded writer owns: someone else writes to it.
	Foreign []ForeignProducer
}

// ResumedWriter is a writer whose open transaction Resume continued.
type ResumedWriter struct {
	Writer Info
	// NextSequence is the sequence of its next batch (the destination's
	// last sequence + 1).
	NextSequence int32
	// StartOffset is the destination offset of the transaction's first
	// batch on the partition, -1 when it holds none yet (a marker-only
	// transaction interrupted before its EndTxn).
	StartOffset int64
}

// LostWriter is a recorded writer the destination no longer holds as it
// was recorded.
type LostWriter struct {
	Writer Info
	// ProducerID, Epoch and State are what the destination's transaction
	// coordinator holds for the transactional id now.
	ProducerID int64
	Epoch      int16
	State      string
}

// ForeignProducer is a producer with an open transaction on the
// destination partition that is not one of the recorded writers.
type ForeignProducer struct {
	ProducerID   int64
	Epoch        int16
	StartOffset  int64
	LastSequence int32
}

// txnState is what the coordinator holds for a transactional id.
type txnState struct {
	found        bool
	State        string
	ProducerID   int64
	Epoch        int16
	hasPartition bool // the open transaction includes this partition
}

type writerFate int

const (
	fateResumed writerFate = iota
	fateIdle
	fateExpired
	fateLost
)

// Resume takes over the recorded transactional writers of the partition
// after a restart (or a new Partition for a partition written before). Call
// it before the partition's first Append, with every writer recorded
// through OnTxnWriter that was not dropped since; then read the resume point
// with EndOffset.
//
// For each writer, DescribeTransactions (on its coordinator) says whether
// the destination still knows its producer id and epoch and has a
// transaction open with the partition, and DescribeProducers (on the
// partition's leader) gives its last sequence. Transactions still
// completing (PREPARE_COMMIT/PREPARE_ABORT) are waited for, so their markers
// are in the end offset read afterwards.
func (s *Set) Resume(ctx context.Context, recorded []Info) (ResumeReport, error) {
	s.mu.Lock()
	n := len(s.writers)
	s.mu.Unlock()
	if n > 0 {
		return ResumeReport{}, s.errorf("resume", errors.New("Resume must come before the partition's first Append"))
	}
	txids := make([]string, 0, len(recorded))
	seen := make(map[int64]bool, len(recorded))
	for _, w := range recorded {
		// A writer recorded before the current id format keeps its id
		// until its open transaction ends (Info.TransactionalID).
		if want := s.ID(w.SourceProducerID); w.TransactionalID != want && w.TransactionalID != s.LegacyID(w.SourceProducerID) {
			return ResumeReport{}, s.errorf("resume", fmt.Errorf("recorded writer of source producer %d has transactional id %q, this partition's is %q (a record of another mirror or partition?)",
				w.SourceProducerID, w.TransactionalID, want))
		}
		if seen[w.SourceProducerID] {
			return ResumeReport{}, s.errorf("resume", fmt.Errorf("source producer %d is recorded twice", w.SourceProducerID))
		}
		seen[w.SourceProducerID] = true
		txids = append(txids, w.TransactionalID)
	}

	var (
		report ResumeReport
		states map[string]txnState
		err    error
	)
	if len(txids) > 0 {
		if states, err = s.describeTxns(ctx, txids); err != nil {
			return ResumeReport{}, err
		}
	}
	producers, err := s.describeProducers(ctx)
	if err != nil {
		return ResumeReport{}, err
	}

	kept := make(map[int64]bool)
	writers := make(map[int64]*Writer)
	for _, w := range recorded {
		st := states[w.TransactionalID]
		var ap *kmsg.DescribeProducersResponseTopicPartitionActiveProducer
		if a, ok := producers[w.ProducerID]; ok {
			ap = &a
		}
		tw, fate := s.classify(w, st, ap)
		switch fate {
		case fateResumed:
			report.Resumed = append(report.Resumed, ResumedWriter{Writer: w, NextSequence: tw.Seq, StartOffset: tw.StartOffset})
			s.log.Info("resuming open destination transaction", "transactional_id", w.TransactionalID,
				"producer_id", w.ProducerID, "epoch", w.Epoch, "next_sequence", tw.Seq, "start_offset", tw.StartOffset)
		case fateIdle:
			report.Idle = append(report.Idle, w)
		case fateExpired:
			report.Expired = append(report.Expired, w)
			s.log.Info("recorded transactional id expired on the destination", "transactional_id", w.TransactionalID)
			continue
		case fateLost:
			report.Lost = append(report.Lost, LostWriter{Writer: w, ProducerID: st.ProducerID, Epoch: st.Epoch, State: st.State})
			s.log.Warn("recorded transactional writer lost: the destination aborted its transaction or another producer took the id over",
				"transactional_id", w.TransactionalID, "recorded_producer_id", w.ProducerID, "recorded_epoch", w.Epoch,
				"producer_id", st.ProducerID, "epoch", st.Epoch, "state", st.State)
			continue
		}
		kept[w.ProducerID] = true
		if fate == fateIdle && s.IsLegacy(tw) {
			continue // nothing open under the old id: the next transaction takes the current one
		}
		writers[w.SourceProducerID] = tw
	}
	for pid, ap := range producers {
		if ap.CurrentTxnStartOffset >= 0 && !kept[pid] {
			report.Foreign = append(report.Foreign, ForeignProducer{
				ProducerID: pid, Epoch: int16(ap.ProducerEpoch), StartOffset: ap.CurrentTxnStartOffset, LastSequence: ap.LastSequence,
			})
		}
	}
	slices.SortFunc(report.Foreign, func(a, b ForeignProducer) int { return cmp.Compare(a.StartOffset, b.StartOffset) })

	s.mu.Lock()
	s.writers = writers
	s.mu.Unlock()
	return report, nil
}

// classify decides what a recorded writer is, given the coordinator's state
// of its transactional id and the partition leader's state of its producer
// (nil when the leader reports none).
func (s *Set) classify(w Info, st txnState, ap *kmsg.DescribeProducersResponseTopicPartitionActiveProducer) (*Writer, writerFate) {
	tw := &Writer{Info: w, Coordinator: -1, StartOffset: -1, LastUsed: time.Now()}
	if ap != nil && int16(ap.ProducerEpoch) != w.Epoch {
		// The leader's entry is the producer's previous epoch (a writer
		// initialised again that has appended nothing to the partition
		// since): a new epoch starts its sequences at 0, and its
		// transaction holds no data here yet.
		ap = nil
	}
	nextSeq := int32(0)
	if ap != nil && ap.LastSequence >= 0 {
		nextSeq = batch.IncrementSequence(ap.LastSequence, 1)
	}
	switch {
	case !st.found || st.State == "Dead":
		return nil, fateExpired
	case st.ProducerID != w.ProducerID || st.Epoch != w.Epoch:
		return nil, fateLost
	case st.State == "Ongoing":
		if !st.hasPartition {
			return nil, fateLost // a transaction of this id that kmirror did not open
		}
		tw.Open, tw.Seq = true, nextSeq
		if ap != nil {
			tw.StartOffset = ap.CurrentTxnStartOffset
		}
		return tw, fateResumed
	case st.State == "Empty" || st.State == "CompleteCommit" || st.State == "CompleteAbort":
		// A leader that lists the producer with this epoch gives the next
		// sequence. One that does not (its state expired, or a broker
		// listing only open transactions) leaves it unknown: a new epoch
		// restarts sequences, and InitProducerId is harmless with nothing
		// open.
		if ap != nil {
			tw.Seq = nextSeq
		} else {
			tw.NeedInit = true
		}
		return tw, fateIdle
	default: // PrepareEpochFence, or a state this kmirror does not know
		return nil, fateLost
	}
}

// Resync re-reads a writer's state from the destination after a failure
// left it unknown.
func (s *Set) Resync(ctx context.Context, tw *Writer) error {
	txid := tw.Info.TransactionalID
	states, err := s.describeTxns(ctx, []string{txid})
	if err != nil {
		return err
	}
	producers, err := s.describeProducers(ctx)
	if err != nil {
		return err
	}
	var ap *kmsg.DescribeProducersResponseTopicPartitionActiveProducer
	if a, ok := producers[tw.Info.ProducerID]; ok {
		ap = &a
	}
	st := states[txid]
	nt, fate := s.classify(tw.Info, st, ap)
	switch {
	case fate == fateResumed || fate == fateIdle:
		s.Locked(func() {
			tw.Open = nt.Open
			if !nt.Open || tw.StartOffset < 0 {
				tw.StartOffset = nt.StartOffset
			}
		})
		tw.Seq, tw.NeedInit = nt.Seq, nt.NeedInit
	case fate == fateExpired && !tw.Open:
		tw.NeedInit = true
	default:
		return s.errorf("re-read transactional writer "+txid,
			fmt.Errorf("%w: recorded producer id %d epoch %d, destination has producer id %d epoch %d state %q",
				ErrWriterLost, tw.Info.ProducerID, tw.Info.Epoch, st.ProducerID, st.Epoch, st.State))
	}
	tw.Stale = false
	s.log.Info("transactional writer state re-read from the destination", "transactional_id", txid,
		"open", tw.Open, "next_sequence", tw.Seq, "reinitialise", tw.NeedInit)
	return nil
}

// describeTxns asks the coordinators about txids, waiting out transactions
// that are completing.
func (s *Set) describeTxns(ctx context.Context, txids []string) (map[string]txnState, error) {
	out := make(map[string]txnState, len(txids))
	pending := slices.Clone(txids)
	r := s.dest.NewRetrier()
	for len(pending) > 0 {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = pending
		resp, err := s.dest.Routed(ctx, req)
		var next []string
		if err == nil {
			answered := make(map[string]bool, len(pending))
			for _, ts := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
				answered[ts.TransactionalID] = true
				ke := kerr.ErrorForCode(ts.ErrorCode)
				switch {
				case ke == nil && strings.HasPrefix(ts.State, "Prepare") && ts.State != "PrepareEpochFence":
					next = append(next, ts.TransactionalID) // completing: its markers are being written
					err = fmt.Errorf("transaction %s is %s", ts.TransactionalID, ts.State)
				case ke == nil:
					st := txnState{found: true, State: ts.State, ProducerID: ts.ProducerID, Epoch: ts.ProducerEpoch}
					for _, t := range ts.Topics {
						if t.Topic == s.topic && slices.Contains(t.Partitions, s.partition) {
							st.hasPartition = true
						}
					}
					out[ts.TransactionalID] = st
				case errors.Is(ke, kerr.TransactionalIDNotFound):
					out[ts.TransactionalID] = txnState{}
				case cluster.IsRetriable(ke):
					next = append(next, ts.TransactionalID)
					err = fmt.Errorf("DescribeTransactions %s: %w", ts.TransactionalID, ke)
				default:
					return nil, s.errorf("DescribeTransactions "+ts.TransactionalID, ke)
				}
			}
			for _, txid := range pending {
				if !answered[txid] {
					next = append(next, txid)
					err = fmt.Errorf("DescribeTransactions has no answer for %s", txid)
				}
			}
		} else if !cluster.IsRetriable(err) {
			return nil, s.errorf("DescribeTransactions", err)
		} else {
			next = pending
		}
		pending = next
		if len(pending) > 0 {
			if err := r.Backoff(ctx, err); err != nil {
				return nil, s.errorf("DescribeTransactions", err)
			}
		}
	}
	return out, nil
}

// describeProducers asks the partition leader for its producers' states, by
// producer id, in one DescribeProducers with the other partitions of the
// topic asking at the same time (the Writer's batcher).
func (s *Set) describeProducers(ctx context.Context) (map[int64]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, error) {
	r := s.dest.NewRetrier()
	for {
		out, err := s.dest.Producers(ctx, s.topic, s.partition)
		if err == nil {
			return out, nil
		}
		if !cluster.IsRetriable(err) {
			return nil, s.errorf("DescribeProducers", err)
		}
		if err := r.Backoff(ctx, err); err != nil {
			return nil, s.errorf("DescribeProducers", err)
		}
	}
}
