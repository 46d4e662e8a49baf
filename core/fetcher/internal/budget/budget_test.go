package budget

import "testing"

func TestBudgetPartitionMaxShrinksWithPartitionsToAFloor(t *testing.T) {
	b := New(64 << 20)
	for _, tc := range []struct {
		partitions int
		limit      int32
		want       int32
	}{
		{0, 1 << 20, 1 << 20},
		{1, 1 << 20, 1 << 20},
		{64, 1 << 20, 1 << 20},
		{100, 1 << 20, 512 << 10}, // 655 KiB, rounded down to a power of two
		{500, 1 << 20, 128 << 10},
		{2000, 1 << 20, 32 << 10},
		{10000, 1 << 20, minPartitionFetchBytes},
		{10000, 4096, 4096}, // a configured limit under the floor stays
	} {
		b.partitions = tc.partitions
		if got := b.PartitionMax(tc.limit); got != tc.want {
			t.Errorf("%d partitions, limit %d: fetch size %d, want %d", tc.partitions, tc.limit, got, tc.want)
		}
	}
}

func TestBudgetReserveCapsWaitsAndNeverDeadlocks(t *testing.T) {
	b := New(1000)
	b.sessions = 1 // so one request may take half of the budget
	if g, w := b.Reserve(nil, 600, 100); g != 500 || w != nil {
		t.Fatalf("first reserve: %d, want half of the budget", g)
	}
	if g, _ := b.Reserve(nil, 600, 100); g != 500 {
		t.Fatalf("second reserve: %d, want what remains (500)", g)
	}
	g, w := b.Reserve(nil, 600, 100)
	if g != 0 || w == nil {
		t.Fatalf("reserve of a full budget: %d, want to wait", g)
	}
	b.Settle(500, 50) // a response brought 50 bytes
	select {
	case <-w:
	default:
		t.Fatal("released reservation did not wake the waiter")
	}
	if g, _ := b.Reserve(nil, 600, 100); g != 450 {
		t.Fatalf("reserve after settle: %d, want 450", g)
	}
	b.Settle(500, 0)
	b.Settle(450, 0)
	b.Release(50)
	if b.Buffered() != 0 || b.Reserved() != 0 {
		t.Fatalf("buffered %d reserved %d, want 0", b.Buffered(), b.Reserved())
	}
	// Sessions waiting are served in order: one that gets its
	// reservation back cannot take the room again before them.
	a, c := &Waiter{}, &Waiter{}
	if g, _ := b.Reserve(a, 1000, 100); g != 500 {
		t.Fatalf("a: %d, want 500", g)
	}
	if g, _ := b.Reserve(c, 1000, 100); g != 500 {
		t.Fatalf("c: %d, want 500", g)
	}
	if g, _ := b.Reserve(c, 1000, 100); g != 0 {
		t.Fatalf("c again: %d, want to wait", g)
	}
	b.Settle(500, 0) // a's fetch returns
	if g, _ := b.Reserve(a, 1000, 100); g != 0 {
		t.Fatalf("a again: %d, want to wait behind c", g)
	}
	if g, _ := b.Reserve(c, 1000, 100); g != 500 {
		t.Fatalf("c when first in line: %d, want 500", g)
	}
	b.Settle(500, 0)
	b.Leave(a) // a no longer asks
	if g, _ := b.Reserve(c, 1000, 100); g != 500 {
		t.Fatalf("c after a left: %d, want 500", g)
	}
	b.Settle(500, 0)
	b.Settle(500, 0)

	// Nothing buffered: a fetch larger than the whole budget still goes.
	b.SetMax(10)
	if g, _ := b.Reserve(nil, 600, 100); g != 10 {
		t.Fatalf("reserve with nothing buffered: %d, want the whole budget", g)
	}
}
