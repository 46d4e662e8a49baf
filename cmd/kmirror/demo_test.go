package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestDemoMirrorsAndVerifiesEveryPartition runs the embedded demo (the
// README's first command) in-process and checks its verdict.
func TestDemoMirrorsAndVerifiesEveryPartition(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := runDemo(ctx, &out, &errOut, 3000, false, 90*time.Second); err != nil {
		t.Fatalf("demo failed: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	text := out.String()
	if n := strings.Count(text, "identical\n"); n != 6 {
		t.Fatalf("%d partitions reported identical, want 6:\n%s", n, text)
	}
	if !strings.Contains(text, "all partitions identical") {
		t.Fatalf("no final verdict:\n%s", text)
	}
}
