package batch

import "fmt"

// Scanner walks the Records bytes of one fetched partition batch by batch,
// without copying or allocating:
//
//	s := batch.NewScanner(records)
//	for s.Next() {
//		b := s.Batch() // whole, CRC-verified v2 batch, a view into records
//	}
//	if err := s.Err(); err != nil { ... } // s.Rest() starts at the bad batch
//	partial := s.Rest() // trailing partial batch cut by the fetch size limit
//
// A trailing partial batch is not an error: brokers cut the last batch of a
// response at the fetch size limit, and the next fetch starts at its offset.
type Scanner struct {
	rest  []byte
	pos   int // byte position of rest within the scanned records
	batch Batch
	err   error
}

// NewScanner returns a Scanner over a partition's Records bytes.
func NewScanner(records []byte) Scanner { return Scanner{rest: records} }

// Next advances to the next whole batch and reports whether there is one. It
// returns false at the end of the input, at a trailing partial batch, or at
// an invalid batch (then Err is non-nil).
func (s *Scanner) Next() bool {
	s.batch = nil
	if s.err != nil || len(s.rest) == 0 {
		return false
	}
	if len(s.rest) < LogOverhead {
		return false // partial: not even the length is here
	}
	size, err := frame(s.rest)
	if err != nil {
		s.err = fmt.Errorf("record batch at byte %d: %w", s.pos, err)
		return false
	}
	if int64(len(s.rest)) < size {
		return false // partial batch
	}
	b := Batch(s.rest[:size:size])
	if stored, computed := b.CRC(), b.ComputeCRC(); stored != computed {
		s.err = fmt.Errorf("record batch at byte %d, base offset %d: stored CRC-32C %#08x, computed %#08x: %w",
			s.pos, b.BaseOffset(), stored, computed, ErrCorruptBatch)
		return false
	}
	s.batch = b
	s.rest = s.rest[size:]
	s.pos += int(size)
	return true
}

// Batch returns the batch Next found, nil after Next returned false.
func (s *Scanner) Batch() Batch { return s.batch }

// Err returns the error that stopped the scan, nil if it stopped at the end
// or at a trailing partial batch. It wraps ErrCorruptBatch or
// ErrUnsupportedMagic and names the batch's byte position.
func (s *Scanner) Err() error { return s.err }

// Rest returns the bytes not yet returned as batches: after the scan, the
// trailing partial batch (empty if the input ended on a batch boundary), or,
// when Err is non-nil, the invalid batch and everything after it.
func (s *Scanner) Rest() []byte { return s.rest }

// Split cuts a partition's Records bytes into whole, CRC-verified batches
// (views into records, not copies). rest is the trailing partial batch a
// broker leaves at the fetch size limit, not an error. On error, batches
// holds the valid batches before the bad one and rest starts at it.
//
// Split allocates the returned slice; use a Scanner to allocate nothing.
func Split(records []byte) (batches []Batch, rest []byte, err error) {
	s := NewScanner(records)
	for s.Next() {
		batches = append(batches, s.Batch())
	}
	return batches, s.Rest(), s.Err()
}
