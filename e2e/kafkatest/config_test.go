package kafkatest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func specFor(t *testing.T, o Options) *clusterSpec {
	t.Helper()
	o, err := o.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	s := &clusterSpec{opts: o, adminPassword: "adminpw", tlsKeystore: "/tls/ks.pem", tlsTruststore: "/tls/ca.pem"}
	port := 10000
	for i := range o.Brokers {
		np := nodePorts{}
		for _, l := range o.allListeners() {
			np[l] = port
			port++
		}
		s.ports = append(s.ports, np)
		s.dataDirs = append(s.dataDirs, "/data/"+string(rune('0'+i)))
	}
	return s
}

func TestOptionsDefaultsAndValidation(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Brokers != 1 || o.Name != "kafka" || o.StartTimeout == 0 || o.Logf == nil {
		t.Fatalf("defaults not applied: %+v", o)
	}
	if got := o.listeners(); len(got) != 1 || got[0] != Plaintext {
		t.Fatalf("default listeners %v, want [PLAINTEXT]", got)
	}
	o, _ = Options{SASL: &SASLOptions{}, TLS: &TLSOptions{}}.withDefaults()
	if got := o.listeners(); strings.Join(strs(got), ",") != "PLAINTEXT,SASL_PLAINTEXT,SSL,SASL_SSL" {
		t.Fatalf("listeners %v", got)
	}
	if len(o.SASL.Mechanisms) != 3 {
		t.Fatalf("default mechanisms %v, want all three", o.SASL.Mechanisms)
	}

	bad := []Options{
		{Brokers: 2},
		{Name: "has space"},
		{SASL: &SASLOptions{Mechanisms: []Mechanism{"GSSAPI"}}},
		{SASL: &SASLOptions{Users: map[string]string{"al,ice": "pw"}}},
		{SASL: &SASLOptions{Users: map[string]string{"alice": `pw"]`}}},
		{SASL: &SASLOptions{Users: map[string]string{adminUser: "pw"}}},
		{TLS: &TLSOptions{ClientCerts: []string{"CN=x"}}},
		{SuperUsers: []string{"User:alice"}}, // without Authorizer
		{Authorizer: true, SuperUsers: []string{"alice"}},
	}
	for _, b := range bad {
		if _, err := b.withDefaults(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("options %+v: got %v, want ErrInvalidOptions", b, err)
		}
	}
}

func strs(ls []Listener) []string {
	var out []string
	for _, l := range ls {
		out = append(out, string(l))
	}
	return out
}

func TestNodeConfigThreeBrokers(t *testing.T) {
	s := specFor(t, Options{Brokers: 3, BrokerConfig: map[string]string{
		"transaction.max.timeout.ms": "60000",
		"num.partitions":             "4", // overrides a harness default
	}})
	cfg := s.nodeConfig(1)
	want := map[string]string{
		"node.id":                                  "1",
		"process.roles":                            "broker,controller",
		"controller.quorum.voters":                 "0@127.0.0.1:10000,1@127.0.0.1:10003,2@127.0.0.1:10006",
		"listeners":                                "CONTROLLER://127.0.0.1:10003,INTERNAL://127.0.0.1:10004,PLAINTEXT://127.0.0.1:10005",
		"advertised.listeners":                     "INTERNAL://127.0.0.1:10004,PLAINTEXT://127.0.0.1:10005",
		"listener.security.protocol.map":           "CONTROLLER:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"inter.broker.listener.name":               "INTERNAL",
		"log.dirs":                                 "/data/1",
		"offsets.topic.replication.factor":         "3",
		"transaction.state.log.replication.factor": "3",
		"transaction.state.log.min.isr":            "2",
		"default.replication.factor":               "3",
		"group.initial.rebalance.delay.ms":         "0",
		"transaction.max.timeout.ms":               "60000",
		"num.partitions":                           "4",
	}
	for k, v := range want {
		if cfg[k] != v {
			t.Errorf("%s = %q, want %q", k, cfg[k], v)
		}
	}
	for _, k := range []string{"authorizer.class.name", "ssl.keystore.location", "listener.name.sasl_plaintext.sasl.enabled.mechanisms"} {
		if _, ok := cfg[k]; ok {
			t.Errorf("%s set on a cluster without that option", k)
		}
	}
	if !strings.Contains(cfg["listener.name.internal.plain.sasl.jaas.config"], `user_kafkatest="adminpw"`) {
		t.Errorf("internal listener does not accept the admin user: %s", cfg["listener.name.internal.plain.sasl.jaas.config"])
	}
}

func TestNodeConfigOneBrokerSecured(t *testing.T) {
	s := specFor(t, Options{
		SASL:       &SASLOptions{Mechanisms: []Mechanism{Plain, ScramSHA512}, Users: map[string]string{"bob": "b-pw", "alice": "a-pw"}},
		TLS:        &TLSOptions{ClientAuth: true},
		Authorizer: true,
		SuperUsers: []string{"User:alice"},
	})
	cfg := s.nodeConfig(0)
	want := map[string]string{
		"offsets.topic.replication.factor":                            "1",
		"transaction.state.log.min.isr":                               "1",
		"super.users":                                                 "User:kafkatest;User:alice",
		"authorizer.class.name":                                       "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms":        "PLAIN,SCRAM-SHA-512",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms":              "PLAIN,SCRAM-SHA-512",
		"listener.name.sasl_ssl.plain.sasl.jaas.config":               `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a-pw" user_bob="b-pw";`,
		"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
		"listener.name.ssl.ssl.client.auth":                           "required",
		"ssl.client.auth":                                             "none",
		"ssl.keystore.type":                                           "PEM",
		"ssl.keystore.location":                                       "/tls/ks.pem",
		"ssl.truststore.location":                                     "/tls/ca.pem",
	}
	for k, v := range want {
		if cfg[k] != v {
			t.Errorf("%s = %q, want %q", k, cfg[k], v)
		}
	}
	if _, ok := cfg["listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config"]; ok {
		t.Error("SCRAM-SHA-256 configured although not enabled")
	}

	args := strings.Join(s.opts.scramArgs(), " ")
	if args != "--add-scram SCRAM-SHA-512=[name=alice,password=a-pw] --add-scram SCRAM-SHA-512=[name=bob,password=b-pw]" {
		t.Errorf("scram args %q", args)
	}
}

func TestWritePropertiesEscapes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.properties")
	if err := writeProperties(p, map[string]string{"a.b": `C:\dir`, "k=y": "v\nw"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{"a.b=C:\\\\dir\n", "k\\=y=v\\nw\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("properties file %q lacks %q", got, want)
		}
	}
	props, err := readProperties(strings.NewReader("# c\nversion=4.4.0\n commitId = abc \n"))
	if err != nil || props["version"] != "4.4.0" || props["commitId"] != "abc" {
		t.Fatalf("readProperties: %v %v", props, err)
	}
}

func TestRedactPasswords(t *testing.T) {
	in := `format --add-scram SCRAM-SHA-256=[name=alice,password=s3cret] jaas password="other" username="u"`
	got := redactPasswords(in)
	if strings.Contains(got, "s3cret") || strings.Contains(got, "other") {
		t.Fatalf("password left in %q", got)
	}
	if !strings.Contains(got, "name=alice") || !strings.Contains(got, `username="u"`) {
		t.Fatalf("redaction removed too much: %q", got)
	}
}

func TestFreePortsAreDistinctAcrossCalls(t *testing.T) {
	seen := map[int]bool{}
	for range 5 {
		ps, err := freePorts(6)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
		}
	}
}

func TestSweepStaleRemovesDirsOfDeadProcesses(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	// pid 2^22+1 is above Linux's pid_max limit, so it is never alive.
	dead := filepath.Join(tmp, "kafkatest-4194305-x-1")
	mine := filepath.Join(tmp, "kafkatest-"+strconv.Itoa(os.Getpid())+"-x-2")
	alive := filepath.Join(tmp, "kafkatest-1-x-3") // pid 1 always exists
	for _, d := range []string{dead, mine, alive} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sweepStale(t.Logf)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("%s of a dead process was kept", dead)
	}
	for _, d := range []string{mine, alive} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s of a live process was removed: %v", d, err)
		}
	}
}

// The Proxied listener binds its own port on every broker and advertises the
// broker's fault proxy, as a PLAINTEXT listener; the harness's listeners are
// unchanged.
func TestNodeConfigProxiedListener(t *testing.T) {
	s := specFor(t, Options{Brokers: 3, FaultProxies: true})
	s.proxyAddrs = []string{"127.0.0.1:30000", "127.0.0.1:30001", "127.0.0.1:30002"}
	for id := range 3 {
		cfg := s.nodeConfig(id)
		for key, want := range map[string]string{
			"listeners":                      "PROXIED://127.0.0.1:" + strconv.Itoa(s.ports[id][Proxied]),
			"advertised.listeners":           "PROXIED://" + s.proxyAddrs[id],
			"listener.security.protocol.map": "PROXIED:PLAINTEXT",
		} {
			if !strings.Contains(cfg[key], want) {
				t.Errorf("broker %d: %s = %q, want it to hold %q", id, key, cfg[key], want)
			}
		}
		if want := "PLAINTEXT://127.0.0.1:" + strconv.Itoa(s.ports[id][Plaintext]); !strings.Contains(cfg["advertised.listeners"], want) {
			t.Errorf("broker %d: advertised.listeners = %q lost %s", id, cfg["advertised.listeners"], want)
		}
	}
}

// Clients of the Proxied listener bootstrap at the fault proxies, those of
// the other listeners at the brokers.
func TestBootstrapOfTheProxiedListenerIsTheProxies(t *testing.T) {
	s := specFor(t, Options{Brokers: 3, FaultProxies: true})
	s.proxyAddrs = []string{"127.0.0.1:30000", "127.0.0.1:30001", "127.0.0.1:30002"}
	c := &Cluster{opts: s.opts, spec: *s}
	if got := c.BootstrapServers(Proxied); got != strings.Join(s.proxyAddrs, ",") {
		t.Errorf("Bootstrap(PROXIED) = %s, want the proxies %v", got, s.proxyAddrs)
	}
	if got, want := c.Bootstrap(Plaintext)[1], addr(s.ports[1][Plaintext]); got != want {
		t.Errorf("Bootstrap(PLAINTEXT)[1] = %s, want the broker's %s", got, want)
	}
	if c.Proxy(0) != nil || c.Proxies() != nil {
		t.Error("a cluster that started no proxy returned one")
	}
	plain := &Cluster{spec: *specFor(t, Options{})}
	if got := plain.Bootstrap(Proxied); got != nil {
		t.Errorf("Bootstrap(PROXIED) without FaultProxies = %v, want nil", got)
	}
}

// GSSAPI renders a Krb5LoginModule line for the SASL listener and the
// service name; the JVM gets the krb5.conf.
func TestGSSAPIListenerConfig(t *testing.T) {
	k := &KerberosOptions{Krb5Conf: "/k/krb5.conf", Keytab: "/k/kafka.keytab", Principal: "kafka/127.0.0.1@KMIRROR.TEST"}
	s := specFor(t, Options{SASL: &SASLOptions{Mechanisms: []Mechanism{GSSAPI, Plain}, Kerberos: k, Users: map[string]string{"alice": "pw"}}})
	cfg := s.nodeConfig(0)
	if got := cfg["listener.name.sasl_plaintext.sasl.enabled.mechanisms"]; got != "GSSAPI,PLAIN" {
		t.Errorf("mechanisms %q", got)
	}
	want := `com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="/k/kafka.keytab" principal="kafka/127.0.0.1@KMIRROR.TEST";`
	if got := cfg["listener.name.sasl_plaintext.gssapi.sasl.jaas.config"]; got != want {
		t.Errorf("JAAS %q; want %q", got, want)
	}
	if got := cfg["sasl.kerberos.service.name"]; got != "kafka" {
		t.Errorf("service name %q", got)
	}
	c := &Cluster{opts: s.opts, dist: &Dist{LibsDir: "/libs"}}
	if args := strings.Join(c.jvmArgs(&node{config: "/n.properties"}), " "); !strings.Contains(args, "-Djava.security.krb5.conf=/k/krb5.conf") {
		t.Errorf("JVM args %s lack the krb5.conf", args)
	}
}

// NodeConfig changes only the node it names, after BrokerConfig.
func TestNodeConfigOverridesOneNode(t *testing.T) {
	s := specFor(t, Options{Brokers: 3,
		BrokerConfig: map[string]string{"num.partitions": "4"},
		NodeConfig:   map[int]map[string]string{2: {"log.dirs": "/tiny", "metadata.log.dir": "/meta/2", "num.partitions": "2"}},
	})
	for id, want := range []map[string]string{
		{"log.dirs": "/data/0", "num.partitions": "4"},
		{"log.dirs": "/data/1", "num.partitions": "4"},
		{"log.dirs": "/tiny", "metadata.log.dir": "/meta/2", "num.partitions": "2"},
	} {
		cfg := s.nodeConfig(id)
		for k, v := range want {
			if cfg[k] != v {
				t.Errorf("node %d: %s = %q, want %q", id, k, cfg[k], v)
			}
		}
		if _, ok := cfg["metadata.log.dir"]; ok != (id == 2) {
			t.Errorf("node %d: metadata.log.dir set: %v", id, ok)
		}
	}
}

// A new start attempt (after a port clash) empties the log directories
// NodeConfig names and keeps them (they may be mount points), and removes
// the harness's own data directories.
func TestResetNodesEmptiesNodeConfigLogDirs(t *testing.T) {
	root := t.TempDir()
	own, tiny, meta := filepath.Join(root, "data"), filepath.Join(root, "tiny"), filepath.Join(root, "meta")
	for _, d := range []string{own, tiny, meta} {
		if err := os.MkdirAll(filepath.Join(d, "topic-0"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "meta.properties"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := &Cluster{opts: Options{NodeConfig: map[int]map[string]string{0: {"log.dirs": tiny, "metadata.log.dir": meta}}}}
	c.spec.dataDirs = []string{own}
	if err := c.resetNodes(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(own); !os.IsNotExist(err) {
		t.Errorf("the harness's data directory is still there (%v)", err)
	}
	for _, d := range []string{tiny, meta} {
		entries, err := os.ReadDir(d)
		if err != nil || len(entries) > 0 {
			t.Errorf("%s: %d entries left (%v); want it empty and kept", d, len(entries), err)
		}
	}
}
