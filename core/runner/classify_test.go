package runner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/partition"
)

// A source batch in message format v0/v1 (an old source's legacy topic) fails
// the partition for good, naming the format and what the operator can do;
// other fetch errors stay retryable.
func TestLegacyMessageFormatFailsThePartitionWithoutRetries(t *testing.T) {
	t.Parallel()
	r := &Runner{d: Deps{Mirror: "m"}, topic: "legacy", partition: 2}
	err := r.classify(fmt.Errorf("legacy-2: source batch at or after offset 0: base offset 0 has magic 1 (message format v1): %w", batch.ErrUnsupportedMagic))
	if partition.IsRetryable(err) {
		t.Errorf("a message format v1 batch is retryable: %v", err)
	}
	for _, want := range []string{"mirror m: topic legacy partition 2", "message format v1", "mirror.topics.exclude"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := r.classify(fmt.Errorf("NOT_LEADER_FOR_PARTITION")); !partition.IsRetryable(err) {
		t.Errorf("a transient fetch error is not retryable: %v", err)
	}
}
