package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/failpoint"
)

// WriterFor returns the transactional writer replaying source producer
// src, creating or re-initialising it as needed. The returned writer has a
// recorded producer id and epoch and a known state.
func (s *Set) WriterFor(ctx context.Context, src int64) (*Writer, error) {
	s.mu.Lock()
	tw := s.writers[src]
	s.mu.Unlock()
	if tw == nil {
		return s.newTxnWriter(ctx, src)
	}
	if tw.Stale {
		if err := s.Resync(ctx, tw); err != nil {
			return nil, err
		}
	}
	if tw.NeedInit {
		if err := s.Init(ctx, tw); err != nil {
			return nil, err
		}
	}
	return tw, nil
}

// newTxnWriter starts the writer of source producer src. It first asks the
// coordinator about the transactional id: if a transaction is open with it
// (a previous run's, not resumed), InitProducerId would abort it, so it
// refuses with ErrUnresumedTransaction.
func (s *Set) newTxnWriter(ctx context.Context, src int64) (*Writer, error) {
	tw := &Writer{
		Info:        Info{SourceProducerID: src, TransactionalID: s.ID(src), ProducerID: -1, Epoch: -1},
		Coordinator: -1,
		StartOffset: -1,
	}
	states, err := s.describeTxns(ctx, []string{tw.Info.TransactionalID})
	if err != nil {
		return nil, err
	}
	if st := states[tw.Info.TransactionalID]; st.found && st.State == "Ongoing" {
		return nil, s.errorf("start transactional writer "+tw.Info.TransactionalID,
			fmt.Errorf("%w: producer id %d epoch %d", ErrUnresumedTransaction, st.ProducerID, st.Epoch))
	}
	if err := s.Init(ctx, tw); err != nil {
		return nil, err
	}
	s.Add(tw)
	return tw, nil
}

// Init sends InitProducerId for tw's transactional id (only when no
// transaction of it is open) and records the new producer id and epoch
// through OnTxnWriter before anything is appended with them.
func (s *Set) Init(ctx context.Context, tw *Writer) error {
	txid := tw.Info.TransactionalID
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &txid
	req.TransactionTimeoutMillis = s.dest.TransactionTimeout(ctx)
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp, err := s.coordinated(ctx, tw, "InitProducerId", req, InitProducerIDVersion, func(r kmsg.Response) error {
		return kerr.ErrorForCode(r.(*kmsg.InitProducerIDResponse).ErrorCode)
	})
	if err != nil {
		if errors.Is(err, kerr.InvalidTransactionTimeout) {
			err = fmt.Errorf("%w (transaction timeout %d ms: set TransactionTimeout at most the destination's transaction.max.timeout.ms)", err, req.TransactionTimeoutMillis)
		}
		return err
	}
	ir := resp.(*kmsg.InitProducerIDResponse)
	s.Locked(func() {
		tw.Info.ProducerID, tw.Info.Epoch = ir.ProducerID, ir.ProducerEpoch
		tw.Open, tw.StartOffset = false, -1
	})
	tw.Seq, tw.Stale, tw.Confirmed = 0, false, time.Time{}
	tw.LastUsed = time.Now()
	tw.NeedInit = true // until recorded
	failpoint.Reach("writer-txn-initialised")
	if err := s.onTxnWriter(ctx, tw.Info); err != nil {
		return s.errorf("record transactional writer "+txid+" (OnTxnWriter); nothing appended", err)
	}
	failpoint.Reach("writer-txn-recorded")
	tw.NeedInit = false
	s.log.Debug("transactional writer initialised", "transactional_id", txid, "producer_id", ir.ProducerID, "epoch", ir.ProducerEpoch)
	return nil
}

// AddPartition opens a destination transaction for tw with the partition
// (AddPartitionsToTxn v3).
func (s *Set) AddPartition(ctx context.Context, tw *Writer) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID = tw.Info.TransactionalID
	req.ProducerID, req.ProducerEpoch = tw.Info.ProducerID, tw.Info.Epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic = s.topic
	rt.Partitions = []int32{s.partition}
	req.Topics = append(req.Topics, rt)
	_, err := s.coordinated(ctx, tw, "AddPartitionsToTxn", req, AddPartitionsToTxnVersion, func(r kmsg.Response) error {
		ar := r.(*kmsg.AddPartitionsToTxnResponse)
		if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
			return err
		}
		for _, t := range ar.Topics {
			for _, ap := range t.Partitions {
				if t.Topic == s.topic && ap.Partition == s.partition {
					return kerr.ErrorForCode(ap.ErrorCode)
				}
			}
		}
		return errors.New("AddPartitionsToTxn response has no answer for the partition")
	})
	if err != nil {
		tw.Stale = true
		return err
	}
	s.Locked(func() { tw.Open, tw.StartOffset = true, -1 })
	tw.LastUsed = time.Now()
	failpoint.Reach("writer-txn-partition-added")
	return nil
}

// EndTxn commits or aborts tw's open transaction (EndTxn v4). The marker is
// written after EndTxn returns; callers wait for it.
func (s *Set) EndTxn(ctx context.Context, tw *Writer, commit bool) error {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = tw.Info.TransactionalID
	req.ProducerID, req.ProducerEpoch = tw.Info.ProducerID, tw.Info.Epoch
	req.Commit = commit
	_, err := s.coordinated(ctx, tw, "EndTxn", req, EndTxnVersion, func(r kmsg.Response) error {
		return kerr.ErrorForCode(r.(*kmsg.EndTxnResponse).ErrorCode)
	})
	if err != nil {
		tw.Stale = true
		return err
	}
	s.Locked(func() {
		tw.Open, tw.StartOffset = false, -1
		if s.IsLegacy(tw) && s.writers[tw.Info.SourceProducerID] == tw {
			// Its transaction, left open by an older kmirror, is over:
			// the source producer's next transaction takes a writer
			// with the current, unambiguous id.
			delete(s.writers, tw.Info.SourceProducerID)
		}
	})
	tw.LastUsed = time.Now()
	failpoint.Reach("writer-txn-ended")
	return nil
}

// IsLegacy says whether tw carries a transactional id of the format before
// the current one (a writer recorded by an older kmirror and resumed).
func (s *Set) IsLegacy(tw *Writer) bool {
	return tw.Info.TransactionalID != s.ID(tw.Info.SourceProducerID)
}

// coordinated sends a transaction request for tw to its coordinator at most
// at version maxVersion, retrying for up to RetryTimeout
// (cluster.Client.Coordinated). check extracts the response's error.
func (s *Set) coordinated(ctx context.Context, tw *Writer, what string, req kmsg.Request, maxVersion int16,
	check func(kmsg.Response) error,
) (kmsg.Response, error) {
	resp, err := s.dest.Coordinated(ctx, s.log, &tw.Coordinator, tw.Info.TransactionalID, what, req, maxVersion, check)
	if err != nil {
		return nil, s.wrap(err)
	}
	return resp, nil
}
