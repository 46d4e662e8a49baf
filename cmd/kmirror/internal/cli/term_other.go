//go:build !linux

package cli

import "os"

// IsTerminal reports whether f is a character device: a terminal, most
// likely (off Linux, /dev/null passes too).
func IsTerminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	fi, err := file.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
