// Package etcdtest starts real etcd servers for tests: the etcd binary
// (Debian's etcd-server package, installed by scripts/install-deps.sh; or
// the one named by $KMIRROR_ETCD_BIN), one member listening on loopback
// ports, with a throw-away data directory.
//
// A test package starts one shared server in TestMain with Start and gives
// each test its own key prefix with Server.Prefix, so its tests run in
// parallel on one server; tests that change the server (enable
// authentication, stop it) start one of their own with StartT.
package etcdtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BinEnv names the environment variable that overrides the etcd binary.
const BinEnv = "KMIRROR_ETCD_BIN"

// Options configure a server.
type Options struct {
	// CertFile, KeyFile and CAFile turn on TLS for clients: the server's
	// certificate and key, and the CA whose client certificates it
	// requires (--client-cert-auth). All or none.
	CertFile, KeyFile, CAFile string
	// MaxRequestBytes is etcd's --max-request-bytes. Default 8 MiB, so
	// that the 4 MiB values of the statestore conformance suite fit.
	MaxRequestBytes int
}

// Server is a running etcd member.
type Server struct {
	// Endpoint is the client URL: http://127.0.0.1:port, or https:// with
	// TLS.
	Endpoint string

	cmd     *exec.Cmd
	dataDir string
	exited  chan struct{} // closed when the process ended
	logMu   sync.Mutex
	log     []string // the last lines of its output
	prefix  atomic.Int64
	stopped atomic.Bool
}

// Binary returns the path of the etcd binary, or an error saying how to
// install it.
func Binary() (string, error) {
	if p := os.Getenv(BinEnv); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("etcdtest: no etcd binary on PATH (install Debian's etcd-server: scripts/install-deps.sh, or set %s)", BinEnv)
	}
	return p, nil
}

// Start starts a server; the caller stops it with Stop. It tries new
// ports a few times, since a port found free may be taken before etcd
// binds it.
func Start(opts Options) (*Server, error) {
	var err error
	for range 3 {
		var s *Server
		if s, err = start(opts); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// StartT starts a server for one test and stops it when the test ends.
func StartT(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func start(opts Options) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	// etcd fsyncs every commit: on tmpfs the suite runs in a fraction of
	// the time.
	base := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	dataDir, err := os.MkdirTemp(base, "kmirror-etcdtest-")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: data directory: %w", err)
	}
	scheme := "http"
	if opts.CertFile != "" {
		scheme = "https"
	}
	client := fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	maxReq := opts.MaxRequestBytes
	if maxReq == 0 {
		maxReq = 8 << 20
	}
	args := []string{
		"--name", "etcdtest",
		"--data-dir", filepath.Join(dataDir, "data"),
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "etcdtest=" + peer,
		"--initial-cluster-state", "new",
		"--max-request-bytes", strconv.Itoa(maxReq),
		"--logger", "zap",
		"--log-level", "info", // the readiness line is logged at info
	}
	if opts.CertFile != "" {
		args = append(args, "--cert-file", opts.CertFile, "--key-file", opts.KeyFile,
			"--trusted-ca-file", opts.CAFile, "--client-cert-auth")
	}
	s := &Server{Endpoint: client, dataDir: dataDir, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, args...)
	out, err := s.cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(dataDir)
		return nil, fmt.Errorf("etcdtest: %w", err)
	}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dataDir)
		return nil, fmt.Errorf("etcdtest: start %s: %w", bin, err)
	}
	ready := make(chan struct{})
	// Owned by the process: it ends when etcd closes its stderr, i.e.
	// exits; wait reaps the process after it.
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		signaled := false
		for sc.Scan() {
			line := sc.Text()
			s.logMu.Lock()
			if len(s.log) == 50 {
				s.log = s.log[1:]
			}
			s.log = append(s.log, line)
			s.logMu.Unlock()
			// etcd logs either once it serves clients (after it
			// elected itself leader and published its member).
			if !signaled && (strings.Contains(line, "serving client traffic") || strings.Contains(line, "ready to serve client requests")) {
				signaled = true
				close(ready)
			}
		}
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	select {
	case <-ready:
		return s, nil
	case <-s.exited:
		os.RemoveAll(dataDir)
		return nil, fmt.Errorf("etcdtest: etcd exited before it was ready:\n%s", s.lastLog())
	case <-time.After(30 * time.Second):
		s.Stop()
		return nil, fmt.Errorf("etcdtest: etcd not ready after 30s:\n%s", s.lastLog())
	}
}

func (s *Server) lastLog() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return strings.Join(s.log, "\n")
}

// Stop kills the server, waits for it and removes its data. It is
// idempotent.
func (s *Server) Stop() {
	if s.stopped.Swap(true) {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused server dies on SIGKILL too, but be explicit
	_ = s.cmd.Process.Kill()
	<-s.exited
	os.RemoveAll(s.dataDir)
}

// Pause stops the server's process (SIGSTOP) and returns once the kernel
// reports it stopped: connections stay open and requests stay unanswered
// until Resume.
func (s *Server) Pause() error {
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("etcdtest: pause: %w", err)
	}
	return s.waitState(true)
}

// Resume continues a paused server (SIGCONT) and returns once it runs.
func (s *Server) Resume() error {
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("etcdtest: resume: %w", err)
	}
	return s.waitState(false)
}

// waitState waits until the process is stopped (state T in
// /proc/<pid>/stat) or not, as stopped asks: signals are delivered
// asynchronously.
func (s *Server) waitState(stopped bool) error {
	path := fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("etcdtest: process state: %w", err)
		}
		// The state follows the command name, which is in parentheses.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) > 0 && (fields[0] == "T") == stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdtest: process %d not %s after 10s (state %v)", s.cmd.Process.Pid, map[bool]string{true: "stopped", false: "running"}[stopped], fields[:1])
		}
		time.Sleep(time.Millisecond) // polling the process state
	}
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Prefix returns a key prefix of its own for t on this server
// ("t/<test name>/<n>/"), so that tests sharing the server never see each
// other's keys.
func (s *Server) Prefix(t testing.TB) string {
	return fmt.Sprintf("t/%s/%d/", unsafeChars.ReplaceAllString(t.Name(), "_"), s.prefix.Add(1))
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdtest: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
