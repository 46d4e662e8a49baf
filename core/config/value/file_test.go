package value_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kmirror/kmirror/core/config/value"
)

func TestReadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("12345678"), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := value.ReadFile(ok, 8); err != nil || string(data) != "12345678" {
		t.Errorf("ReadFile at the limit = %q, %v", data, err)
	}
	if _, err := value.ReadFile(ok, 7); !errors.Is(err, value.ErrTooLarge) || !strings.Contains(err.Error(), "8 bytes") || !strings.Contains(err.Error(), "the limit is 7 bytes") {
		t.Errorf("ReadFile over the limit: %v", err)
	}
	if _, err := value.ReadFile(filepath.Join(dir, "none"), 8); !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "open ") {
		t.Errorf("ReadFile of a missing file: %v, want an open error wrapping fs.ErrNotExist", err)
	}
	fifo := filepath.Join(dir, "fifo")
	kinds := map[string]string{dir: "a directory"}
	if syscall.Mkfifo(fifo, 0o600) == nil {
		kinds[fifo] = "a named pipe (FIFO)"
	}
	if _, err := os.Stat("/dev/null"); err == nil {
		kinds["/dev/null"] = "a character device"
	}
	for path, kind := range kinds {
		_, err := value.ReadFile(path, 1<<20)
		if !errors.Is(err, value.ErrNotRegular) || !strings.Contains(err.Error(), path+" is "+kind) || !strings.Contains(err.Error(), "1 MiB") {
			t.Errorf("ReadFile(%s) = %v, want %s refused with the limit", path, err, kind)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{12: "12 bytes", 64 << 10: "64 KiB", 4 << 20: "4 MiB", 5<<20 + 1<<19: "5.5 MiB", 1500: "1500 bytes"} {
		if got := value.FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
