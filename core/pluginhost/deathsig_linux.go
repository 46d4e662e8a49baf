package pluginhost

import (
	"os/exec"
	"syscall"
)

// orphanProof ties a plugin's life to the daemon's:
//   - the kernel kills the plugin when the daemon dies, even by SIGKILL
//     (parent-death signal): an orphaned plugin would otherwise keep
//     running, and a file state store's lock with it, so the restarted
//     daemon could not open its state;
//   - the plugin runs in a process group of its own, so a signal sent to
//     the daemon's group (Ctrl-C in a terminal, a process-group kill) does
//     not stop it before the daemon's orderly shutdown has used it (the
//     last state writes); the host stops it last.
func orphanProof(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr.Setpgid = true
}
