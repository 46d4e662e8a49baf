package kafkatest

import "os/exec"

// StartProcess starts cmd the way the harness starts brokers: in its own
// process group and, on Linux, with SIGKILL as its parent-death signal, so
// that a program that dies takes the process with it. The benchmark uses it
// for the mirrors it measures. cmd.SysProcAttr is replaced.
func StartProcess(cmd *exec.Cmd) error { return startProcess(cmd) }

// BrokerPID returns the process id of broker i's JVM, or 0 when it is not
// running (for reading its CPU time from /proc).
func (c *Cluster) BrokerPID(i int) int {
	if i < 0 || i >= len(c.nodes) {
		return 0
	}
	n := c.nodes[i]
	pid, done := c.proc(n)
	if done == nil {
		return 0
	}
	select {
	case <-done:
		return 0
	default:
		return pid
	}
}
