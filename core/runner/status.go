package runner

import "time"

// Status describes one mirrored partition, with the columns of
// KIP-1279's describe output plus kmirror's mode and offsets.
type Status struct {
	Mirror    string `json:"mirror"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	State     string `json:"state"`
	// Mode is "preserve" (offsets identical) or "map" (offset map kept).
	Mode string `json:"mode"`
	// SourceHighWatermark and SourceLogStart are the source partition's,
	// as last seen by the fetcher; -1 when unknown.
	SourceHighWatermark int64 `json:"source_high_watermark"`
	SourceLogStart      int64 `json:"source_log_start"`
	// DestinationEndOffset is the destination partition's end offset as
	// last appended; -1 when unknown.
	DestinationEndOffset int64 `json:"destination_end_offset"`
	// Lag is SourceHighWatermark minus the next source offset to mirror;
	// -1 when unknown.
	Lag int64 `json:"lag"`
	// LastMirroredOffset is the last source offset copied (-1: none).
	LastMirroredOffset int64 `json:"last_mirrored_offset"`
	// LastError is the reason of the failure of a FAILED partition; while
	// a MIRRORING or PREPARING partition's destination appends are retried,
	// what they wait for ("destination appends retrying since <time>:
	// <error>", e.g. KAFKA_STORAGE_ERROR from a full disk); "" otherwise.
	LastError string `json:"last_error,omitempty"`
	// Retry is "attempt/max" for a retryable failure, "NonRetryable" for
	// one that waits for an operator, "" otherwise.
	Retry     string    `json:"retry,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	// Notes are facts an operator should know, e.g. why the partition
	// runs in map mode.
	Notes []string `json:"notes,omitempty"`
}
