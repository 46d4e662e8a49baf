package pluginhost

import (
	"os/exec"
	"syscall"
)

// orphanProof makes the kernel kill the plugin when the daemon dies, even
// by SIGKILL: an orphaned plugin would otherwise keep running, and a file
// state store's lock with it, so the restarted daemon could not open its
// state.
func orphanProof(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
