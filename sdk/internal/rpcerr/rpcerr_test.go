package rpcerr

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	errA = errors.New("a happened")
	errB = errors.New("b happened")
	errC = errors.New("c happened")
)

var table = NewTable("kmirror.plugin.test.v1",
	Sentinel{Name: "A", Err: errA, Code: codes.NotFound},
	Sentinel{Name: "B", Err: errB, Code: codes.FailedPrecondition},
	Sentinel{Name: "C", Err: errC},
)

func TestSentinelsSurviveTheRoundTrip(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		is   []error
		not  []error
		code codes.Code
	}{
		{"one sentinel", fmt.Errorf("key x: %w", errA), []error{errA}, []error{errB, errC}, codes.NotFound},
		{"two sentinels", errors.Join(fmt.Errorf("one: %w", errB), errC), []error{errB, errC}, []error{errA}, codes.FailedPrecondition},
		{"untyped", errors.New("disk on fire"), nil, []error{errA, errB, errC}, codes.Unknown},
		{"canceled", fmt.Errorf("get: %w", context.Canceled), []error{context.Canceled}, []error{errA, context.DeadlineExceeded}, codes.Canceled},
		{"deadline and sentinel", fmt.Errorf("%w: %w", errC, context.DeadlineExceeded), []error{context.DeadlineExceeded, errC}, []error{errA}, codes.DeadlineExceeded},
	}
	for _, c := range cases {
		wire := table.ToStatus(c.err)
		if got := status.Code(wire); got != c.code {
			t.Errorf("%s: code %v, want %v", c.name, got, c.code)
		}
		back := table.FromStatus(wire)
		if back.Error() != c.err.Error() {
			t.Errorf("%s: text %q, want %q", c.name, back.Error(), c.err.Error())
		}
		for _, want := range c.is {
			if !errors.Is(back, want) {
				t.Errorf("%s: errors.Is(%v) false on the host", c.name, want)
			}
		}
		for _, not := range c.not {
			if errors.Is(back, not) {
				t.Errorf("%s: errors.Is(%v) true on the host", c.name, not)
			}
		}
	}
}

func TestNilAndNonStatusErrorsPassThrough(t *testing.T) {
	t.Parallel()
	if table.ToStatus(nil) != nil || table.FromStatus(nil) != nil {
		t.Fatal("nil did not stay nil")
	}
	plain := errors.New("connection reset")
	if got := table.FromStatus(plain); got != plain {
		t.Fatalf("FromStatus(non-status) = %v, want the same error", got)
	}
}

func TestAnotherDomainsReasonIsNotMatched(t *testing.T) {
	t.Parallel()
	other := NewTable("kmirror.plugin.other.v1", Sentinel{Name: "A", Err: errors.New("other a")})
	back := table.FromStatus(other.ToStatus(fmt.Errorf("x: %w", other.sentinels[0].Err)))
	if errors.Is(back, errA) {
		t.Fatal("a reason of another domain matched this table's sentinel")
	}
}

func TestFromCallMatchesTheHostsEndedContext(t *testing.T) {
	t.Parallel()
	// A reset stream read just before the host's own deadline fires.
	reset := status.Error(codes.Internal, "stream terminated by RST_STREAM with error code: CANCEL")
	near, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := table.FromCall(near, reset); !errors.Is(err, context.DeadlineExceeded) || err.Error() != reset.(interface{ GRPCStatus() *status.Status }).GRPCStatus().Message() {
		t.Fatalf("FromCall near the deadline = %v, want the text kept and DeadlineExceeded matched", err)
	}
	far, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	if err := table.FromCall(far, reset); errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("FromCall far from the deadline matched DeadlineExceeded: %v", err)
	}
	done, cancel3 := context.WithCancel(context.Background())
	cancel3()
	if err := table.FromCall(done, table.ToStatus(fmt.Errorf("x: %w", errA))); !errors.Is(err, context.Canceled) || !errors.Is(err, errA) {
		t.Fatalf("FromCall after cancel = %v, want Canceled and the sentinel", err)
	}
	if err := table.FromCall(done, nil); err != nil {
		t.Fatalf("FromCall(nil) = %v", err)
	}
}
