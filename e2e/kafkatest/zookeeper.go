package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// zooKeeper is the ZooKeeper server of a cluster in ZooKeeper mode (Kafka
// before 3.0): one standalone server on a loopback port, started from the
// cluster's own jars, its data under the cluster's directory.
type zooKeeper struct {
	port    int
	dir     string
	logPath string
	pid     int
	done    chan struct{} // closed when the JVM exits
}

// connect is the zookeeper.connect of the cluster's brokers.
func (z *zooKeeper) connect() string { return addr(z.port) }

// startZooKeeper starts a fresh ZooKeeper server (any previous one of the
// cluster is killed and its data removed first, so a retried boot never
// meets the registrations of killed brokers) and waits until it accepts
// connections. A port taken before the server bound it (another test
// process) is retried with a new port, twice.
func (c *Cluster) startZooKeeper(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := c.startZooKeeperOnce(ctx)
		if err == nil || !errors.Is(err, errPortTaken) || attempt == 3 {
			return err
		}
		c.opts.Logf("kafkatest: cluster %q: ZooKeeper's port was taken before it bound it; retrying with a new port", c.opts.Name)
	}
}

// errPortTaken: the ZooKeeper server exited because its port was in use.
var errPortTaken = errors.New("port in use")

func (c *Cluster) startZooKeeperOnce(ctx context.Context) error {
	c.stopZooKeeper()
	dir := filepath.Join(c.dir, "zookeeper")
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("kafkatest: reset %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	ports, err := pickPorts(1)
	if err != nil {
		return err
	}
	z := &zooKeeper{port: ports[0], dir: dir, logPath: filepath.Join(dir, "zookeeper.log")}
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := writeProperties(cfg, map[string]string{
		"dataDir":            filepath.Join(dir, "data"),
		"clientPort":         strconv.Itoa(z.port),
		"clientPortAddress":  "127.0.0.1",
		"tickTime":           "2000",
		"maxClientCnxns":     "0",
		"admin.enableServer": "false",
	}); err != nil {
		return err
	}
	f, err := os.OpenFile(z.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("kafkatest: ZooKeeper log: %w", err)
	}
	args := append([]string{"-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
		fmt.Sprintf("-Dkafkatest.node=%s-zookeeper", c.opts.Name)}, c.dist.logFlags(false)...)
	args = append(args, "-cp", filepath.Join(c.dist.LibsDir, "*"), "org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	cmd := exec.Command(c.dist.Java, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	if err := startProcess(cmd); err != nil {
		f.Close()
		return fmt.Errorf("kafkatest: start ZooKeeper JVM (%s): %w", c.dist.Java, err)
	}
	z.pid, z.done = cmd.Process.Pid, make(chan struct{})
	done := z.done
	// Owned by the cluster: it ends when the JVM exits, which stopZooKeeper
	// forces and waits for.
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	c.mu.Lock()
	c.zk = z
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	for {
		if zooKeeperServes(z.connect()) {
			return nil
		}
		select {
		case <-done:
			b, _ := os.ReadFile(z.logPath)
			if strings.Contains(string(b), "Address already in use") {
				return fmt.Errorf("kafkatest: ZooKeeper on %s: %w", z.connect(), errPortTaken)
			}
			return fmt.Errorf("kafkatest: ZooKeeper exited at start; the end of %s:\n%s", z.logPath, tail(b, 30))
		case <-ctx.Done():
			return fmt.Errorf("kafkatest: ZooKeeper not accepting connections on %s after %s: %w", z.connect(), c.opts.StartTimeout, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stopZooKeeper kills the cluster's ZooKeeper server, if any, and waits
// until it has exited.
func (c *Cluster) stopZooKeeper() {
	c.mu.Lock()
	z := c.zk
	c.zk = nil
	c.mu.Unlock()
	if z == nil {
		return
	}
	_ = syscall.Kill(-z.pid, syscall.SIGKILL)
	<-z.done
}

// zooKeeperNode turns a KRaft node configuration into the configuration of
// broker id in ZooKeeper mode: no controller listener or KRaft keys, a
// broker.id, the ZooKeeper connection, and the ZooKeeper-mode authorizer.
func zooKeeperNode(cfg map[string]string, id int, connect string) {
	for _, k := range slices.Collect(maps.Keys(cfg)) {
		if strings.HasPrefix(k, "listener.name."+strings.ToLower(string(controller))+".") || strings.HasPrefix(k, "share.coordinator.") {
			delete(cfg, k)
		}
	}
	for _, k := range []string{"process.roles", "node.id", "controller.listener.names", "controller.quorum.voters", "sasl.mechanism.controller.protocol"} {
		delete(cfg, k)
	}
	drop := func(key, prefix string) {
		var keep []string
		for _, e := range strings.Split(cfg[key], ",") {
			if !strings.HasPrefix(e, prefix) {
				keep = append(keep, e)
			}
		}
		cfg[key] = strings.Join(keep, ",")
	}
	drop("listeners", string(controller)+"://")
	drop("listener.security.protocol.map", string(controller)+":")
	cfg["broker.id"] = strconv.Itoa(id)
	cfg["zookeeper.connect"] = connect
	cfg["zookeeper.session.timeout.ms"] = "6000"
	if _, ok := cfg["authorizer.class.name"]; ok {
		cfg["authorizer.class.name"] = "kafka.security.authorizer.AclAuthorizer"
	}
}

// zooKeeperServes asks the server at address for its status with the srvr
// four-letter command (allowed by default) and reports whether a ZooKeeper
// server answered (not merely something listening on the port).
func zooKeeperServes(address string) bool {
	conn, err := net.DialTimeout("tcp", address, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(conn, 4096))
	return strings.Contains(string(b), "Zookeeper version")
}
