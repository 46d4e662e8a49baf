package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// TestMigratedMirrorMaker2ConfigMirrors: a MirrorMaker 2 file for two
// clusters — the source over SASL_SSL with SCRAM-SHA-512 and a PEM
// truststore, topic and group patterns, tuning — goes through `kmirror
// config migrate`, and the configuration it writes mirrors the topics the
// patterns take (and not the excluded one) and syncs the group the groups
// pattern takes. The password never appears in the configuration or the
// daemon's log.
func TestMigratedMirrorMaker2ConfigMirrors(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	base := topicName(t, "")
	orders, tmp, group := base+"-orders", base+"-orders-tmp", base+"-group-billing"
	alice := kafkatest.Identity{Listener: kafkatest.SASLSSL, Mechanism: kafkatest.ScramSHA512, User: "alice", Password: securedUsers["alice"]}
	adm := superAdmin(t, secured)
	createTopic(t, ctx, adm, orders, 2, 1, nil)
	createTopic(t, ctx, adm, tmp, 1, 1, nil)
	producer := newClient(t, secured, alice)
	var recs []*kgo.Record
	for i := 0; i < 300; i++ {
		recs = append(recs, &kgo.Record{Topic: orders, Partition: int32(i % 2), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	recs = append(recs, &kgo.Record{Topic: tmp, Value: []byte("not mirrored")})
	produceSync(t, ctx, producer, recs...)
	commit := kadm.Offsets{}
	commit.AddOffset(orders, 0, 100, -1)
	if _, err := adm.CommitOffsets(ctx, group, commit); err != nil {
		t.Fatalf("committing group %s on the source: %v", group, err)
	}

	// Properties escape backslashes: a regex's \. is written \\.
	props := func(re string) string { return strings.ReplaceAll(re, `\`, `\\`) }
	dir := t.TempDir()
	mm2 := filepath.Join(dir, "mm2.properties")
	if err := os.WriteFile(mm2, []byte(`# MirrorMaker 2, dedicated mode
clusters = dc1, dc2
dc1.bootstrap.servers = `+secured.BootstrapServers(kafkatest.SASLSSL)+`
dc2.bootstrap.servers = `+destination.BootstrapServers(kafkatest.Plaintext)+`

dc1.security.protocol = SASL_SSL
dc1.sasl.mechanism = SCRAM-SHA-512
dc1.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="alice" password="`+securedUsers["alice"]+`";
dc1.ssl.truststore.type = PEM
dc1.ssl.truststore.location = `+secured.CAFile()+`

dc1->dc2.enabled = true
dc1->dc2.topics = `+props(regexp.QuoteMeta(base)+`-orders.*`)+`
dc1->dc2.topics.exclude = .*-tmp
dc1->dc2.groups = `+props(regexp.QuoteMeta(base)+`-group-.*`)+`
sync.group.offsets.enabled = true
sync.group.offsets.interval.seconds = 2
refresh.topics.interval.seconds = 2
tasks.max = 4
replication.factor = 1
replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
dc1.consumer.max.partition.fetch.bytes = 2097152
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "kmirror.yaml")
	cmd := exec.Command(kmirrorBinary(t), "config", "migrate", "--from", mm2, "--out", cfgPath,
		"--secrets-dir", filepath.Join(dir, "secrets"), "--state-dir", filepath.Join(dir, "state"))
	report, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kmirror config migrate: %v (is `config migrate` wired to mm2migrate.Run?)\n%s", err, report)
	}
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cfg), securedUsers["alice"]) || strings.Contains(string(report), securedUsers["alice"]) {
		t.Fatal("the SASL password appears in the configuration or the report")
	}
	for _, want := range []string{"mirror.metadata.refresh.interval.ms: 2000", "replica.fetch.max.bytes: 2097152", "sasl.password.file: "} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("the configuration lacks %q:\n%s", want, cfg)
		}
	}
	// The daemon's endpoints, which MM2 has no equivalent of.
	port := freePort(t)
	if err := os.WriteFile(cfgPath, append(cfg, fmt.Sprintf("http.address: 127.0.0.1:%d\nhttp.status.enable: true\nlog.format: json\n", port)...), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemon{t: t, cfgPath: cfgPath, httpAddr: fmt.Sprintf("127.0.0.1:%d", port), mirror: "dc1-to-dc2", stateDir: filepath.Join(dir, "state")}
	d.start()
	t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("migration report:\n%s\nconfiguration:\n%s\nkmirror log (tail):\n%s", report, cfg, tail(d.log(), 60))
		}
	})

	for {
		ok := true
		for p := int32(0); p < 2; p++ {
			if ps, found := d.partitionStatus(orders, p); !found || ps.State != "MIRRORING" || ps.Lag != 0 || ps.LastMirroredOffset < 0 {
				ok = false
			}
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			st, _ := d.status()
			t.Fatalf("%s not mirrored: %+v", orders, st)
		case <-time.After(250 * time.Millisecond):
		}
	}
	src, dst := newClient(t, secured, alice), newClient(t, destination, kafkatest.Identity{})
	total := 0
	for p := int32(0); p < 2; p++ {
		log, diff, err := verify.Partition(ctx, src, dst, orders, p)
		if err != nil {
			t.Fatal(err)
		}
		if diff != "" {
			t.Fatalf("%s[%d] differs: %s", orders, p, diff)
		}
		total += len(log.Entries)
	}
	if total != 300 {
		t.Fatalf("verified %d records of %s, produced 300", total, orders)
	}
	// Both topics were discovered in the same round: the excluded one is
	// not mirrored.
	if _, found := d.partitionStatus(tmp, 0); found {
		t.Errorf("%s is mirrored although topics.exclude = .*-tmp", tmp)
	}
	waitCommitted(t, ctx, group, orders, 0, 100)
	if strings.Contains(d.log(), securedUsers["alice"]) {
		t.Fatal("the SASL password appears in kmirror's log")
	}
}
