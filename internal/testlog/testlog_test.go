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
	if all := b.Lines(); len(all) != 3 || all[1]["@message"] != "stopped" {
		t.Fatalf("Lines() = %v, want the 3 JSON lines", all)
	}
}

func TestAboutPartitionFindsTheLinesMissingAField(t *testing.T) {
	t.Parallel()
	var b Buffer
	_, _ = b.Write([]byte(`{"@message":"started"}
{"@message":"appended","mirror":"m","topic":"t","partition":3}
{"@message":"partition failed","mirror":"m"}
{"@message":"fetched","topic":"t","partition":3}
{"@message":"other","mirror":"m","topic":"t","partition":4}
{"@message":"partitions wait for metadata","mirror":"m"}
`))
	about, wrong := b.AboutPartition("m", "t", 3)
	if len(about) != 4 || len(wrong) != 3 {
		t.Fatalf("about %v, wrong %v; want 4 lines about a partition, 3 wrong", about, wrong)
	}
}
