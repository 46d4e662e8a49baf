package supervisor

import (
	"bytes"
	"errors"
	"fmt"
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

// TestStatusHasOneShortLinePerFailingLoopAndTheFullCause: each failing
// loop is one line in the status's error, without the mirror's name
// repeated by the layers of wrapping, and its full cause is kept in Errors.
func TestStatusHasOneShortLinePerFailingLoopAndTheFullCause(t *testing.T) {
	t.Parallel()
	m := New(Deps{Log: hclog.NewNullLogger()}, &config.Config{}, config.Mirror{Name: "dc1"})
	acls := errors.New(`aclsync: mirror "dc1": describing the source ACLs failed; nothing was changed: mirror dc1: source cluster: unable to dial: dial tcp 10.0.0.7:9092: connect: connection refused`)
	var layers strings.Builder
	for i := range 40 {
		fmt.Fprintf(&layers, "layer %d: ", i)
	}
	topics := errors.New("mirror dc1: listing source topics: mirror dc1: source cluster: " + layers.String() + "i/o timeout")
	m.setErr("acls", acls)
	m.setErr("topics", topics)
	st := m.Status()
	if len(st.Errors) != 2 || st.Errors[0].Loop != "acls" || st.Errors[1].Loop != "topics" {
		t.Fatalf("errors %+v", st.Errors)
	}
	if st.Errors[0].Cause != acls.Error() || st.Errors[1].Cause != topics.Error() {
		t.Fatalf("causes %+v; want the full errors", st.Errors)
	}
	want := "describing the source ACLs failed; nothing was changed: source cluster: unable to dial: dial tcp 10.0.0.7:9092: connect: connection refused"
	if st.Errors[0].Message != want {
		t.Fatalf("acls line %q, want %q", st.Errors[0].Message, want)
	}
	if l := st.Errors[1].Message; len(l) > 240 || !strings.HasPrefix(l, "listing source topics: …") || !strings.HasSuffix(l, "layer 39: i/o timeout") {
		t.Fatalf("topics line %q: want what failed and the root cause, short", l)
	}
	if strings.Contains(st.Error, "dc1") || strings.Count(st.Error, "; ") < 1 || !strings.HasPrefix(st.Error, "acls: describing") || !strings.Contains(st.Error, "; topics: listing") {
		t.Fatalf("status error %q: want one short line per loop, without the mirror's name", st.Error)
	}
	if strings.Contains(st.Error, "needs DESCRIBE") {
		t.Fatalf("a connection refused got an ACL hint: %q", st.Error)
	}
}
