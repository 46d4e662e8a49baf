package contender

import (
	"os"
	"path/filepath"
	"testing"
)

// A failed contender's log tail keeps its ERROR lines and the exceptions
// under them, not MirrorMaker 2's expected checkpoint-connector refusal.
func TestLogTailKeepsErrorsAndExceptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mm2.log")
	log := "[t] INFO config dump\n" +
		"[t] ERROR Failed to configure MirrorCheckpointConnector connector for a->b (x)\n" +
		"[t] ERROR WorkerSourceTask{id=MirrorSourceConnector-8} Task threw an uncaught and unrecoverable exception\n" +
		"java.lang.OutOfMemoryError: Java heap space\n" +
		"\tat java.base/java.nio.HeapByteBuffer.<init>(HeapByteBuffer.java:64)\n" +
		"[t] INFO more\n"
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got := (&Process{logPath: path}).LogTail(10)
	want := "[t] ERROR WorkerSourceTask{id=MirrorSourceConnector-8} Task threw an uncaught and unrecoverable exception\njava.lang.OutOfMemoryError: Java heap space"
	if got != want {
		t.Errorf("logTail =\n%s\nwant\n%s", got, want)
	}
	if err := os.WriteFile(path, []byte("line 1\nline 2\nline 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := (&Process{logPath: path}).LogTail(2); got != "line 2\nline 3" {
		t.Errorf("logTail without errors = %q, want the last two lines", got)
	}
}
