package writer

import (
	"context"
	"testing"

	"github.com/kmirror/kmirror/core/logging"
	"github.com/kmirror/kmirror/internal/testlog"
)

// TestLogLinesAboutAPartitionCarryItsFields: a writer given the daemon's
// root JSON logger (no fields of its own) logs every line about a partition
// (its transactional writers, an abort) with mirror, topic and partition
// fields.
func TestLogLinesAboutAPartitionCarryItsFields(t *testing.T) {
	t.Parallel()
	var buf testlog.Buffer
	root, err := logging.New(&buf, "trace", logging.FormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t)
	p := openPartition(t, newWriter(t, c, Logger(root)), testTopic, 0, &recorder{})
	mustAppend(t, p, kvBatch(t, 0, 4001, true, "a", "1"))
	if err := p.AbortAll(context.Background()); err != nil {
		t.Fatalf("AbortAll: %v", err)
	}
	for _, msg := range []string{"transactional writer initialised", "destination transaction aborted"} {
		if len(buf.Messages(msg)) == 0 {
			t.Fatalf("no line %q in the log:\n%s", msg, buf.String())
		}
	}
	about, wrong := buf.AboutPartition("test", testTopic, 0)
	if len(about) == 0 || len(wrong) > 0 {
		t.Fatalf("%d lines about the partition; these lack its mirror, topic or partition field: %v", len(about), wrong)
	}
}
