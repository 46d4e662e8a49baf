package contender

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// Process is a contender's running process, its output in a log file.
type Process struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}

	mu      sync.Mutex
	waitErr error
}

// startProcess starts cmd with stdout and stderr appended to logPath, in its
// own process group, killed if the bench dies (kafkatest.StartProcess).
func startProcess(cmd *exec.Cmd, logPath string) (*Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := kafkatest.StartProcess(cmd); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := &Process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() { // owned by p: ends when the process exits (Stop forces it)
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// PID is the process's id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.waitErr == nil {
			return true, errors.New("exited with status 0")
		}
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group, waits up to grace, then kills it.
func (p *Process) Stop(grace time.Duration) {
	_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		<-p.done
	}
}

// javaThrowable matches the first line of a Java stack trace
// ("java.lang.OutOfMemoryError: Java heap space"), which follows the ERROR
// line that announces it.
var javaThrowable = regexp.MustCompile(`^[a-z][\w.]*\.\w*(Exception|Error)\b`)

// LogTail returns the last n lines of the process's log, or of its lines
// that hold ERROR when there are any (a JVM's log is mostly configuration
// dumps), each cut to 400 bytes.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var errLines []string
	for _, l := range lines {
		// MirrorMaker 2 logs its checkpoint connector's refusal to run
		// with checkpoints off at every start: expected, not a cause.
		switch {
		case strings.Contains(l, "Failed to configure MirrorCheckpointConnector"):
		case strings.Contains(l, "ERROR"), javaThrowable.MatchString(l):
			errLines = append(errLines, l)
		}
	}
	if len(errLines) > 0 {
		lines = errLines
	}
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = l[:400] + "…"
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
