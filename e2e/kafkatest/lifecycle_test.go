package kafkatest

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A port taken between picking and binding makes the broker exit; Start
// notices, picks new ports and the cluster comes up. The broker stops and
// restarts on demand, and Close kills the JVM and removes the cluster's
// directory.
func TestStartRetriesAfterPortClashAndCloseCleansUp(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var calls int
	var mu sync.Mutex
	pickPorts = func(n int) ([]int, error) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		ps, err := freePorts(n)
		if err == nil && first {
			ps[0] = taken.Addr().(*net.TCPAddr).Port // the CONTROLLER port
		}
		return ps, err
	}
	defer func() { pickPorts = freePorts }()

	var logs strings.Builder
	var logMu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Name: "clash", Logf: func(f string, a ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		t.Logf(f, a...)
		logs.WriteString(f + "\n")
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if calls != 2 {
		t.Errorf("ports picked %d times, want 2 (one clash, one retry)", calls)
	}
	if !strings.Contains(logs.String(), "retrying with new ports") {
		t.Errorf("the retry was not logged; logs:\n%s", logs.String())
	}
	if !strings.HasPrefix(c.Version(), "4.") {
		t.Errorf("version %q", c.Version())
	}
	log, err := os.ReadFile(c.BrokerLog(0))
	if err != nil || !strings.Contains(string(log), "Address already in use") {
		t.Errorf("broker log does not show the clash (err %v)", err)
	}

	// A single node stops cleanly (it is its own controller) and restarts
	// from its data.
	if err := c.StopBroker(0); err != nil {
		t.Fatal(err)
	}
	if c.Running(0) {
		t.Fatal("broker 0 running after StopBroker")
	}
	if err := c.RestartBroker(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if !c.Running(0) {
		t.Fatal("broker 0 not running after RestartBroker")
	}
	if err := c.RestartBroker(ctx, 0); !errors.Is(err, ErrBrokerRunning) {
		t.Errorf("RestartBroker on a running broker: got %v, want ErrBrokerRunning", err)
	}
	if err := c.KillBroker(1); !errors.Is(err, ErrNoSuchBroker) {
		t.Errorf("KillBroker(1) on a one-broker cluster: got %v, want ErrNoSuchBroker", err)
	}

	pid, _ := c.proc(c.nodes[0])
	dir := c.Dir()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("broker JVM %d still exists after Close (kill -0: %v)", pid, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still exists after Close", dir)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// A configuration Kafka rejects fails Start with the tool's error, and
// leaves no directory behind.
func TestStartFailsOnBadBrokerConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Start(ctx, Options{
		Name:         "badconfig",
		BrokerConfig: map[string]string{"num.io.threads": "many"},
		Logf:         t.Logf,
	})
	if !errors.Is(err, ErrToolFailed) || !strings.Contains(err.Error(), "num.io.threads") {
		t.Fatalf("got %v, want ErrToolFailed naming num.io.threads", err)
	}
	left, _ := filepath.Glob(filepath.Join(os.TempDir(), "kafkatest-*-badconfig-*"))
	if len(left) != 0 {
		t.Fatalf("directories left behind: %v", left)
	}
}
