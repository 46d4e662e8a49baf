package kafkatest

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// The kernel sends a child its parent-death signal when the *thread* that
// forked it exits, not the process. Go may end an OS thread (a goroutine that
// locked its thread and returned), so every child is forked from one thread
// that is locked and never exits: the spawner goroutine below lives as long as
// the process, by design, and is its own owner.
var (
	spawnOnce sync.Once
	spawnReqs chan spawnReq
)

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// startProcess starts cmd in its own process group, with SIGKILL as its
// parent-death signal, so that a dying test binary takes it along and a
// terminal's Ctrl-C does not hit it before the harness can.
func startProcess(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	spawnOnce.Do(func() {
		spawnReqs = make(chan spawnReq)
		go spawnLoop(spawnReqs)
	})
	req := spawnReq{cmd: cmd, done: make(chan error, 1)}
	spawnReqs <- req
	return <-req.done
}

func spawnLoop(reqs <-chan spawnReq) {
	runtime.LockOSThread() // never unlocked: this thread must outlive every child
	for r := range reqs {
		r.done <- r.cmd.Start()
	}
}
