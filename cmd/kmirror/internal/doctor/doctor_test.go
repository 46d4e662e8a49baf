package doctor

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/internal/testpki"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// secured starts a kfake cluster with SASL/PLAIN and ACLs: admin is a
// super user, users are subject to their ACLs.
func secured(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	return kfaketest.NewCluster(t, append([]kfake.Opt{kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("PLAIN", "admin", "admin-pw")}, opts...)...)
}

// allow is an ACL allowing op on a resource, for kfake.User.
func allow(rt kmsg.ACLResourceType, name string, ops ...kmsg.ACLOperation) []kfake.ACL {
	var out []kfake.ACL
	for _, op := range ops {
		out = append(out, kfake.ACL{Resource: rt, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true})
	}
	return out
}

// cluster is the YAML of one cluster's connection keys.
type cluster struct {
	addr      string
	user, pw  string // SASL/PLAIN when user is set
	tlsCA     string // a PEM truststore: SSL (or SASL_SSL)
	noHostChk bool
}

func (c cluster) yaml(t *testing.T, indent string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%sbootstrap.servers: %s\n", indent, c.addr)
	proto := "PLAINTEXT"
	switch {
	case c.user != "" && c.tlsCA != "":
		proto = "SASL_SSL"
	case c.user != "":
		proto = "SASL_PLAINTEXT"
	case c.tlsCA != "":
		proto = "SSL"
	}
	fmt.Fprintf(&b, "%ssecurity.protocol: %s\n", indent, proto)
	if c.user != "" {
		pw := filepath.Join(t.TempDir(), "pw")
		if err := os.WriteFile(pw, []byte(c.pw), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%ssasl.mechanism: PLAIN\n%ssasl.username: %s\n%ssasl.password.file: %s\n", indent, indent, c.user, indent, pw)
	}
	if c.tlsCA != "" {
		fmt.Fprintf(&b, "%sssl.truststore.location: %s\n", indent, c.tlsCA)
	}
	if c.noHostChk {
		fmt.Fprintf(&b, "%sssl.endpoint.identification.algorithm: \"\"\n", indent)
	}
	return b.String()
}

// load makes the configuration of destination dst and one mirror dc1
// from src, of topics orders.* and groups billing.*.
func load(t *testing.T, dst, src cluster) *config.Config {
	t.Helper()
	yaml := "destination:\n" + dst.yaml(t, "  ") + "state:\n  dir: " + t.TempDir() + "\nmirrors:\n  - name: dc1\n" + src.yaml(t, "    ") +
		"    mirror.topics.include: \"orders.*\"\n    mirror.groups.include: \"billing.*\"\n"
	path := filepath.Join(t.TempDir(), "kmirror.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Source{Path: path})
	if err != nil {
		t.Fatalf("the test's configuration: %v\n%s", err, yaml)
	}
	return cfg
}

func run(t *testing.T, cfg *config.Config, opts Options) Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if opts.StepTimeout == 0 {
		opts.StepTimeout = 5 * time.Second
	}
	return Run(ctx, cfg, opts)
}

// check returns the result of step on cluster i.
func check(t *testing.T, rep Report, i int, step string) Check {
	t.Helper()
	for _, c := range rep.Clusters[i].Checks {
		if c.Step == step {
			return c
		}
	}
	t.Fatalf("%s has no %s check:\n%s", rep.Clusters[i].Name, step, text(rep))
	return Check{}
}

func text(rep Report) string {
	var b bytes.Buffer
	rep.Text(&b)
	return b.String()
}

// wantFail asserts that step of cluster i failed, naming detail, with a
// fix naming fix.
func wantFail(t *testing.T, rep Report, i int, step, detail, fix string) {
	t.Helper()
	c := check(t, rep, i, step)
	if c.Result != Fail || !strings.Contains(c.Detail, detail) || !strings.Contains(c.Fix, fix) {
		t.Fatalf("%s %s: %+v; want a failure naming %q, fixed by %q\n%s", rep.Clusters[i].Name, step, c, detail, fix, text(rep))
	}
	if rep.Failed == 0 {
		t.Fatalf("a failed check is not counted:\n%s", text(rep))
	}
}

// TestGoodClustersPassEveryStep: a super user on both sides, a topic and
// a group in the mirror's scope: every applicable check passes.
func TestGoodClustersPassEveryStep(t *testing.T) {
	t.Parallel()
	dst := secured(t)
	src := secured(t, kfake.SeedTopics(2, "orders", "audit"))
	cfg := load(t, cluster{addr: dst.ListenAddrs()[0], user: "admin", pw: "admin-pw"}, cluster{addr: src.ListenAddrs()[0], user: "admin", pw: "admin-pw"})
	rep := run(t, cfg, Options{})
	if rep.Failed != 0 || rep.Warned != 0 {
		t.Fatalf("failed %d, warned %d:\n%s", rep.Failed, rep.Warned, text(rep))
	}
	for i, step := range []string{StepDNS, StepTCP, StepSASL, StepAPIVersions, StepACLs, StepSuperUser, StepIdempotence, StepTransactions} {
		_ = i
		if c := check(t, rep, 0, step); c.Result != Pass {
			t.Errorf("destination %s: %+v", step, c)
		}
	}
	for _, step := range []string{StepSASL, StepAPIVersions, StepACLs, StepMaxMessageBytes} {
		if c := check(t, rep, 1, step); c.Result != Pass {
			t.Errorf("source %s: %+v", step, c)
		}
	}
	if c := check(t, rep, 1, StepACLs); !strings.Contains(c.Detail, "the 1 topic(s)") {
		t.Errorf("the ACL check did not look at the mirror's one topic: %+v", c)
	}
	b, _ := json.Marshal(rep)
	if strings.Contains(string(b), "admin-pw") || strings.Contains(text(rep), "admin-pw") {
		t.Fatalf("the password appears in the report:\n%s", b)
	}
}

// TestWrongPasswordFailsAtSASL: SASL ✗ with the keys to fix; the steps
// that need a connection are skipped.
func TestWrongPasswordFailsAtSASL(t *testing.T) {
	t.Parallel()
	dst := secured(t)
	src := secured(t)
	cfg := load(t, cluster{addr: dst.ListenAddrs()[0], user: "admin", pw: "wrong-pw"}, cluster{addr: src.ListenAddrs()[0], user: "admin", pw: "admin-pw"})
	rep := run(t, cfg, Options{})
	wantFail(t, rep, 0, StepSASL, "PLAIN authentication as User:admin failed", "check destination.sasl.username and its password (destination.sasl.password.file or destination.sasl.jaas.config); the brokers' JAAS configuration")
	if strings.Contains(text(rep), "wrong-pw") {
		t.Fatalf("the password appears in the report:\n%s", text(rep))
	}
	if c := check(t, rep, 1, StepMaxMessageBytes); c.Result != Skip {
		t.Errorf("max-message-bytes without the destination: %+v", c)
	}
	golden(t, "wrong-password", text(rep))
}

// TestUnreachableFailsAtDNSOrTCP: a host that does not resolve fails DNS,
// a closed port fails TCP; both name the address and the key.
func TestUnreachableFailsAtDNSOrTCP(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	cfg := load(t, cluster{addr: closed}, cluster{addr: "no-such-host.invalid:9092"})
	rep := run(t, cfg, Options{})
	wantFail(t, rep, 0, StepTCP, "cannot connect to "+closed+": connect: connection refused", "fix or remove the address in destination.bootstrap.servers")
	wantFail(t, rep, 1, StepDNS, "no-such-host.invalid does not resolve", "mirrors.dc1.bootstrap.servers")
	golden(t, "unreachable", text(rep))
}

// TestMissingACLsAndNotASuperUser: a destination user without super user
// status fails super-user (and the cluster ACLs it lacks); a source user
// that may describe but not read the topic fails acls.
func TestMissingACLsAndNotASuperUser(t *testing.T) {
	t.Parallel()
	dstACLs := allow(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationCreate, kmsg.ACLOperationAlter, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs, kmsg.ACLOperationIdempotentWrite)
	dst := secured(t, kfake.User("PLAIN", "mirror", "mirror-pw", dstACLs...))
	srcACLs := append(allow(kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLOperationDescribe), allow(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs)...)
	src := secured(t, kfake.SeedTopics(1, "orders"), kfake.User("PLAIN", "reader", "reader-pw", srcACLs...))
	cfg := load(t, cluster{addr: dst.ListenAddrs()[0], user: "mirror", pw: "mirror-pw"}, cluster{addr: src.ListenAddrs()[0], user: "reader", pw: "reader-pw"})
	rep := run(t, cfg, Options{})
	if c := check(t, rep, 0, StepACLs); c.Result != Pass {
		t.Errorf("destination ACLs granted: %+v\n%s", c, text(rep))
	}
	wantFail(t, rep, 0, StepSuperUser, "User:mirror is not a super user of the destination", "add User:mirror to super.users")
	wantFail(t, rep, 1, StepACLs, "User:reader lacks READ, DESCRIBE_CONFIGS on topic orders", "--allow-principal User:reader --operation Describe --operation Read")
	if c := check(t, rep, 1, StepSASL); c.Result != Pass {
		t.Errorf("source SASL: %+v", c)
	}
}

// TestSmallerMessageMaxOnTheDestinationFails: the destination must take
// the largest batch the source takes.
func TestSmallerMessageMaxOnTheDestinationFails(t *testing.T) {
	t.Parallel()
	dst := kfaketest.NewCluster(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "1000000"}))
	src := kfaketest.NewCluster(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "5000000"}))
	cfg := load(t, cluster{addr: dst.ListenAddrs()[0]}, cluster{addr: src.ListenAddrs()[0]})
	rep := run(t, cfg, Options{})
	wantFail(t, rep, 1, StepMaxMessageBytes, "the destination's message.max.bytes 1000000 is smaller than the source's 5000000", "set message.max.bytes=5000000")
	if c := check(t, rep, 0, StepSuperUser); c.Result != Pass {
		t.Errorf("a destination without ACLs: %+v", c)
	}
}

// tlsCluster starts a kfake cluster whose listener serves cert.
func tlsCluster(t *testing.T, cert *testpki.Cert) *kfake.Cluster {
	t.Helper()
	return kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert.TLS}, MinVersion: tls.VersionTLS12}))
}

// TestTLSChecksChainHostnameAndExpiry: a trusted certificate naming the
// host passes (with a warning: the test certificates live a day); an
// untrusted CA fails the chain; a certificate for another name fails the
// host name (and passes with the check off); a certificate past its end
// fails the expiry.
func TestTLSChecksChainHostnameAndExpiry(t *testing.T) {
	t.Parallel()
	pki := testpki.New(t, "doctor-ca")
	other := testpki.New(t, "other-ca")
	good := tlsCluster(t, pki.Server)
	misnamed := tlsCluster(t, pki.IssueServer(t, "elsewhere", "kafka.example.com"))

	rep := run(t, load(t, cluster{addr: good.ListenAddrs()[0], tlsCA: pki.CAFile}, cluster{addr: good.ListenAddrs()[0], tlsCA: other.CAFile}), Options{})
	for _, step := range []string{StepTLSChain, StepTLSHostname, StepSASL, StepAPIVersions} {
		if c := check(t, rep, 0, step); c.Result != Pass && !(step == StepSASL && c.Result == Skip) {
			t.Errorf("trusted TLS %s: %+v\n%s", step, c, text(rep))
		}
	}
	if c := check(t, rep, 0, StepTLSExpiry); c.Result != Warn || !strings.Contains(c.Detail, "expires in 0 day(s)") || c.Fix == "" {
		t.Errorf("a certificate expiring tomorrow: %+v", c)
	}
	wantFail(t, rep, 1, StepTLSChain, "is signed by CN=doctor-ca, which mirrors.dc1.ssl.truststore.location does not trust", "set mirrors.dc1.ssl.truststore.location to a PEM file of the CA")

	rep = run(t, load(t, cluster{addr: misnamed.ListenAddrs()[0], tlsCA: pki.CAFile}, cluster{addr: misnamed.ListenAddrs()[0], tlsCA: pki.CAFile, noHostChk: true}), Options{})
	wantFail(t, rep, 0, StepTLSHostname, "does not name 127.0.0.1 (it names kafka.example.com)", "have the certificate reissued with 127.0.0.1")
	if c := check(t, rep, 1, StepTLSHostname); c.Result != Skip {
		t.Errorf("host name check off: %+v", c)
	}
	if c := check(t, rep, 1, StepAPIVersions); c.Result != Pass {
		t.Errorf("with the host name check off the client connects: %+v\n%s", c, text(rep))
	}

	later := func() time.Time { return time.Now().Add(72 * time.Hour) }
	rep = run(t, load(t, cluster{addr: good.ListenAddrs()[0], tlsCA: pki.CAFile}, cluster{addr: good.ListenAddrs()[0], tlsCA: pki.CAFile}), Options{Now: later})
	wantFail(t, rep, 0, StepTLSExpiry, "expired on", "renew the brokers' certificate")
}

// golden compares got with testdata/<name>.golden (-update rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = regexp.MustCompile(`\d{4}-\d\d-\d\d`).ReplaceAllString(got, "DATE")
	got = regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(got, "127.0.0.1:PORT")
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/kmirror/internal/doctor -args -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (-update if meant):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestMissingRequestFailsAPIVersions: a broker without a request kmirror
// sends (here InitProducerId) fails api-versions, naming it.
func TestMissingRequestFailsAPIVersions(t *testing.T) {
	t.Parallel()
	vs := kversion.V3_7_0()
	vs.SetMaxKeyVersion(kmsg.InitProducerID.Int16(), -1)
	dst := kfaketest.NewCluster(t, kfake.NumBrokers(1), kfake.MaxVersions(vs))
	src := kfaketest.NewCluster(t)
	rep := run(t, load(t, cluster{addr: dst.ListenAddrs()[0]}, cluster{addr: src.ListenAddrs()[0]}), Options{})
	wantFail(t, rep, 0, StepAPIVersions, "broker 0 lacks InitProducerID", "kmirror needs Kafka 2.8 or later")
	if c := check(t, rep, 1, StepAPIVersions); c.Result != Pass {
		t.Errorf("source api-versions: %+v", c)
	}
}

// TestNoTransactionalIDACLFailsTransactions: a destination user allowed
// idempotent writes but no transactional id passes idempotence and fails
// transactions, with the ACL to add.
func TestNoTransactionalIDACLFailsTransactions(t *testing.T) {
	t.Parallel()
	dstACLs := allow(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationDescribe, kmsg.ACLOperationIdempotentWrite)
	dst := secured(t, kfake.User("PLAIN", "mirror", "mirror-pw", dstACLs...))
	src := secured(t)
	rep := run(t, load(t, cluster{addr: dst.ListenAddrs()[0], user: "mirror", pw: "mirror-pw"}, cluster{addr: src.ListenAddrs()[0], user: "admin", pw: "admin-pw"}), Options{})
	if c := check(t, rep, 0, StepIdempotence); c.Result != Pass {
		t.Errorf("idempotence with IDEMPOTENT_WRITE: %+v\n%s", c, text(rep))
	}
	wantFail(t, rep, 0, StepTransactions, "InitProducerId for a transactional producer (kmirror-doctor)", "--transactional-id kmirror- --resource-pattern-type prefixed")
	wantFail(t, rep, 0, StepACLs, "User:mirror lacks CREATE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS on the cluster", "kafka-acls.sh --add --allow-principal User:mirror --cluster")
}
