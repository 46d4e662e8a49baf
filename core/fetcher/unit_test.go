package fetcher

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestNewValidatesOptionsOnce(t *testing.T) {
	t.Parallel()
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	m, err := New(cl)
	if err != nil {
		t.Fatalf("New with defaults: %v", err)
	}
	c := m.cfg
	if c.fetchers != 1 || c.partitionMaxBytes != 1048576 || c.minBytes != 1 || c.responseMaxBytes != 10485760 ||
		c.maxWait != 500*time.Millisecond || c.backoff != time.Second || m.sh.PauseAt() != 2*1048576 || c.throttle != nil ||
		c.budget == nil || c.budget.Max() != DefaultBudgetBytes {
		t.Errorf("defaults %+v, want Kafka's replica fetcher defaults", c)
	}
	if m, _ := New(cl, WithPartitionMaxBytes(1000)); m.sh.PauseAt() != 2000 {
		t.Errorf("derived buffer limit %d, want twice the partition max bytes", m.sh.PauseAt())
	}

	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{WithFetchersPerBroker(0), "mirror.num.replica.fetchers"},
		{WithPartitionMaxBytes(0), "replica.fetch.max.bytes"},
		{WithMinBytes(-1), "replica.fetch.min.bytes"},
		{WithResponseMaxBytes(0), "replica.fetch.response.max.bytes"},
		{WithMaxWait(-time.Millisecond), "replica.fetch.wait.max.ms"},
		{WithMaxWait(1 << 62), "replica.fetch.wait.max.ms"},
		{WithBackoff(-1), "replica.fetch.backoff.ms"},
		{WithMaxBufferedBytes(0), "max buffered bytes"},
		{WithLogger(nil), "logger"},
	} {
		_, err := New(cl, tc.opt)
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("option for %s: error %v, want ErrInvalidOption naming it", tc.want, err)
		}
	}
	_, err = New(cl, WithMinBytes(100), WithResponseMaxBytes(10))
	if err == nil || !strings.Contains(err.Error(), "must not exceed replica.fetch.response.max.bytes") {
		t.Errorf("min bytes above response max: %v", err)
	}
	_, err = New(cl, WithFetchersPerBroker(0), WithBackoff(-1))
	if err == nil || !strings.Contains(err.Error(), "mirror.num.replica.fetchers") || !strings.Contains(err.Error(), "replica.fetch.backoff.ms") {
		t.Errorf("two bad options: %v, want both named", err)
	}
	if _, err := New(nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("nil client: %v", err)
	}
}

func TestAddRejectsBadSpecs(t *testing.T) {
	t.Parallel()
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	m, err := New(cl)
	if err != nil {
		t.Fatal(err)
	}
	q := NewQueue()
	for _, tc := range []struct {
		spec PartitionSpec
		sink Sink
	}{
		{PartitionSpec{Partition: 0, LeaderEpoch: -1}, q},
		{PartitionSpec{Topic: "t", Partition: -1, LeaderEpoch: -1}, q},
		{PartitionSpec{Topic: "t", FetchOffset: -1, LeaderEpoch: -1}, q},
		{PartitionSpec{Topic: "t", LeaderEpoch: -2}, q},
		{PartitionSpec{Topic: "t", LeaderEpoch: -1}, nil},
	} {
		if err := m.Add(tc.spec, tc.sink); err == nil {
			t.Errorf("Add(%+v) accepted", tc.spec)
		}
	}
	if err := m.Add(PartitionSpec{Topic: "t", LeaderEpoch: -1}, q); err != nil {
		t.Fatal(err)
	}
	if err := m.Add(PartitionSpec{Topic: "t", LeaderEpoch: -1}, q); !errors.Is(err, ErrAlreadyAdded) {
		t.Errorf("second Add: %v, want ErrAlreadyAdded", err)
	}
	st, ok := m.Status("t", 0)
	if !ok || st.State != StateWaitingForLeader || st.Lag() != -1 || st.Leader != -1 {
		t.Errorf("status before Run %+v, want waiting for a leader with unknown lag", st)
	}
}

func TestErrorsNameThePartitionAndTheWayOut(t *testing.T) {
	t.Parallel()
	oor := &OffsetOutOfRangeError{Topic: "t", Partition: 3, FetchOffset: 5, LogStartOffset: 10, LogEndOffset: 20}
	if !errors.Is(oor, ErrOffsetOutOfRange) || !strings.Contains(oor.Error(), "t-3") || !strings.Contains(oor.Error(), "deleted") {
		t.Errorf("out of range below the start: %v", oor)
	}
	beyond := &OffsetOutOfRangeError{Topic: "t", Partition: 3, FetchOffset: 50, LogStartOffset: -1, LogEndOffset: 20}
	if !strings.Contains(beyond.Error(), "shorter") || !strings.Contains(beyond.Error(), "log start unknown") {
		t.Errorf("out of range beyond the end: %v", beyond)
	}
	de := &DivergedError{Topic: "t", Partition: 1, FetchOffset: 9, LastFetchedEpoch: 4, DivergingEpoch: 3, DivergingEndOffset: 7}
	if !errors.Is(de, ErrDiverged) || !strings.Contains(de.Error(), "t-1") || !strings.Contains(de.Error(), "unclean") {
		t.Errorf("diverged: %v", de)
	}
	for s, want := range map[State]string{StateWaitingForLeader: "waiting-for-leader", StateFetching: "fetching", StatePaused: "paused", StateFailed: "failed", State(9): "State(9)"} {
		if s.String() != want {
			t.Errorf("State %d String %q, want %q", s, s.String(), want)
		}
	}
}
