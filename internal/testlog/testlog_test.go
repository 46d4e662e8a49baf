package testlog

import (
	"strings"
	"sync"
	"testing"
)

func TestConcurrentWritesAreAllKept(t *testing.T) {
	t.Parallel()
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("x\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "x\n"); n != 800 {
		t.Fatalf("%d lines kept, want 800", n)
	}
}

func TestMessagesDecodesTheJSONLinesOfOneMessage(t *testing.T) {
	t.Parallel()
	var b Buffer
	_, _ = b.Write([]byte(`{"@message":"started","pid":7}` + "\n" + `not json` + "\n" + `{"@message":"stopped"}` + "\n" + `{"@message":"started","pid":8}` + "\n"))
	got := b.Messages("started")
	if len(got) != 2 || got[0]["pid"] != 7.0 || got[1]["pid"] != 8.0 {
		t.Fatalf("Messages(started) = %v", got)
	}
}
