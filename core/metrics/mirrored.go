package metrics

// Mirrored is what mirror has appended since the daemon started: bytes of
// batches and source offsets (records and markers); zeros for a mirror
// that appended nothing yet. The status page's rates come from it.
func (in *Engine) Mirrored(mirror string) (bytes, offsets int64) {
	in.appendsMu.Lock()
	a := in.appends[mirror]
	in.appendsMu.Unlock()
	if a == nil {
		return 0, 0
	}
	return a.bytes.Load(), a.offsets.Load()
}
