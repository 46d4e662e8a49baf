package supervisor

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kclient"
)

// TestSetErrLogsRepeatsAtABoundedRate: a sync loop's failure is logged at
// once, its repeats at most once per interval with their count, a new
// failure at once, and the recovery with the total.
func TestSetErrLogsRepeatsAtABoundedRate(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	m := New(Deps{Log: hclog.New(&hclog.LoggerOptions{Output: &logs})}, &config.Config{}, config.Mirror{Name: "m"})
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	down := errors.New("mirror m: source cluster: dial tcp 127.0.0.1:1: connection refused")
	m.setErr("topics", down)
	for range 9 {
		now = now.Add(kclient.DefaultRepeatInterval / 10)
		m.setErr("topics", down)
	}
	if n := strings.Count(logs.String(), "sync loop"); n != 1 {
		t.Fatalf("%d lines within the interval, want 1:\n%s", n, logs.String())
	}
	now = now.Add(kclient.DefaultRepeatInterval / 10)
	m.setErr("topics", down)
	if !strings.Contains(logs.String(), "sync loop still failing") || !strings.Contains(logs.String(), "repeated=10") {
		t.Fatalf("no line with the count after the interval:\n%s", logs.String())
	}
	m.setErr("topics", errors.New("mirror m: topic orders: not authorized"))
	if !strings.Contains(logs.String(), "not authorized") {
		t.Fatalf("a new failure was not logged at once:\n%s", logs.String())
	}
	if got := m.Status().Error; !strings.Contains(got, "not authorized") {
		t.Fatalf("status error %q, want the last failure", got)
	}
	m.setErr("topics", nil)
	if !strings.Contains(logs.String(), "sync loop recovered") || !strings.Contains(logs.String(), "failures=12") {
		t.Fatalf("no recovery line with the total:\n%s", logs.String())
	}
	if got := m.Status().Error; got != "" {
		t.Fatalf("status error %q after recovery", got)
	}
}
