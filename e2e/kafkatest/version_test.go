package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

func TestDistVersionDecidesTheMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		version   string
		zooKeeper bool
	}{
		{"2.8.2", true}, {"2.1.0", true}, {"3.0.0", false}, {"3.6.2", false}, {"4.4.0", false}, {"10.0", false},
	} {
		if got := (&Dist{Version: tc.version}).ZooKeeper(); got != tc.zooKeeper {
			t.Errorf("Apache Kafka %s: ZooKeeper mode %v, want %v", tc.version, got, tc.zooKeeper)
		}
	}
	d := &Dist{Version: "3.9.1"}
	if !d.AtLeast(3, 9) || d.AtLeast(3, 10) || d.AtLeast(4, 0) || !d.AtLeast(2, 8) {
		t.Errorf("AtLeast is wrong for %s", d.Version)
	}
	if _, err := ResolveVersion(t.Context(), "latest"); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("ResolveVersion(latest) = %v, want ErrInvalidOptions", err)
	}
}

// In ZooKeeper mode a node has no controller listener or KRaft keys, a
// broker.id, the ZooKeeper connection and the ZooKeeper-mode authorizer;
// its client and inter-broker listeners are the KRaft node's.
func TestNodeConfigZooKeeperMode(t *testing.T) {
	t.Parallel()
	s := specFor(t, Options{Brokers: 3, SASL: &SASLOptions{Mechanisms: []Mechanism{Plain}}, Authorizer: true,
		BrokerConfig: map[string]string{"zookeeper.session.timeout.ms": "9000"}})
	s.zkConnect = "127.0.0.1:2181"
	cfg := s.nodeConfig(2)
	for _, k := range []string{"process.roles", "node.id", "controller.listener.names", "controller.quorum.voters",
		"sasl.mechanism.controller.protocol", "listener.name.controller.plain.sasl.jaas.config", "share.coordinator.state.topic.replication.factor"} {
		if v, ok := cfg[k]; ok {
			t.Errorf("%s=%q is set in ZooKeeper mode", k, v)
		}
	}
	want := map[string]string{
		"broker.id":                      "2",
		"zookeeper.connect":              "127.0.0.1:2181",
		"zookeeper.session.timeout.ms":   "9000", // BrokerConfig still wins
		"authorizer.class.name":          "kafka.security.authorizer.AclAuthorizer",
		"inter.broker.listener.name":     "INTERNAL",
		"listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
	}
	for k, v := range want {
		if cfg[k] != v {
			t.Errorf("%s=%q, want %q", k, cfg[k], v)
		}
	}
	if l := cfg["listeners"]; strings.Contains(l, "CONTROLLER") || !strings.Contains(l, "INTERNAL://") || !strings.Contains(l, "SASL_PLAINTEXT://") {
		t.Errorf("listeners=%q, want the KRaft node's without CONTROLLER", l)
	}
	if cfg["listener.name.internal.plain.sasl.jaas.config"] == "" {
		t.Error("the INTERNAL listener lost its JAAS config")
	}
}

// SCRAM users are written when KRaft storage is formatted: a ZooKeeper-mode
// cluster refuses them before starting anything.
func TestZooKeeperModeRefusesSCRAMUsers(t *testing.T) {
	t.Parallel()
	_, err := Start(t.Context(), Options{Dist: &Dist{Version: "2.8.2"},
		SASL: &SASLOptions{Mechanisms: []Mechanism{ScramSHA512}, Users: map[string]string{"alice": "pw"}}})
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "ZooKeeper") {
		t.Fatalf("Start = %v, want ErrInvalidOptions naming ZooKeeper mode", err)
	}
}

// A ZooKeeper port taken between picking and binding (another test process)
// makes the server exit; startZooKeeper notices and retries on a new port.
func TestZooKeeperRetriesAfterPortClash(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	pickPorts = func(n int) ([]int, error) {
		calls++
		ps, err := freePorts(n)
		if err == nil && calls == 1 {
			ps[0] = taken.Addr().(*net.TCPAddr).Port
		}
		return ps, err
	}
	defer func() { pickPorts = freePorts }()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	d, err := ResolveVersion(ctx, "2.8.2")
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	c := &Cluster{opts: Options{Name: "zk", StartTimeout: 2 * time.Minute, Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }},
		dist: d, dir: t.TempDir()}
	if err := c.startZooKeeper(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.stopZooKeeper()
	if calls != 2 || len(logs) != 1 || !strings.Contains(logs[0], "retrying with a new port") {
		t.Fatalf("ports picked %d times, logs %q; want one clash, logged, and one retry", calls, logs)
	}
	conn, err := net.Dial("tcp", c.zk.connect())
	if err != nil {
		t.Fatalf("ZooKeeper does not accept connections on %s: %v", c.zk.connect(), err)
	}
	conn.Close()
}
