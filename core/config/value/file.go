package value

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Limits of the files a configuration names (the configuration file itself
// is capped by core/config/raw). They are far above any real file and keep a
// key pointing at /dev/zero or a huge file from exhausting memory.
const (
	// MaxSecretFileBytes caps a password or token file.
	MaxSecretFileBytes = 64 << 10
	// MaxPEMFileBytes caps a PEM truststore, keystore or certificate file.
	MaxPEMFileBytes = 4 << 20
)

// ErrNotRegular is wrapped by the error of ReadFile for a path that is not
// a regular file (a directory, a named pipe, a device, a socket).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error of ReadFile for a file over its limit.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads a regular file of at most limit bytes. Anything else is
// refused before a byte is read: its mode is checked before it is opened
// (so a named pipe cannot block the caller and /dev/zero cannot fill
// memory), it is opened non-blocking where the platform allows, and what
// was opened is checked again (the name may have changed in between). A
// file that grows past limit while it is read is refused too. A failure to
// stat or open it is returned as os returns it (errors.Is(err,
// fs.ErrNotExist) works); the errors name path and never its content.
func ReadFile(path string, limit int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Op = "open" // what the caller asked for; the reason is the same
		}
		return nil, err
	}
	if err := CheckFile(path, fi, limit); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := CheckFile(path, fi, limit); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, sizeError(path, int64(len(data)), limit, true)
	}
	return data, nil
}

// CheckFile refuses a file that is not regular or is larger than limit,
// from its FileInfo, with an error naming path, what it is and the limit.
func CheckFile(path string, fi fs.FileInfo, limit int64) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is %s, %w: kmirror reads only regular files of at most %s here", path, fileKind(fi.Mode()), ErrNotRegular, FormatBytes(limit))
	}
	if fi.Size() > limit {
		return sizeError(path, fi.Size(), limit, false)
	}
	return nil
}

// CheckSize refuses data longer than limit, naming what it is (label).
func CheckSize(label string, data []byte, limit int64) error {
	if int64(len(data)) > limit {
		return sizeError(label, int64(len(data)), limit, false)
	}
	return nil
}

func sizeError(path string, size, limit int64, grew bool) error {
	if grew {
		return fmt.Errorf("%s grew past %s while it was read: %w (the limit is %s)", path, FormatBytes(limit), ErrTooLarge, FormatBytes(limit))
	}
	return fmt.Errorf("%s is %s: %w (the limit is %s)", path, FormatBytes(size), ErrTooLarge, FormatBytes(limit))
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a special file (" + m.Type().String() + ")"
}

// FormatBytes renders a size for a message: "4 MiB", "64 KiB", "1234 bytes".
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
