package kafkatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/e2e/kafkatest/faultproxy"
)

// Errors callers can branch on.
var (
	// ErrNoSuchBroker: a broker index outside [0, Brokers).
	ErrNoSuchBroker = errors.New("kafkatest: no such broker")
	// ErrBrokerRunning: RestartBroker on a broker that is still running.
	ErrBrokerRunning = errors.New("kafkatest: broker is running")
	// ErrBrokerExited: a broker JVM exited while the harness waited for it.
	ErrBrokerExited = errors.New("kafkatest: broker exited")
	// ErrClosed: the cluster was closed.
	ErrClosed = errors.New("kafkatest: cluster is closed")
)

// Cluster is a running KRaft cluster of 1 or 3 combined broker+controller
// nodes (for Kafka before 3.0: brokers and a ZooKeeper server; version.go).
// Broker i has node.id (broker.id) i. Its methods are safe for concurrent
// use.
type Cluster struct {
	opts  Options
	dist  *Dist
	dir   string
	id    string // KRaft cluster id
	spec  clusterSpec
	ca    *CA
	certs map[string]*Cert // client certificates by name
	// caFile is the CA certificate's path (TLS only).
	caFile string
	// proxies by node id (FaultProxies only): each forwards to its
	// broker's Proxied listener. They live as long as the cluster.
	proxies []*faultproxy.Proxy

	mu     sync.Mutex // guards nodes' processes, zk and closed
	nodes  []*node
	zk     *zooKeeper // ZooKeeper mode only (zookeeper.go)
	closed bool
}

// node is one JVM of the cluster.
type node struct {
	id      int
	dir     string
	config  string // server.properties
	logPath string

	// Set while the JVM runs: cmd and done (closed by the goroutine that
	// waits for the process, which then sets waitErr).
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

func (n *node) running() bool {
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Start formats storage for and starts a cluster, and returns once every
// broker serves (its metadata lists all brokers). On failure it logs the tail
// of every broker's log through Options.Logf, removes everything it made and
// returns an error naming what failed. The caller must Close the cluster.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := o.Dist
	if d == nil {
		if d, err = Resolve(ctx); err != nil {
			return nil, err
		}
	}
	if d.ZooKeeper() && len(o.scramArgs()) > 0 {
		return nil, fmt.Errorf("%w: SCRAM users need KRaft storage formatting; Apache Kafka %s runs in ZooKeeper mode", ErrInvalidOptions, d.Version)
	}
	sweepStale(o.Logf)
	dir, err := os.MkdirTemp("", fmt.Sprintf("kafkatest-%d-%s-", os.Getpid(), o.Name))
	if err != nil {
		return nil, fmt.Errorf("kafkatest: temporary directory for cluster %q: %w", o.Name, err)
	}
	c := &Cluster{opts: o, dist: d, dir: dir}
	if err := c.prepare(); err != nil {
		c.Close()
		return nil, err
	}
	began := time.Now()
	for attempt := 1; ; attempt++ {
		err = c.boot(ctx)
		if err == nil {
			break
		}
		if c.portClash() && attempt < 3 && ctx.Err() == nil {
			o.Logf("kafkatest: cluster %q: a port was taken before its broker bound it; retrying with new ports (attempt %d)", o.Name, attempt+1)
			c.killAll()
			if err := c.resetNodes(); err != nil {
				c.Close()
				return nil, err
			}
			continue
		}
		o.Logf("kafkatest: cluster %q failed to start: %v\n%s", o.Name, err, c.LogTail(60))
		c.Close()
		return nil, fmt.Errorf("kafkatest: start cluster %q (Apache Kafka %s, %d broker(s)): %w", o.Name, d.Version, o.Brokers, err)
	}
	o.Logf("kafkatest: cluster %q: Apache Kafka %s (commit %s), %d broker(s) serving after %s; PLAINTEXT bootstrap %s; dir %s",
		o.Name, d.Version, d.Commit, o.Brokers, time.Since(began).Round(10*time.Millisecond),
		strings.Join(c.Bootstrap(Plaintext), ","), dir)
	return c, nil
}

// prepare generates the cluster id, credentials and certificates and lays out
// the node directories.
func (c *Cluster) prepare() error {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("kafkatest: cluster id: %w", err)
	}
	c.id = base64.RawURLEncoding.EncodeToString(id[:])
	if c.id[0] == '-' { // Kafka's own ids never start with '-' (CLI parsing)
		c.id = "A" + c.id[1:]
	}
	var pw [12]byte
	if _, err := rand.Read(pw[:]); err != nil {
		return fmt.Errorf("kafkatest: admin password: %w", err)
	}
	c.spec = clusterSpec{opts: c.opts, adminPassword: hex.EncodeToString(pw[:])}

	if c.opts.TLS != nil {
		tlsDir := filepath.Join(c.dir, "tls")
		if err := os.Mkdir(tlsDir, 0o700); err != nil {
			return fmt.Errorf("kafkatest: %w", err)
		}
		ca, err := NewCA(c.opts.Name + "-ca")
		if err != nil {
			return err
		}
		c.ca = ca
		if c.caFile, err = ca.WriteFiles(tlsDir); err != nil {
			return err
		}
		server, err := ca.IssueServer(c.opts.Name + "-broker")
		if err != nil {
			return err
		}
		if err := server.WriteFiles(tlsDir); err != nil {
			return err
		}
		c.spec.tlsKeystore, c.spec.tlsTruststore = server.KeystoreFile, c.caFile
		c.certs = map[string]*Cert{}
		for _, name := range c.opts.TLS.ClientCerts {
			cert, err := ca.IssueClient(name)
			if err != nil {
				return err
			}
			if err := cert.WriteFiles(tlsDir); err != nil {
				return err
			}
			c.certs[name] = cert
		}
	}

	for i := range c.opts.Brokers {
		n := &node{id: i, dir: filepath.Join(c.dir, fmt.Sprintf("node-%d", i))}
		n.config = filepath.Join(n.dir, "server.properties")
		n.logPath = filepath.Join(n.dir, "server.log")
		if err := os.MkdirAll(n.dir, 0o700); err != nil {
			return fmt.Errorf("kafkatest: %w", err)
		}
		c.nodes = append(c.nodes, n)
		c.spec.dataDirs = append(c.spec.dataDirs, filepath.Join(n.dir, "data"))
		if c.opts.FaultProxies {
			// Listening before the ports are picked, so that no broker port
			// is the proxy's; the target follows the picked port (boot).
			p, err := faultproxy.Start("")
			if err != nil {
				return fmt.Errorf("kafkatest: fault proxy of broker %d: %w", i, err)
			}
			c.proxies = append(c.proxies, p)
			c.spec.proxyAddrs = append(c.spec.proxyAddrs, p.Addr())
		}
	}
	return nil
}

// boot picks ports, writes every node's configuration, formats storage and
// starts the JVMs, then waits until all brokers serve.
func (c *Cluster) boot(ctx context.Context) error {
	ls := c.opts.allListeners()
	ports, err := pickPorts(len(ls) * len(c.nodes))
	if err != nil {
		return err
	}
	if c.dist.ZooKeeper() {
		if err := c.startZooKeeper(ctx); err != nil {
			return err
		}
		c.spec.zkConnect = c.zk.connect()
	}
	c.spec.ports = make([]nodePorts, len(c.nodes))
	for i := range c.nodes {
		c.spec.ports[i] = nodePorts{}
		for j, l := range ls {
			c.spec.ports[i][l] = ports[i*len(ls)+j]
		}
	}
	for i, p := range c.proxies {
		p.SetTarget(addr(c.spec.ports[i][Proxied]))
	}
	for _, n := range c.nodes {
		if err := writeProperties(n.config, c.spec.nodeConfig(n.id)); err != nil {
			return err
		}
	}
	if !c.dist.ZooKeeper() {
		if err := c.format(ctx); err != nil {
			return err
		}
	}
	c.mu.Lock()
	for _, n := range c.nodes {
		if err := c.startNode(n); err != nil {
			c.mu.Unlock()
			return err
		}
	}
	c.mu.Unlock()
	return c.waitServing(ctx)
}

// format runs the storage tool for every node at once.
func (c *Cluster) format(ctx context.Context) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() {
			args := append([]string{"format", "-t", c.id, "-c", n.config}, c.opts.scramArgs()...)
			if _, err := c.dist.RunTool(ctx, "kafka.tools.StorageTool", args...); err != nil {
				errs[i] = fmt.Errorf("format storage of broker %d: %w", n.id, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// jvmArgs returns the java arguments that run a broker.
func (c *Cluster) jvmArgs(n *node) []string {
	args := []string{
		"-Xms64m", "-Xmx512m",
		"-XX:+UseSerialGC",
		"-XX:TieredStopAtLevel=1", // C1 only: faster start, enough for tests
		"-XX:+ExitOnOutOfMemoryError",
		"-XX:-UsePerfData",
		"-Djava.awt.headless=true",
		// Names the process in ps output; not read by Kafka.
		fmt.Sprintf("-Dkafkatest.node=%s-%d", c.opts.Name, n.id),
	}
	if c.opts.SASL != nil && c.opts.SASL.OAuth != nil {
		// Kafka 4 reads no JWKS URL that this property does not allow.
		args = append(args, "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="+c.opts.SASL.OAuth.JWKSURL)
	}
	if c.opts.SASL != nil && c.opts.SASL.Kerberos != nil {
		args = append(args, "-Djava.security.krb5.conf="+c.opts.SASL.Kerberos.Krb5Conf)
	}
	args = append(args, c.dist.logFlags(false)...)
	args = append(args, c.opts.JVMOptions...)
	return append(args, "-cp", filepath.Join(c.dist.LibsDir, "*"), "kafka.Kafka", n.config)
}

// startNode starts node n's JVM, appending its output to its log. c.mu held.
func (c *Cluster) startNode(n *node) error {
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("kafkatest: broker %d log: %w", n.id, err)
	}
	fmt.Fprintf(f, "==== kafkatest: starting broker %d of cluster %q at %s ====\n", n.id, c.opts.Name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.dist.Java, c.jvmArgs(n)...)
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = f, f
	if err := startProcess(cmd); err != nil {
		f.Close()
		return fmt.Errorf("kafkatest: start broker %d JVM (%s): %w", n.id, c.dist.Java, err)
	}
	done := make(chan struct{})
	n.cmd, n.done, n.waitErr = cmd, done, nil
	// Owned by the node: it ends when the JVM exits, which Close and
	// KillBroker force and wait for.
	go func() {
		err := cmd.Wait()
		f.Close()
		c.mu.Lock()
		n.waitErr = err
		c.mu.Unlock()
		close(done)
	}()
	return nil
}

// proc returns node n's JVM pid and the channel closed when it exits; pid is
// 0 when the node was never started.
func (c *Cluster) proc(n *node) (pid int, done chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.cmd == nil {
		return 0, nil
	}
	return n.cmd.Process.Pid, n.done
}

// signalNode sends sig to node n's process group and waits up to wait for the
// JVM to exit (forever when wait is 0). It reports whether the JVM exited.
func (c *Cluster) signalNode(n *node, sig syscall.Signal, wait time.Duration) bool {
	pid, done := c.proc(n)
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	default:
	}
	_ = syscall.Kill(-pid, sig)
	if wait == 0 {
		<-done
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}

// killAll SIGKILLs every JVM and waits until all have exited.
func (c *Cluster) killAll() {
	for _, n := range c.nodes {
		c.signalNode(n, syscall.SIGKILL, 0)
	}
}

// resetNodes removes every node's data directory (before a new attempt),
// and empties the log directories Options.NodeConfig gives a node instead
// (the caller's, perhaps mount points: kept themselves).
func (c *Cluster) resetNodes() error {
	for _, d := range c.spec.dataDirs {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("kafkatest: reset %s: %w", d, err)
		}
	}
	for _, cfg := range c.opts.NodeConfig {
		dirs := strings.Split(cfg["log.dirs"], ",")
		for _, d := range append(dirs, cfg["metadata.log.dir"]) {
			if d == "" {
				continue
			}
			entries, _ := os.ReadDir(d)
			for _, e := range entries {
				if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
					return fmt.Errorf("kafkatest: reset %s: %w", d, err)
				}
			}
		}
	}
	return nil
}

// portClash reports whether a broker's log says it could not bind a port.
func (c *Cluster) portClash() bool {
	for _, n := range c.nodes {
		b, _ := os.ReadFile(n.logPath)
		if bytes.Contains(b, []byte("Address already in use")) {
			return true
		}
	}
	return false
}

// waitServing waits until each running broker answers a metadata request
// listing every running broker, or a broker exits, or StartTimeout passes.
func (c *Cluster) waitServing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	c.mu.Lock()
	var running []*node
	var dones []chan struct{}
	for _, n := range c.nodes {
		if n.running() {
			running = append(running, n)
			dones = append(dones, n.done)
		}
	}
	c.mu.Unlock()

	clients := make([]*kgo.Client, len(running))
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	admin := c.AdminIdentity()
	for i, n := range running {
		opts, err := c.identityOpts(admin)
		if err != nil {
			return err
		}
		opts = append(opts, kgo.SeedBrokers(addr(c.spec.ports[n.id][Internal])))
		if clients[i], err = kgo.NewClient(opts...); err != nil {
			return fmt.Errorf("kafkatest: client for broker %d: %w", n.id, err)
		}
	}

	ready := make([]bool, len(running))
	var lastErr error
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		all := true
		for i, n := range running {
			select {
			case <-dones[i]:
				c.mu.Lock()
				werr := n.waitErr
				c.mu.Unlock()
				return fmt.Errorf("%w: broker %d (%v); see its log %s", ErrBrokerExited, n.id, werr, n.logPath)
			default:
			}
			if ready[i] {
				continue
			}
			if err := brokersListed(ctx, clients[i], len(running)); err != nil {
				lastErr = fmt.Errorf("broker %d: %w", n.id, err)
				all = false
				continue
			}
			ready[i] = true
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkatest: brokers not serving after %s (last: %v): %w", c.opts.StartTimeout, lastErr, ctx.Err())
		case <-tick.C:
		}
	}
}

// brokersListed asks the client's seed broker for metadata and checks that it
// lists want brokers.
func brokersListed(ctx context.Context, cl *kgo.Client, want int) error {
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		return fmt.Errorf("want one seed broker, have %d", len(seeds))
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := seeds[0].Request(rctx, req)
	if err != nil {
		return err
	}
	got := len(resp.(*kmsg.MetadataResponse).Brokers)
	if got != want {
		return fmt.Errorf("metadata lists %d of %d brokers", got, want)
	}
	return nil
}

func (c *Cluster) node(i int) (*node, error) {
	if i < 0 || i >= len(c.nodes) {
		return nil, fmt.Errorf("%w: %d (cluster %q has brokers 0..%d)", ErrNoSuchBroker, i, c.opts.Name, len(c.nodes)-1)
	}
	return c.nodes[i], nil
}

// KillBroker SIGKILLs broker i (a crash: no controlled shutdown) and waits
// until its JVM is gone. Killing a stopped broker does nothing.
func (c *Cluster) KillBroker(i int) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	c.signalNode(n, syscall.SIGKILL, 0)
	c.opts.Logf("kafkatest: cluster %q: broker %d killed", c.opts.Name, i)
	return nil
}

// StopBroker stops broker i with SIGTERM (a controlled shutdown), waiting up
// to a minute before it falls back to SIGKILL.
func (c *Cluster) StopBroker(i int) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	if !c.signalNode(n, syscall.SIGTERM, time.Minute) {
		c.opts.Logf("kafkatest: cluster %q: broker %d ignored SIGTERM for a minute; killing it", c.opts.Name, i)
		c.signalNode(n, syscall.SIGKILL, 0)
	}
	c.opts.Logf("kafkatest: cluster %q: broker %d stopped", c.opts.Name, i)
	return nil
}

// RestartBroker starts stopped or killed broker i again, with its data and
// ports, and waits until every running broker serves and lists it.
func (c *Cluster) RestartBroker(ctx context.Context, i int) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if n.running() {
		c.mu.Unlock()
		return fmt.Errorf("%w: broker %d of cluster %q; stop or kill it first", ErrBrokerRunning, i, c.opts.Name)
	}
	err = c.startNode(n)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	began := time.Now()
	if err := c.waitServing(ctx); err != nil {
		c.opts.Logf("kafkatest: cluster %q: broker %d did not come back: %v\n%s", c.opts.Name, i, err, c.LogTail(40))
		return fmt.Errorf("kafkatest: restart broker %d of cluster %q: %w", i, c.opts.Name, err)
	}
	c.opts.Logf("kafkatest: cluster %q: broker %d restarted, serving after %s", c.opts.Name, i, time.Since(began).Round(10*time.Millisecond))
	return nil
}

// Close kills every JVM, waits for them and removes the cluster's directory
// (kept when KMIRROR_E2E_KEEP=1). It is safe to call more than once.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.killAll()
	for _, p := range c.proxies {
		p.Close()
	}
	c.stopZooKeeper()
	if os.Getenv("KMIRROR_E2E_KEEP") == "1" {
		c.opts.Logf("kafkatest: cluster %q closed; kept %s (KMIRROR_E2E_KEEP=1)", c.opts.Name, c.dir)
		return nil
	}
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("kafkatest: remove %s: %w", c.dir, err)
	}
	return nil
}

// LogTail returns the last n lines of every broker's log, each under a
// header naming the broker and the log file.
func (c *Cluster) LogTail(n int) string {
	var b strings.Builder
	for _, nd := range c.nodes {
		data, err := os.ReadFile(nd.logPath)
		fmt.Fprintf(&b, "---- cluster %q broker %d: last %d lines of %s ----\n", c.opts.Name, nd.id, n, nd.logPath)
		if err != nil {
			fmt.Fprintf(&b, "(unreadable: %v)\n", err)
			continue
		}
		b.WriteString(tail(data, n))
		b.WriteByte('\n')
	}
	return b.String()
}

// Name is the cluster's name from Options.
func (c *Cluster) Name() string { return c.opts.Name }

// Version is the Apache Kafka version the cluster runs, e.g. "4.4.0".
func (c *Cluster) Version() string { return c.dist.Version }

// Dist is the Kafka installation the cluster runs from.
func (c *Cluster) Dist() *Dist { return c.dist }

// LibsDir is the directory of the Kafka jars (for running Kafka's tools).
func (c *Cluster) LibsDir() string { return c.dist.LibsDir }

// Dir is the cluster's temporary directory (configs, logs, data, TLS files).
func (c *Cluster) Dir() string { return c.dir }

// ClusterID is the KRaft cluster id the storage was formatted with (in
// ZooKeeper mode the brokers get theirs from ZooKeeper instead).
func (c *Cluster) ClusterID() string { return c.id }

// Brokers is the number of brokers (running or not).
func (c *Cluster) Brokers() int { return len(c.nodes) }

// BrokerLog is the path of broker i's log (stdout and stderr of its JVM).
func (c *Cluster) BrokerLog(i int) string {
	if i < 0 || i >= len(c.nodes) {
		return ""
	}
	return c.nodes[i].logPath
}

// Proxy returns the fault proxy in front of broker i's Proxied listener, or
// nil when the cluster has none (Options.FaultProxies unset) or no broker i.
func (c *Cluster) Proxy(i int) *faultproxy.Proxy {
	if i < 0 || i >= len(c.proxies) {
		return nil
	}
	return c.proxies[i]
}

// Proxies returns every broker's fault proxy, by broker (nil without
// Options.FaultProxies).
func (c *Cluster) Proxies() []*faultproxy.Proxy { return slices.Clone(c.proxies) }

// Running reports whether broker i's JVM is running.
func (c *Cluster) Running(i int) bool {
	if i < 0 || i >= len(c.nodes) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].running()
}

// sweepStale removes temporary directories of clusters whose test binary
// died without Close (their JVMs died with it: parent-death signal).
func sweepStale(logf func(string, ...any)) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "kafkatest-*-*"))
	for _, d := range dirs {
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), "kafkatest-"), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue // alive (or not ours to judge)
		}
		if err := os.RemoveAll(d); err == nil {
			logf("kafkatest: removed %s left by dead test process %d", d, pid)
		}
	}
}
