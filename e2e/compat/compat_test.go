package compat

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

const partitions = 3

// TestMirrorFromEachSourceVersion runs the data-path scenario from a source
// of each listed Kafka version (one at a time: a broker is slow to start on
// a loaded machine): plain records with keys, headers and timestamps,
// transactions committed and aborted across partitions before kmirror starts
// and while it runs, and a classic consumer group that commits. Each
// partition must end identical on both clusters (offsets, keys, values,
// headers, timestamps, markers, transactional visibility), the group's
// offsets must be synced, no partition may fail, and what the source lacks
// must be said in kmirror's log rather than break it.
func TestMirrorFromEachSourceVersion(t *testing.T) {
	for _, v := range versions() {
		t.Run("kafka-"+v, func(t *testing.T) { mirrorFromVersion(t, v) })
	}
}

func mirrorFromVersion(t *testing.T, version string) {
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	dist, err := kafkatest.ResolveVersion(ctx, version)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	source, err := kafkatest.Start(ctx, kafkatest.Options{
		Name: "source-" + strings.ReplaceAll(version, ".", "-"),
		Dist: dist,
		// Older brokers are no faster to start on a loaded machine.
		StartTimeout: 4 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = source.Close() })
	mode := "KRaft"
	if dist.ZooKeeper() {
		mode = "ZooKeeper"
	}
	t.Logf("source: Apache Kafka %s (%s mode), serving after %s", source.Version(), mode, time.Since(began).Round(time.Second))
	// The broker logs through the harness's configuration (log4j 1 before
	// Kafka 4, log4j2 after), as AppInfoParser's line shows.
	if blog, err := os.ReadFile(source.BrokerLog(0)); err != nil || !strings.Contains(string(blog), "Kafka version: "+version) {
		t.Fatalf("the source broker's log %s never says \"Kafka version: %s\" (%v): its logging is not configured", source.BrokerLog(0), version, err)
	}

	topic := "compat-" + strings.ReplaceAll(version, ".", "-")
	group := "group-" + topic
	adm := adminOf(t, source)
	if resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s on the source: %v %v", topic, err, resp.Err)
	}

	// Traffic before kmirror starts, then a classic group reads and commits.
	produceMixed(t, ctx, source, topic, 0)
	committed := consumeAndCommit(t, ctx, source, group, topic, 40)
	// A group whose client asks for the KIP-848 protocol: a consumer group
	// on Kafka 4, a classic one before (the client falls back).
	group848 := group + "-848"
	committed848 := consumeAndCommit(t, ctx, source, group848, topic, 25, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	types := fmt.Sprintf("%s: %q, %s: %q", group, listed[group].GroupType, group848, listed[group848].GroupType)
	if want := dist.AtLeast(4, 0); want != (listed[group848].GroupType == "consumer") {
		t.Fatalf("source group types %s; want %s a KIP-848 consumer group: %v", types, group848, want)
	}
	t.Logf("source group types (ListGroups): %s", types)

	d := startKmirror(t, fmt.Sprintf(`log.level: debug
log.format: json
mirror.metadata.refresh.interval.ms: 2000
mirror.failed.retry.initial.backoff.ms: 200
mirror.failed.retry.max.backoff.ms: 2000
shutdown.timeout.ms: 20000
destination:
  bootstrap.servers: %s
state:
  dir: %s
mirrors:
  - name: compat
    bootstrap.servers: %s
    mirror.topics.include: %q
    mirror.groups.include: %q
`, destination.BootstrapServers(kafkatest.Plaintext), filepath.Join(t.TempDir(), "state"), source.BootstrapServers(kafkatest.Plaintext), topic+".*", group+".*"))

	// Traffic while kmirror runs.
	produceMixed(t, ctx, source, topic, 1)
	waitMirrored(t, ctx, d, adm, topic)

	var txnRecords, aborted, markers int
	for _, log := range verifyTopic(t, ctx, source, topic) {
		for _, e := range log.Entries {
			switch {
			case e.Control:
				markers++
			case e.Txn && !e.Visible:
				aborted++
				txnRecords++
			case e.Txn:
				txnRecords++
			}
		}
	}
	if txnRecords == 0 || aborted == 0 || markers == 0 {
		t.Fatalf("the source log holds %d transactional records, %d aborted, %d markers: the scenario needs all three", txnRecords, aborted, markers)
	}
	t.Logf("%s: %d partitions identical record by record: %d transactional records (%d aborted), %d markers",
		topic, partitions, txnRecords, aborted, markers)

	waitGroupSynced(t, ctx, adm, adminOf(t, destination), group, topic, committed)
	waitGroupSynced(t, ctx, adm, adminOf(t, destination), group848, topic, committed848)

	if !dist.AtLeast(4, 0) {
		legacyTopics(t, ctx, d, source, topic)
	}
	if dist.ZooKeeper() {
		legacyFormat(t, ctx, d, source, topic)
	}

	st, ok := d.describe()
	if !ok {
		t.Fatal("describe did not answer")
	}
	for _, m := range st.Mirrors {
		for _, ps := range m.Partitions {
			if ps.State == "FAILED" && !strings.HasSuffix(ps.Topic, "-magic1") {
				t.Errorf("%s[%d] FAILED: %s", ps.Topic, ps.Partition, ps.LastError)
			}
		}
		for _, e := range m.Errors {
			t.Logf("describe: mirror %s: %s error: %s", m.Name, e.Loop, e.Message)
		}
		for _, e := range m.TopicConfigErrors {
			t.Logf("describe: mirror %s: topic config error: %s %s: %s", m.Name, e.Topic, e.Key, e.Error)
		}
		for _, n := range m.Notes {
			t.Logf("describe: mirror %s: note: %s", m.Name, n)
		}
	}
	// A source without share groups (before Kafka 4) is said in describe;
	// consumer groups sync anyway (above).
	var shareNote string
	for _, m := range st.Mirrors {
		for _, n := range m.Notes {
			if strings.Contains(n, "share groups are not synced") {
				shareNote = n
			}
		}
	}
	if wantNote := !dist.AtLeast(4, 0); wantNote != (shareNote != "") {
		t.Errorf("describe's share-group note %q; want one: %v", shareNote, wantNote)
	}
	if !d.running() {
		t.Fatalf("kmirror exited:\n%s", tail(d.log(), 40))
	}
	logged := d.log()
	if strings.Contains(logged, "panic") {
		t.Errorf("kmirror's log holds a panic:\n%s", tail(logged, 60))
	}
	for _, line := range strings.Split(logged, "\n") {
		if strings.Contains(line, `"@level":"warn"`) || strings.Contains(line, `"@level":"error"`) || strings.Contains(line, "not advertise") || strings.Contains(line, "unsupported") {
			t.Logf("kmirror: %s", line)
		}
	}
}

func adminOf(t testing.TB, c *kafkatest.Cluster) *kadm.Client {
	t.Helper()
	adm, err := c.Admin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	return adm
}

func client(t testing.TB, c *kafkatest.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := c.NewClient(kafkatest.Identity{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceMixed writes one round of traffic to every partition of topic: a
// plain producer (keys, headers, timestamps an hour old) and two
// transactional producers, each running transactions across partitions that
// commit or abort, all at once.
func produceMixed(t testing.TB, ctx context.Context, c *kafkatest.Cluster, topic string, round int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 2 {
		wg.Go(func() {
			cl, err := c.NewClient(kafkatest.Identity{}, kgo.TransactionalID(fmt.Sprintf("%s-tx%d", topic, i)),
				kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			r := rand.New(rand.NewPCG(uint64(round), uint64(i)))
			for n := range 8 {
				if err := cl.BeginTransaction(); err != nil {
					errs <- err
					return
				}
				for k := range 2 + r.IntN(4) {
					rec := &kgo.Record{Partition: int32(r.IntN(partitions)), Key: fmt.Appendf(nil, "r%d-tx%d-%d-%d", round, i, n, k), Value: []byte("transactional"),
						Headers: []kgo.RecordHeader{{Key: "txn", Value: fmt.Appendf(nil, "%d", n)}}}
					if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
						errs <- err
						return
					}
				}
				// Every third transaction aborts, the first of each
				// producer among them.
				if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(n%3 != 0)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		cl, err := c.NewClient(kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			errs <- err
			return
		}
		defer cl.Close()
		base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		for n := range 60 {
			rec := &kgo.Record{Partition: int32(n % partitions), Key: fmt.Appendf(nil, "r%d-plain-%d", round, n),
				Value:     fmt.Appendf(nil, "plain-%d-%s", n, strings.Repeat("x", n)),
				Headers:   []kgo.RecordHeader{{Key: "seq", Value: fmt.Appendf(nil, "%d", n)}, {Key: "empty"}},
				Timestamp: base.Add(time.Duration(n) * time.Second)}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("producing to %s on cluster %s: %v", topic, c.Name(), err)
	}
}

// consumeAndCommit reads n committed records of topic as a member of a
// consumer group (classic unless opts ask otherwise), commits what it read and leaves the group. It
// returns the committed offsets by partition (the next offset to read).
func consumeAndCommit(t testing.TB, ctx context.Context, c *kafkatest.Cluster, group, topic string, n int, opts ...kgo.Opt) map[int32]int64 {
	t.Helper()
	cl := client(t, c, append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted())}, opts...)...)
	var read []*kgo.Record
	for len(read) < n {
		read = append(read, cl.PollRecords(ctx, n-len(read)).Records()...)
		if ctx.Err() != nil {
			t.Fatalf("group %s read %d of %d records of %s: %v", group, len(read), n, topic, ctx.Err())
		}
	}
	if err := cl.CommitRecords(ctx, read...); err != nil {
		t.Fatalf("group %s committing: %v", group, err)
	}
	cl.Close() // leaves the group: Empty, so kmirror may sync it
	adm := adminOf(t, c)
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	if len(out) == 0 {
		t.Fatalf("group %s has no committed offset of %s on the source", group, topic)
	}
	return out
}

// waitMirrored waits until every partition of topic is MIRRORING up to the
// source's end offset.
func waitMirrored(t testing.TB, ctx context.Context, d *daemon, srcAdm *kadm.Client, topic string) {
	t.Helper()
	var lagging []string
	for {
		ends, err := srcAdm.ListEndOffsets(ctx, topic)
		st, ok := d.describe()
		lagging = lagging[:0]
		if err != nil || !ok {
			lagging = append(lagging, fmt.Sprintf("end offsets: %v; describe answered: %v", err, ok))
		}
		for p := range int32(partitions) {
			end, _ := ends.Lookup(topic, p)
			ps, found := partitionStatus(st, topic, p)
			if !found || ps.State != "MIRRORING" || ps.LastMirroredOffset+1 != end.Offset {
				lagging = append(lagging, fmt.Sprintf("%d: %s mirrored to %d of %d %s", p, ps.State, ps.LastMirroredOffset+1, end.Offset, ps.LastError))
			}
		}
		if len(lagging) == 0 {
			return
		}
		if !d.running() {
			t.Fatalf("kmirror exited before %s was mirrored:\n%s", topic, tail(d.log(), 40))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s not mirrored in time: %v", topic, lagging)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func partitionStatus(st admin.Status, topic string, p int32) (admin.PartitionStatus, bool) {
	for _, m := range st.Mirrors {
		for _, ps := range m.Partitions {
			if ps.Topic == topic && ps.Partition == p {
				return ps, true
			}
		}
	}
	return admin.PartitionStatus{}, false
}

// waitGroupSynced waits until group's committed offsets of topic on the
// destination are want.
func waitGroupSynced(t testing.TB, ctx context.Context, srcAdm, dstAdm *kadm.Client, group, topic string, want map[int32]int64) {
	t.Helper()
	got := map[int32]int64{}
	for {
		offs, err := dstAdm.FetchOffsets(ctx, group)
		if err == nil {
			clear(got)
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic == topic && o.Err == nil {
					got[o.Partition] = o.At
				}
			})
			if fmt.Sprint(got) == fmt.Sprint(want) {
				t.Logf("group %s: offsets %v synced to the destination", group, got)
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s: destination offsets %v, want the source's %v", group, got, want)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// legacyTopics covers what only a source before Kafka 4.0 can hold: topic
// configs that Kafka 4 removed (KIP-724: message.format.version,
// message.downconversion.enable) and, on 2.x, a topic whose log is in message
// format v1 (magic 1), which a Kafka 4 destination cannot store. The first
// must be mirrored with the configs the destination knows and the others
// reported; the second must fail with a reason while the rest mirrors on.
func legacyTopics(t *testing.T, ctx context.Context, d *daemon, source *kafkatest.Cluster, prefix string) {
	adm := adminOf(t, source)
	oldConfigs := prefix + "-oldconfigs"
	str := func(s string) *string { return &s }
	if resp, err := adm.CreateTopic(ctx, partitions, 1, map[string]*string{
		"message.format.version":        str(majorMinor(source.Version())),
		"message.downconversion.enable": str("false"),
		"retention.ms":                  str("86400000"),
	}, oldConfigs); err != nil || resp.Err != nil {
		t.Fatalf("create %s on the source: %v %v", oldConfigs, err, resp.Err)
	}
	// The destination topic has the keys Kafka 4 knows from its creation
	// (read as soon as it exists, before any config round could add them).
	dstAdm := adminOf(t, destination)
	for {
		td, err := dstAdm.ListTopics(ctx, oldConfigs)
		if err == nil && td.Has(oldConfigs) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s was never created on the destination", oldConfigs)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got := topicConfig(t, ctx, dstAdm, oldConfigs, "retention.ms"); got != "86400000" {
		t.Errorf("%s was created on the destination with retention.ms %q, want the source's 86400000 from the start", oldConfigs, got)
	}
	produceMixed(t, ctx, source, oldConfigs, 2)
	waitMirrored(t, ctx, d, adm, oldConfigs)
	verifyTopic(t, ctx, source, oldConfigs)
	// Each removed key is reported in describe, naming the key and the way
	// out.
	for {
		rejected := map[string]string{}
		if st, ok := d.describe(); ok {
			for _, m := range st.Mirrors {
				for _, e := range m.TopicConfigErrors {
					if e.Topic == oldConfigs {
						rejected[e.Key] = e.Error
					}
				}
			}
		}
		retention := topicConfig(t, ctx, dstAdm, oldConfigs, "retention.ms")
		if retention == "86400000" && strings.Contains(rejected["message.format.version"], "mirror.topic.properties.exclude") &&
			strings.Contains(rejected["message.downconversion.enable"], "mirror.topic.properties.exclude") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: destination retention.ms %q, want 86400000; describe's rejected configs %v, want message.format.version and message.downconversion.enable", oldConfigs, retention, rejected)
		case <-time.After(250 * time.Millisecond):
		}
	}
	t.Logf("%s: mirrored record by record; retention.ms synced; message.format.version and message.downconversion.enable reported as rejected by the destination", oldConfigs)
}

// legacyFormat creates, on a 2.x source, a topic in message format v1
// (message.format.version=0.10.2: the broker stores magic-1 message sets) and
// checks that kmirror fails that partition with a reason naming the format,
// while the other topics mirror on.
func legacyFormat(t *testing.T, ctx context.Context, d *daemon, source *kafkatest.Cluster, prefix string) {
	adm := adminOf(t, source)
	v1 := prefix + "-magic1"
	format := "0.10.2"
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"message.format.version": &format}, v1); err != nil || resp.Err != nil {
		t.Fatalf("create %s on the source: %v %v", v1, err, resp.Err)
	}
	// Idempotent and transactional writes need format v2: plain ones only.
	cl := client(t, source, kgo.DefaultProduceTopic(v1), kgo.DisableIdempotentWrite())
	for n := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", n), Value: []byte("message format v1")}).FirstErr(); err != nil {
			t.Fatalf("producing to %s: %v", v1, err)
		}
	}
	var last admin.PartitionStatus
	for {
		st, _ := d.describe()
		ps, ok := partitionStatus(st, v1, 0)
		if ok {
			last = ps
		}
		if ok && ps.State == "FAILED" && strings.Contains(ps.LastError, "magic") {
			t.Logf("%s[0] FAILED: %s", v1, ps.LastError)
			break
		}
		if !d.running() {
			t.Fatalf("kmirror exited on a message format v1 topic:\n%s", tail(d.log(), 40))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s[0] never failed naming the message format: last status %+v", v1, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
	// The other topics are not disturbed.
	produceMixed(t, ctx, source, prefix, 3)
	waitMirrored(t, ctx, d, adm, prefix)
	verifyTopic(t, ctx, source, prefix)
	// No retry can change what the source log holds: the partition failed
	// once and waits for an operator (with mirror.failed.retry.* of a few
	// hundred milliseconds, retries would have failed it again by now).
	failures := 0
	for _, line := range strings.Split(d.log(), "\n") {
		if strings.Contains(line, `"to":"FAILED"`) && strings.Contains(line, `"topic":"`+v1+`"`) {
			failures++
		}
	}
	if failures != 1 {
		t.Errorf("%s[0] went to FAILED %d times, want once (no automatic retry)", v1, failures)
	}
}

// verifyTopic compares every partition of topic on both clusters record by
// record and returns the source logs.
func verifyTopic(t testing.TB, ctx context.Context, source *kafkatest.Cluster, topic string) []*verify.Log {
	t.Helper()
	src, dst := client(t, source), client(t, destination)
	var logs []*verify.Log
	for p := range int32(partitions) {
		log, diff, err := verify.Partition(ctx, src, dst, topic, p)
		if err != nil {
			t.Fatalf("verifying %s[%d]: %v", topic, p, err)
		}
		if diff != "" {
			t.Fatalf("%s[%d] differs between the %s source and the destination: %s", topic, p, source.Version(), diff)
		}
		logs = append(logs, log)
	}
	return logs
}

// majorMinor returns "3.9" of "3.9.1".
func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	return parts[0] + "." + parts[1]
}

// topicConfig returns the value of topic's config key ("" when unreadable).
func topicConfig(t testing.TB, ctx context.Context, adm *kadm.Client, topic, key string) string {
	t.Helper()
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return ""
	}
	c, err := rc.On(topic, nil)
	if err != nil {
		return ""
	}
	for _, kv := range c.Configs {
		if kv.Key == key && kv.Value != nil {
			return *kv.Value
		}
	}
	return ""
}
