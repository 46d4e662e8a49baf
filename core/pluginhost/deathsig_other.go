//go:build !linux

package pluginhost

import "os/exec"

// orphanProof does nothing where the kernel has no parent-death signal.
func orphanProof(*exec.Cmd) {}
