package partition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kmirror/kmirror/sdk/statestore"
)

// schemaVersion is the Schema of records this kmirror writes. Bump it when
// the meaning of a top-level field changes; a kmirror refuses records with a
// higher Schema rather than rewrite them without the fields it does not know.
//
// Schema 1 kept the crash-resume facts as JSON extensions ("alignment",
// "txn_writers", "source_epoch", "source_topic_id", "recopy", "diverged",
// "failback_recreated"); schema 2 keeps them as the typed fields of Data. A schema 1
// record is migrated when it is read (migrateV1), and written back as
// schema 2 at its next write.
const schemaVersion = 2

// ErrInvalidRecord: a stored partition record cannot be used (not JSON, a
// newer schema, an unknown state, a key that does not match its content).
var ErrInvalidRecord = errors.New("invalid partition state record")

// Record is the persisted state of one mirrored partition, stored as JSON
// under statestore.PartitionKey(Mirror, Topic, Partition). The state machine
// owns every field outside Data; callers change Data through Update or
// TransitionWith.
type Record struct {
	Schema    int    `json:"schema"`
	Mirror    string `json:"mirror"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`

	State State `json:"state"`
	// PreviousState is the state before State. A FAILED partition returns
	// to it on retry.
	PreviousState State `json:"previous_state,omitzero"`
	// Reason is why the partition entered State; in FAILED, the error.
	Reason string `json:"reason,omitempty"`
	// Retryable (FAILED only): the failure may be retried automatically.
	Retryable bool `json:"retryable,omitempty"`
	// Attempts counts consecutive failures (see the package doc for when
	// it is cleared).
	Attempts int `json:"attempts,omitempty"`
	// RetryAt (FAILED only) is when the next automatic retry is due; zero
	// when the partition waits for an operator.
	RetryAt time.Time `json:"retry_at,omitzero"`
	// UpdatedAt is when the record was last written.
	UpdatedAt time.Time `json:"updated_at"`

	Data
}

// Data is the part of a Record the engine fills in: facts about the
// partition rather than its life-cycle state.
type Data struct {
	// Mode is decided in PREPARING.
	Mode Mode `json:"mode,omitempty"`
	// LastMirroredOffset is the destination log end offset up to which the
	// source partition is mirrored (offsets below it are copied), as last
	// recorded, for example by STOPPING; -1 when never recorded.
	LastMirroredOffset int64 `json:"last_mirrored_offset"`
	// SourceTopicID is the id of the source topic the partition mirrors
	// (UUID text), recorded on first use: another id later means the
	// source topic was recreated. "" when unknown.
	SourceTopicID string `json:"source_topic_id,omitempty"`
	// SourceEpoch is the source leader epoch of the last batch forwarded,
	// recorded before the first batch of a new epoch is appended; sent as
	// LastFetchedEpoch after a restart. Nil when none was recorded.
	SourceEpoch *int32 `json:"source_epoch,omitempty"`
	// TxnWriters are the destination transactional writers of the
	// partition, each recorded before it is used.
	TxnWriters []TxnWriter `json:"txn_writers,omitempty"`
	// Alignment is a filler alignment in progress; nil when none.
	Alignment *Alignment `json:"alignment,omitempty"`
	// Recopy is a decided copy-again (the destination differs from the
	// source) not yet completed; nil when none.
	Recopy *Recopy `json:"recopy,omitempty"`
	// Diverged records, in a failback mirror's partition, the copy of the
	// old source's diverged records to a side topic; nil when none.
	Diverged *Diverged `json:"diverged,omitempty"`
	// Recreated marks a failback mirror's partition whose topic was
	// recreated on the old source: it copies from scratch.
	Recreated bool `json:"recreated,omitempty"`
	// Verified is the partition's checkpoint: the destination offset below
	// which the destination is known to be the source's copy, with no
	// transaction of the mirror begun below it still undecided. Before the
	// partition continues, the destination is compared with the source from
	// there to its end. Nil when never recorded (records written before
	// kmirror kept it): the comparison then starts from the last mirrored
	// offset, or near the end, and reaches back as far as it must.
	Verified *Checkpoint `json:"verified,omitempty"`
	// Extensions holds state that later features attach to a partition
	// (for example its open destination transactions), one JSON value per
	// name. Every kmirror version carries unknown extensions over
	// unchanged. Use SetExtension and Extension.
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// Checkpoint is a destination offset up to which a partition was proven.
type Checkpoint struct {
	Dest int64 `json:"dest"`
}

// TxnWriter is a destination transactional writer: the destination producer
// replaying the transactions of one source producer on the partition.
type TxnWriter struct {
	SourceProducerID int64  `json:"source_producer_id"`
	TransactionalID  string `json:"transactional_id"`
	ProducerID       int64  `json:"producer_id"`
	Epoch            int16  `json:"epoch"`
}

// Alignment is a filler alignment in progress, recorded so that a crash in
// the middle resumes it rather than mistaking the filler for foreign data.
type Alignment struct {
	// FillTo is the destination offset the filler reaches (the base offset
	// of the first source batch to mirror).
	FillTo int64 `json:"fill_to"`
	// DeleteTo is the source log start offset, which the destination's log
	// start is moved to once the mirror has passed it.
	DeleteTo int64 `json:"delete_to"`
}

// Recopy is a decision to copy the source again from SourceFrom, recorded
// before anything is aborted so that a crash completes the same recovery.
type Recopy struct {
	// SourceFrom is the source offset the copy restarts from.
	SourceFrom int64 `json:"source_from"`
	// DestFrom is the destination offset where the destination stopped
	// being the source's copy: nothing from there on is mapped.
	DestFrom int64 `json:"dest_from"`
	// Why says what differed.
	Why string `json:"why,omitempty"`
}

// Diverged is the copy of an old source's records beyond the last mirrored
// offset to a side topic (failback).
type Diverged struct {
	From      int64  `json:"from"` // first old-source offset beyond the last mirrored one
	To        int64  `json:"to"`   // the old source's end offset
	SideTopic string `json:"side_topic"`
	SideStart int64  `json:"side_start"` // the side partition's end before the copy
	Records   int64  `json:"records"`    // committed records to copy
	Copied    bool   `json:"copied"`
}

// SetExtension stores v, encoded as JSON, under name; a nil v removes name.
func (d *Data) SetExtension(name string, v any) error {
	if name == "" {
		return errors.New("partition record extension: empty name")
	}
	if v == nil {
		delete(d.Extensions, name)
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("partition record extension %q: encode: %w", name, err)
	}
	if d.Extensions == nil {
		d.Extensions = make(map[string]json.RawMessage)
	}
	d.Extensions[name] = b
	return nil
}

// Extension decodes the extension name into v. It reports false, and leaves
// v alone, when there is none.
func (d Data) Extension(name string, v any) (bool, error) {
	raw, ok := d.Extensions[name]
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("partition record extension %q: decode: %w", name, err)
	}
	return true, nil
}

// clone returns a deep copy: the caller may modify either freely.
func (d Data) clone() Data {
	d.Verified = clonePtr(d.Verified)
	d.SourceEpoch = clonePtr(d.SourceEpoch)
	d.Alignment = clonePtr(d.Alignment)
	d.Recopy = clonePtr(d.Recopy)
	d.Diverged = clonePtr(d.Diverged)
	if d.TxnWriters != nil {
		d.TxnWriters = append([]TxnWriter(nil), d.TxnWriters...)
	}
	if d.Extensions != nil {
		ext := make(map[string]json.RawMessage, len(d.Extensions))
		for k, v := range d.Extensions {
			ext[k] = bytes.Clone(v)
		}
		d.Extensions = ext
	}
	return d
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func (r Record) clone() Record {
	r.Data = r.Data.clone()
	return r
}

// Key returns the state-store key of the record.
func (r Record) Key() string {
	return statestore.PartitionKey(r.Mirror, r.Topic, r.Partition)
}

// NeedsOperator reports whether the partition is FAILED with no automatic
// retry scheduled: the failure is not retryable or the attempts ran out.
func (r Record) NeedsOperator() bool { return r.State == Failed && r.RetryAt.IsZero() }

// validate checks the invariants every stored record holds.
func (r Record) validate() error {
	switch {
	case r.Schema < 1 || r.Schema > schemaVersion:
		return fmt.Errorf("schema %d, this kmirror reads schema %d (was it written by a newer kmirror?)", r.Schema, schemaVersion)
	case !r.State.Valid():
		return fmt.Errorf("state %v is not a partition state", r.State)
	case r.PreviousState != Unknown && !r.PreviousState.Valid():
		return fmt.Errorf("previous state %v is not a partition state", r.PreviousState)
	case r.State == Failed && !CanFail(r.PreviousState):
		return fmt.Errorf("FAILED with previous state %v, which cannot fail", r.PreviousState)
	case r.State != Failed && (r.Retryable || !r.RetryAt.IsZero()):
		return fmt.Errorf("retry fields set in state %v", r.State)
	case r.Attempts < 0:
		return fmt.Errorf("negative attempt count %d", r.Attempts)
	case !r.Mode.Valid():
		return fmt.Errorf("mode %q is not %q or %q", r.Mode, ModePreserve, ModeMap)
	case r.LastMirroredOffset < -1:
		return fmt.Errorf("last mirrored offset %d below -1", r.LastMirroredOffset)
	case r.Verified != nil && r.Verified.Dest < 0:
		return fmt.Errorf("negative checkpoint %d", r.Verified.Dest)
	}
	for name, raw := range r.Extensions {
		if !json.Valid(raw) {
			return fmt.Errorf("extension %q is not valid JSON", name)
		}
	}
	return nil
}

func (r Record) encode() ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidRecord, err)
	}
	return json.Marshal(r)
}

// decodeRecord parses the entry stored under key and checks that it
// belongs there.
func decodeRecord(key string, value []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(value, &r); err != nil {
		return Record{}, fmt.Errorf("%w: key %q: %v", ErrInvalidRecord, key, err)
	}
	if err := r.validate(); err != nil {
		return Record{}, fmt.Errorf("%w: key %q: %s", ErrInvalidRecord, key, err)
	}
	if r.Schema == 1 {
		if err := r.migrateV1(); err != nil {
			return Record{}, fmt.Errorf("%w: key %q: schema 1: %s", ErrInvalidRecord, key, err)
		}
	}
	if r.Key() != key {
		return Record{}, fmt.Errorf("%w: key %q holds the record of mirror %q topic %q partition %d", ErrInvalidRecord, key, r.Mirror, r.Topic, r.Partition)
	}
	return r, nil
}

// v1Extensions are the extension names under which schema 1 kept what Data
// now holds as typed fields.
var v1Extensions = []struct {
	name string
	into func(d *Data) any
}{
	{"source_topic_id", func(d *Data) any { return &d.SourceTopicID }},
	{"source_epoch", func(d *Data) any {
		d.SourceEpoch = new(int32)
		return &struct {
			Epoch *int32 `json:"epoch"`
		}{d.SourceEpoch}
	}},
	{"txn_writers", func(d *Data) any { return &d.TxnWriters }},
	{"alignment", func(d *Data) any { d.Alignment = &Alignment{}; return d.Alignment }},
	{"recopy", func(d *Data) any { d.Recopy = &Recopy{}; return d.Recopy }},
	{"diverged", func(d *Data) any { d.Diverged = &Diverged{}; return d.Diverged }},
	{"failback_recreated", func(d *Data) any { return &d.Recreated }},
}

// migrateV1 moves a schema 1 record's crash-resume extensions into the
// typed fields and makes it a schema 2 record (written as such at its next
// write). Other extensions stay as they are.
func (r *Record) migrateV1() error {
	for _, e := range v1Extensions {
		raw, ok := r.Extensions[e.name]
		if !ok {
			continue
		}
		if err := json.Unmarshal(raw, e.into(&r.Data)); err != nil {
			return fmt.Errorf("extension %q: %v", e.name, err)
		}
		delete(r.Extensions, e.name)
	}
	if len(r.Extensions) == 0 {
		r.Extensions = nil
	}
	r.Schema = schemaVersion
	return nil
}
