package budget

// Pinned is a fetch response's buffer, kept alive by the delivered batches
// that alias it. Batches are not copied out of it (that would cost as much
// CPU as the rest of the response handling: core/fetcher's bench_test.go);
// instead the bytes of the buffer that no delivery accounts for (other
// partitions' cut or dropped batches; protocol overhead is not counted)
// stay in the budget until the last delivery aliasing it is acknowledged.
// So the budget bounds the memory fetched data really holds, even when one
// slow partition keeps a large response alive.
type Pinned struct {
	slack int64 // record bytes of the response that no delivery counts
	refs  int   // deliveries not yet fully acknowledged
}

// Pin returns the pin of a response with slack bytes that no delivery
// counts, held by refs deliveries; nil when there is no slack.
func Pin(slack int64, refs int) *Pinned {
	if slack <= 0 {
		return nil
	}
	return &Pinned{slack: slack, refs: refs}
}

// Ledger is what one partition was delivered and has not acknowledged,
// oldest first, with the response buffers it keeps alive. Its owner guards
// it (the fetcher's Manager lock).
type Ledger struct {
	held        []held
	outstanding int64 // the held n, summed, plus what Add counted and Hold has not yet recorded
}

// held is one delivery not yet acknowledged.
type held struct {
	n   int64
	buf *Pinned // nil when the response had no slack
}

// Outstanding is the bytes delivered and not yet acknowledged.
func (l *Ledger) Outstanding() int64 { return l.outstanding }

// Add counts n bytes just delivered; Hold records them once the response's
// pin is known.
func (l *Ledger) Add(n int64) { l.outstanding += n }

// Hold records a delivery of n bytes (counted by Add) aliasing buf.
func (l *Ledger) Hold(n int64, buf *Pinned) { l.held = append(l.held, held{n: n, buf: buf}) }

// Ack takes n acknowledged bytes off, oldest delivery first, and returns
// the bytes that leave the budget: n (at most what is outstanding) plus the
// slack of the responses no delivery holds any more.
func (l *Ledger) Ack(n int64) (freed int64) {
	n = min(n, l.outstanding)
	if n <= 0 {
		return 0
	}
	l.outstanding -= n
	freed = n
	for n > 0 && len(l.held) > 0 {
		h := &l.held[0]
		k := min(n, h.n)
		h.n -= k
		n -= k
		if h.n > 0 {
			break
		}
		if b := h.buf; b != nil {
			if b.refs--; b.refs == 0 {
				freed += b.slack
			}
		}
		l.held[0] = held{}
		l.held = l.held[1:]
	}
	if len(l.held) == 0 {
		l.held = nil // let the backing array go
	}
	return freed
}

// Reset forgets every delivery without freeing anything, keeping the
// ledger's memory: for benchmarks that replay one response.
func (l *Ledger) Reset() { l.held, l.outstanding = l.held[:0], 0 }
