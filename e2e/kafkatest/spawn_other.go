//go:build unix && !linux

package kafkatest

import (
	"os/exec"
	"syscall"
)

// startProcess starts cmd in its own process group. Without Linux's
// parent-death signal, JVMs outlive a test binary that dies without Close.
func startProcess(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.Start()
}
