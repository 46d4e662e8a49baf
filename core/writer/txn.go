package writer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/failpoint"
)

// txnWriterFor returns the transactional writer replaying source producer
// src, creating or re-initialising it as needed. The returned writer has a
// recorded producer id and epoch and a known state.
func (p *Partition) txnWriterFor(ctx context.Context, src int64) (*txnWriter, error) {
	p.mu.Lock()
	tw := p.writers[src]
	p.mu.Unlock()
	if tw == nil {
		return p.newTxnWriter(ctx, src)
	}
	if tw.stale {
		if err := p.resync(ctx, tw); err != nil {
			return nil, err
		}
	}
	if tw.needInit {
		if err := p.initTxnWriter(ctx, tw); err != nil {
			return nil, err
		}
	}
	return tw, nil
}

// newTxnWriter starts the writer of source producer src. It first asks the
// coordinator about the transactional id: if a transaction is open with it
// (a previous run's, not resumed), InitProducerId would abort it, so it
// refuses with ErrUnresumedTransaction.
func (p *Partition) newTxnWriter(ctx context.Context, src int64) (*txnWriter, error) {
	tw := &txnWriter{
		info:        TxnWriterInfo{SourceProducerID: src, TransactionalID: p.TransactionalID(src), ProducerID: -1, Epoch: -1},
		coordinator: -1,
		startOffset: -1,
	}
	states, err := p.describeTxns(ctx, []string{tw.info.TransactionalID})
	if err != nil {
		return nil, err
	}
	if st := states[tw.info.TransactionalID]; st.found && st.State == "Ongoing" {
		return nil, p.errorf("start transactional writer "+tw.info.TransactionalID,
			fmt.Errorf("%w: producer id %d epoch %d", ErrUnresumedTransaction, st.ProducerID, st.Epoch))
	}
	if err := p.initTxnWriter(ctx, tw); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.writers[src] = tw
	p.mu.Unlock()
	return tw, nil
}

// initTxnWriter sends InitProducerId for tw's transactional id (only when no
// transaction of it is open) and records the new producer id and epoch
// through OnTxnWriter before anything is appended with them.
func (p *Partition) initTxnWriter(ctx context.Context, tw *txnWriter) error {
	txid := tw.info.TransactionalID
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &txid
	req.TransactionTimeoutMillis = p.dest.TransactionTimeout(ctx)
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp, err := p.coordinated(ctx, tw, "InitProducerId", req, initProducerIDVersion, func(r kmsg.Response) error {
		return kerr.ErrorForCode(r.(*kmsg.InitProducerIDResponse).ErrorCode)
	})
	if err != nil {
		if errors.Is(err, kerr.InvalidTransactionTimeout) {
			err = fmt.Errorf("%w (transaction timeout %d ms: set TransactionTimeout at most the destination's transaction.max.timeout.ms)", err, req.TransactionTimeoutMillis)
		}
		return err
	}
	ir := resp.(*kmsg.InitProducerIDResponse)
	p.locked(func() {
		tw.info.ProducerID, tw.info.Epoch = ir.ProducerID, ir.ProducerEpoch
		tw.open, tw.startOffset = false, -1
	})
	tw.seq, tw.stale, tw.confirmed = 0, false, time.Time{}
	tw.lastUsed = time.Now()
	tw.needInit = true // until recorded
	failpoint.Reach("writer-txn-initialised")
	if err := p.onTxnWriter(ctx, tw.info); err != nil {
		return p.errorf("record transactional writer "+txid+" (OnTxnWriter); nothing appended", err)
	}
	failpoint.Reach("writer-txn-recorded")
	tw.needInit = false
	p.log.Debug("transactional writer initialised", "transactional_id", txid, "producer_id", ir.ProducerID, "epoch", ir.ProducerEpoch)
	return nil
}

// addPartition opens a destination transaction for tw with the partition
// (AddPartitionsToTxn v3).
func (p *Partition) addPartition(ctx context.Context, tw *txnWriter) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID = tw.info.TransactionalID
	req.ProducerID, req.ProducerEpoch = tw.info.ProducerID, tw.info.Epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic = p.topic
	rt.Partitions = []int32{p.partition}
	req.Topics = append(req.Topics, rt)
	_, err := p.coordinated(ctx, tw, "AddPartitionsToTxn", req, addPartitionsToTxnVersion, func(r kmsg.Response) error {
		ar := r.(*kmsg.AddPartitionsToTxnResponse)
		if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
			return err
		}
		for _, t := range ar.Topics {
			for _, ap := range t.Partitions {
				if t.Topic == p.topic && ap.Partition == p.partition {
					return kerr.ErrorForCode(ap.ErrorCode)
				}
			}
		}
		return errors.New("AddPartitionsToTxn response has no answer for the partition")
	})
	if err != nil {
		tw.stale = true
		return err
	}
	p.locked(func() { tw.open, tw.startOffset = true, -1 })
	tw.lastUsed = time.Now()
	failpoint.Reach("writer-txn-partition-added")
	return nil
}

// endTxn commits or aborts tw's open transaction (EndTxn v4). The marker is
// written after EndTxn returns; callers wait for it.
func (p *Partition) endTxn(ctx context.Context, tw *txnWriter, commit bool) error {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = tw.info.TransactionalID
	req.ProducerID, req.ProducerEpoch = tw.info.ProducerID, tw.info.Epoch
	req.Commit = commit
	_, err := p.coordinated(ctx, tw, "EndTxn", req, endTxnVersion, func(r kmsg.Response) error {
		return kerr.ErrorForCode(r.(*kmsg.EndTxnResponse).ErrorCode)
	})
	if err != nil {
		tw.stale = true
		return err
	}
	p.locked(func() {
		tw.open, tw.startOffset = false, -1
		if p.isLegacy(tw) && p.writers[tw.info.SourceProducerID] == tw {
			// Its transaction, left open by an older kmirror, is over:
			// the source producer's next transaction takes a writer
			// with the current, unambiguous id.
			delete(p.writers, tw.info.SourceProducerID)
		}
	})
	tw.lastUsed = time.Now()
	failpoint.Reach("writer-txn-ended")
	return nil
}

// isLegacy says whether tw carries a transactional id of the format before
// the current one (a writer recorded by an older kmirror and resumed).
func (p *Partition) isLegacy(tw *txnWriter) bool {
	return tw.info.TransactionalID != p.TransactionalID(tw.info.SourceProducerID)
}

// coordinated sends a transaction request for tw to its coordinator at most
// at version maxVersion, retrying for up to RetryTimeout
// (cluster.Client.Coordinated). check extracts the response's error.
func (p *Partition) coordinated(ctx context.Context, tw *txnWriter, what string, req kmsg.Request, maxVersion int16,
	check func(kmsg.Response) error,
) (kmsg.Response, error) {
	resp, err := p.dest.Coordinated(ctx, p.log, &tw.coordinator, tw.info.TransactionalID, what, req, maxVersion, check)
	if err != nil {
		return nil, p.wrap(err)
	}
	return resp, nil
}
