package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/internal/etcdtest"
	"github.com/kmirror/kmirror/internal/plugintutorial"
	"github.com/kmirror/kmirror/internal/pyfilter"
)

// The acceptance tests of the plugins (docs/plugins.md): credentials from
// auth plugins on a real SASL listener, a plugin killed while mirroring,
// filter plugins in Python and from the tutorial deciding which groups sync.

// aliceOnSASL is the secured cluster's super user on SASL_PLAINTEXT.
var aliceOnSASL = kafkatest.Identity{Listener: kafkatest.SASLPlaintext, Mechanism: kafkatest.ScramSHA512, User: "alice", Password: securedUsers["alice"]}

// produceRound writes n records keyed round/i to topic on the secured
// cluster.
func produceRound(t *testing.T, ctx context.Context, topic string, round, n int) {
	t.Helper()
	cl := newClient(t, secured, aliceOnSASL, kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "r%d-k%d", round, i), Value: fmt.Appendf(nil, "v%d", i),
			Headers: []kgo.RecordHeader{{Key: "round", Value: []byte(strconv.Itoa(round))}}})
	}
	produceSync(t, ctx, cl, recs...)
	cl.Close()
}

// verifySecured compares topic/0 of the secured cluster with the
// destination record by record and returns how many records it holds.
func verifySecured(t *testing.T, ctx context.Context, topic string) int {
	t.Helper()
	log, diff, err := verify.Partition(ctx, newClient(t, secured, aliceOnSASL), newClient(t, destination, kafkatest.Identity{}), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Fatalf("%s[0] differs between source and destination: %s", topic, diff)
	}
	return len(log.Entries)
}

// A SASL_SSL + SCRAM-SHA-512 source whose password comes from a file,
// served by the built-in static auth plugin out of process: the broker's sessions re-authenticate
// every few seconds, so a rotated password works only if the plugin reads
// the changed file; a wrong one fails the partition with an authentication
// reason, and once the file is fixed every record arrives.
func TestCredentialsFromAPasswordFileFollowTheFile(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	topic := topicName(t, "")
	adm := superAdmin(t, secured)
	createTopic(t, ctx, adm, topic, 1, 1, nil)
	setPassword := func(pw string) {
		t.Helper()
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: rotatingUser, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: pw}})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("setting %s's password on the broker: %v", rotatingUser, err)
		}
	}
	pwFile := filepath.Join(t.TempDir(), "password")
	writePW := func(pw string) {
		t.Helper()
		if err := os.WriteFile(pwFile+".new", []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(pwFile+".new", pwFile); err != nil {
			t.Fatal(err)
		}
	}
	setPassword("first-secret")
	writePW("first-secret")
	produceRound(t, ctx, topic, 1, 100)

	d := startKmirror(t, topic,
		"bootstrap.servers: "+secured.BootstrapServers(kafkatest.SASLSSL),
		"security.protocol: SASL_SSL",
		"ssl.truststore.location: "+secured.CAFile(),
		"sasl.mechanism: SCRAM-SHA-512",
		"sasl.username: "+rotatingUser,
		"sasl.password.file: "+pwFile,
	)
	d.waitMirroredFrom(ctx, secured, topic, 1)

	// Rotated on the broker and in the file. Existing sessions must log in
	// again within reauth; they can only with the file's new content.
	setPassword("second-secret")
	writePW("second-secret")
	rotated := time.Now()
	produceRound(t, ctx, topic, 2, 100)
	d.waitMirroredFrom(ctx, secured, topic, 1)
	// A session that began before the rotation has logged in again by now
	// (the broker ends it after reauth): the scenario waits that long.
	time.Sleep(time.Until(rotated.Add(2 * reauth)))
	produceRound(t, ctx, topic, 3, 100)
	d.waitMirroredFrom(ctx, secured, topic, 1)
	if ps, _ := d.partitionStatus(topic, 0); ps.State != "MIRRORING" {
		t.Fatalf("after the rotation the partition is %s (%s), want MIRRORING", ps.State, ps.LastError)
	}

	// A wrong password: the next login fails, and the partition says so.
	writePW("wrong-secret")
	produceRound(t, ctx, topic, 4, 50)
	ps := d.waitState(ctx, topic, 0, "FAILED")
	if reason := strings.ToLower(ps.LastError); !strings.Contains(reason, "sasl") && !strings.Contains(reason, "authentic") {
		t.Fatalf("FAILED with reason %q, want an authentication reason", ps.LastError)
	}

	// Fixed: the partition comes back and nothing is lost.
	writePW("second-secret")
	d.waitMirroredFrom(ctx, secured, topic, 1)
	if n := verifySecured(t, ctx, topic); n != 350 {
		t.Fatalf("verified %d records, produced 350", n)
	}
	for _, secret := range []string{"first-secret", "second-secret", "wrong-secret"} {
		if strings.Contains(d.log(), secret) {
			t.Fatalf("the password %q appears in kmirror's log", secret)
		}
	}
}

// An OAUTHBEARER source on real Kafka: the broker validates JWTs against
// the test's JWKS, tokens live a few seconds, and sessions re-authenticate
// every few seconds. The built-in oauth plugin gets new tokens across
// several expiries while the mirror runs, and every record arrives.
func TestMirrorFromAnOAuthBearerSource(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, secured), topic, 1, 1, nil)
	const ttl = 8 * time.Second
	idp.SetTTL(ttl)
	before := len(idp.Issued())

	d := startKmirror(t, topic,
		"bootstrap.servers: "+secured.BootstrapServers(kafkatest.SASLPlaintext),
		"security.protocol: SASL_PLAINTEXT",
		"sasl.mechanism: OAUTHBEARER",
		"sasl.oauthbearer.token.endpoint.url: "+idp.TokenURL(),
		"sasl.oauthbearer.client.id: "+oauthClient,
		"sasl.oauthbearer.client.secret: "+oauthSecret,
	)
	began := time.Now()
	round := 0
	// Rounds of records until three token lifetimes have passed since the
	// mirror started, each waited for on the destination.
	for time.Since(began) < 3*ttl {
		round++
		produceRound(t, ctx, topic, round, 50)
		d.waitMirroredFrom(ctx, secured, topic, 1)
		time.Sleep(reauth / 2)
	}
	round++
	produceRound(t, ctx, topic, round, 50)
	d.waitMirroredFrom(ctx, secured, topic, 1)

	tokens := idp.Issued()[before:]
	if len(tokens) < 3 {
		t.Fatalf("%d tokens issued while mirroring for %s, want at least 3 (refreshed across expiries)", len(tokens), time.Since(began))
	}
	if first := tokens[0]; !first.Expires.Before(time.Now().Add(-reauth)) {
		t.Fatalf("the first token expires at %s: the mirror did not outlive it", first.Expires)
	}
	for _, tok := range tokens {
		if tok.ClientID != oauthClient {
			t.Fatalf("token issued to %q", tok.ClientID)
		}
	}
	if n := verifySecured(t, ctx, topic); n != 50*round {
		t.Fatalf("verified %d records, produced %d", n, 50*round)
	}
	if strings.Contains(d.log(), oauthSecret) {
		t.Fatal("the client secret appears in kmirror's log")
	}
}

// pluginChildren returns the pids of the daemon's child processes whose
// command line contains every word of match.
func pluginChildren(t *testing.T, d *daemon, match ...string) []int {
	t.Helper()
	d.mu.Lock()
	parent := d.cmd.Process.Pid
	d.mu.Unlock()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: the command may hold spaces.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(parent) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.ReplaceAll(string(cmdline), "\x00", " ")
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(args, m)
		}
		if ok {
			pids = append(pids, pid)
		}
	}
	return pids
}

// The state store runs as a plugin (the built-in file store, out of
// process). Killed with SIGKILL while records flow, it is restarted by the
// host; the partitions that failed a state write meanwhile retry, and the
// destination ends identical to the source.
func TestAKilledStateStorePluginIsRestartedAndNothingIsLost(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 2, 3, nil)
	prod := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	round := func(r int) {
		var recs []*kgo.Record
		for i := range 200 {
			recs = append(recs, &kgo.Record{Partition: int32(i % 2), Key: fmt.Appendf(nil, "r%d-%d", r, i), Value: fmt.Appendf(nil, "v%d", i)})
		}
		produceSync(t, ctx, prod, recs...)
	}
	round(1)
	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 2)

	pids := pluginChildren(t, d, "plugin", "serve", "statestore", "file")
	if len(pids) != 1 {
		t.Fatalf("the daemon runs %d state store plugin processes (%v), want 1", len(pids), pids)
	}
	done := make(chan struct{})
	go func() { // owned by the test: ends when the rounds are written.
		defer close(done)
		for r := 2; r <= 4; r++ {
			round(r)
		}
	}()
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	d.waitMirrored(ctx, topic, 2)
	for {
		now := pluginChildren(t, d, "plugin", "serve", "statestore", "file")
		if len(now) == 1 && now[0] != pids[0] && strings.Contains(d.log(), "plugin restarted") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the state store plugin was not restarted (processes %v, first %d); log:\n%s", now, pids[0], tail(d.log(), 40))
		case <-time.After(100 * time.Millisecond):
		}
	}
	logs := verifyTopic(t, ctx, topic, 2)
	if n := len(logs[0].Entries) + len(logs[1].Entries); n != 800 {
		t.Fatalf("verified %d records, produced 800", n)
	}
}

// Two filter plugins decide which groups a mirror syncs, after the
// include/exclude keys: the Python plugin (python-groups: groups starting
// with billing-, search- or ops-) and then the tutorial's plugin (groups
// starting with billing- or search-). Only groups both keep are synced.
func TestFilterPluginsDecideWhichGroupsSync(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	py, err := pyfilter.Launcher()
	if err != nil {
		t.Fatal(err)
	}
	teams, teamsSum := plugintutorial.Plugin(t)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")})
	}
	produceSync(t, ctx, newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic)), recs...)
	suffix := strings.ToLower(strings.TrimPrefix(topic, "t-"))
	groups := map[string]bool{ // group → synced
		"billing-" + suffix: true,
		"search-" + suffix:  true,
		"ops-" + suffix:     false, // kept by Python, dropped by the tutorial's filter
		"other-" + suffix:   false, // dropped by Python
	}
	// Each group commits a different offset: 5, 6, ... in name order.
	names := slices.Sorted(maps.Keys(groups))
	offsets := map[string]int64{}
	for i, g := range names {
		offsets[g] = int64(5 + i)
		consumeAndCommit(t, ctx, g, topic, 5+i)
	}
	plugins := fmt.Sprintf(`plugins:
  py:
    kind: filter
    path: %s
    sha256: %q
    config:
      prefixes: [billing-, search-, ops-]
  teams:
    kind: filter
    path: %s
    sha256: %q
    config:
      group_prefixes: [billing-, search-]`, py.Path, py.SHA256, teams, teamsSum)
	d := startKmirrorWith(t, topic, []string{plugins}, "mirror.filter.plugins: py,teams")
	d.waitMirrored(ctx, topic, 1)
	for g, synced := range groups {
		if synced {
			waitCommitted(t, ctx, g, topic, 0, offsets[g])
		}
	}
	// The round that synced those decided the others too; wait for one
	// more round to end, so that a late sync would show.
	var billing string
	for g := range groups {
		if strings.HasPrefix(g, "billing-") {
			billing = g
		}
	}
	_, _, synced, _ := d.groupStatus(billing)
	for {
		if _, _, at, ok := d.groupStatus(billing); ok && at.After(synced) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no further group sync round")
		case <-time.After(250 * time.Millisecond):
		}
	}
	dstAdm := superAdmin(t, destination)
	for g, synced := range groups {
		if !synced {
			if got := committedOffset(t, ctx, dstAdm, g, topic, 0); got != -1 {
				t.Errorf("group %s, which a filter plugin drops, has offset %d on the destination", g, got)
			}
		}
	}
	for _, name := range []string{"plugin.filter.py", "plugin.filter.teams"} {
		if !strings.Contains(d.log(), name) {
			t.Errorf("no log line of %s", name)
		}
	}
}

// The data-path check with the etcd state store (a real etcd server, the
// built-in etcd plugin out of process): the daemon is killed with SIGKILL
// five times while plain records and transactions stream in, and restarted
// each time; the destination ends identical, markers included.
func TestDaemonKilledRepeatedlyWithTheEtcdStore(t *testing.T) {
	etcd := etcdtest.StartT(t, etcdtest.Options{})
	state := fmt.Sprintf(`state:
  type: plugin
  plugin: etcdstore
  dir: %%STATE_DIR%%
plugins:
  etcdstore:
    kind: statestore
    builtin: etcd
    config:
      endpoints: [%s]
      prefix: %s`, etcd.Endpoint, etcd.Prefix(t))
	d := killRepeatedly(t, []string{state})
	if !strings.Contains(d.log(), "plugin.statestore.etcdstore") {
		t.Fatal("the daemon did not run the etcd store plugin")
	}
}

// The data-path check with the Kafka-topic state store (the built-in kafka
// plugin out of process, its compacted topic on the destination cluster,
// one of this test's own): the daemon is killed with SIGKILL five times
// while plain records and transactions stream in, and restarted each time;
// the destination ends identical, markers included, and the store's topic
// holds the partitions' records.
func TestDaemonKilledRepeatedlyWithTheKafkaStore(t *testing.T) {
	stateTopic := topicName(t, "") + "-state"
	state := fmt.Sprintf(`state:
  type: plugin
  plugin: kafkastore
  dir: %%STATE_DIR%%
plugins:
  kafkastore:
    kind: statestore
    builtin: kafka
    config:
      bootstrap.servers: [%s]
      topic: %s
      mirror.topic.num.partitions: 3
      mirror.topic.replication.factor: 1`, destination.BootstrapServers(kafkatest.Plaintext), stateTopic)
	d := killRepeatedly(t, []string{state})
	if !strings.Contains(d.log(), "plugin.statestore.kafkastore") {
		t.Fatal("the daemon did not run the Kafka store plugin")
	}
	ctx := testContext(t, time.Minute)
	ends := endOffsets(t, ctx, destination, stateTopic, 3)
	var n int64
	for _, e := range ends {
		n += e
	}
	if n == 0 {
		t.Fatalf("the store's topic %s is empty: the daemon did not keep its state there", stateTopic)
	}
}
