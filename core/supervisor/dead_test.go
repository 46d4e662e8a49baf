package supervisor

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/internal/testlog"
)

// A goroutine of the mirror that ends while the mirror runs is dead: it
// is counted (kmirror_dead_thread_count) and logged; one that ends because
// the mirror stops is not.
func TestEndedGoroutinesAreDeadOnlyWhileTheMirrorRuns(t *testing.T) {
	t.Parallel()
	var logs testlog.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mirror{name: "dc1", ctx: ctx, cancel: cancel, log: hclog.New(&hclog.LoggerOptions{Output: &logs})}
	m.ended("partition runner", "topic", "orders", "partition", 3)
	if n := m.DeadThreads(); n != 1 {
		t.Errorf("DeadThreads = %d after a runner ended while the mirror runs, want 1", n)
	}
	if !strings.Contains(logs.String(), "partition runner ended while the mirror runs") || !strings.Contains(logs.String(), "partition=3") {
		t.Errorf("the log does not say which goroutine ended:\n%s", logs.String())
	}
	cancel()
	m.ended("data path")
	if n := m.DeadThreads(); n != 1 {
		t.Errorf("DeadThreads = %d after the data path ended with its mirror stopping, want still 1", n)
	}
}
