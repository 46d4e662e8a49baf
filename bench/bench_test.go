package main

import "testing"

func TestShellJoinQuotesWhatTheShellWouldSplit(t *testing.T) {
	got := shellJoin([]string{"-quick", "-out", "docs/x", "-conditions", "a b's", "-label", ""})
	want := `-quick -out docs/x -conditions 'a b'\''s' -label ''`
	if got != want {
		t.Errorf("shellJoin = %s, want %s", got, want)
	}
}
