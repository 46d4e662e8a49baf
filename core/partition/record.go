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
const schemaVersion = 1

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
	if d.Verified != nil {
		v := *d.Verified
		d.Verified = &v
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
	case r.Schema != schemaVersion:
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
	if r.Key() != key {
		return Record{}, fmt.Errorf("%w: key %q holds the record of mirror %q topic %q partition %d", ErrInvalidRecord, key, r.Mirror, r.Topic, r.Partition)
	}
	return r, nil
}
