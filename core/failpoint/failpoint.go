// Package failpoint lets the end-to-end tests stop a kmirror process at a
// named step, exactly as a crash would, to prove that every step of a
// write sequence can be interrupted without losing or duplicating a record.
//
// A failpoint is armed through the environment:
//
//	KMIRROR_FAILPOINTS=name[@n][,name[@n]...]
//
// The process kills itself with SIGKILL the n-th time (default: the first)
// it reaches the step called name. Unset, Reach costs one atomic load.
// The steps are listed in docs/testing.md.
package failpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Env is the environment variable that arms failpoints.
const Env = "KMIRROR_FAILPOINTS"

var (
	armed atomic.Bool
	mu    sync.Mutex
	left  map[string]int // name → hits left before the crash
)

func init() { Arm(os.Getenv(Env)) }

// Arm replaces the armed failpoints with spec (the Env syntax); "" disarms
// them all.
func Arm(spec string) {
	m := map[string]int{}
	for _, f := range strings.Split(spec, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, n := f, 1
		if i := strings.LastIndexByte(f, '@'); i > 0 {
			if v, err := strconv.Atoi(f[i+1:]); err == nil && v > 0 {
				name, n = f[:i], v
			}
		}
		m[name] = n
	}
	mu.Lock()
	left = m
	mu.Unlock()
	armed.Store(len(m) > 0)
}

// crash is what an armed failpoint does; tests in this package replace it.
var crash = func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL); select {} }

// Reach marks that the process reached the step called name.
func Reach(name string) {
	if !armed.Load() {
		return
	}
	mu.Lock()
	n, ok := left[name]
	if ok {
		n--
		left[name] = n
	}
	mu.Unlock()
	if ok && n == 0 {
		crash()
	}
}
