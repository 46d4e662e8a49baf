package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// consumeAndCommit reads the first n records of a one-partition topic on the
// source as a member of group, commits them (the group's offset is then the
// next record to read) and leaves the group. It returns the records read.
func consumeAndCommit(t testing.TB, ctx context.Context, group, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, source, kafkatest.Identity{}, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var read []*kgo.Record
	for len(read) < n {
		read = append(read, cl.PollRecords(ctx, n-len(read)).Records()...)
		if ctx.Err() != nil {
			t.Fatalf("group %s read %d of %d records of %s on the source: %v", group, len(read), n, topic, ctx.Err())
		}
	}
	if err := cl.CommitRecords(ctx, read...); err != nil {
		t.Fatalf("group %s committing on the source: %v", group, err)
	}
	cl.Close() // leaves the group: Empty on the source
	return read
}

// committedOffset returns group's committed offset of topic/partition on the
// cluster behind adm, -1 if it has none.
func committedOffset(t testing.TB, ctx context.Context, adm *kadm.Client, group, topic string, p int32) int64 {
	t.Helper()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetching the offsets of group %s: %v", group, err)
	}
	if o, ok := offs.Lookup(topic, p); ok && o.Err == nil {
		return o.At
	}
	return -1
}

// waitCommitted waits until group's committed offset of topic/partition on
// the destination is want.
func waitCommitted(t testing.TB, ctx context.Context, group, topic string, p int32, want int64) {
	t.Helper()
	adm := superAdmin(t, destination)
	var got int64 = -1
	for {
		if got = committedOffset(t, ctx, adm, group, topic, p); got == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s: committed offset of %s[%d] on the destination is %d, never %d", group, topic, p, got, want)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// groupStatus returns what describe reports of group's last sync.
func (d *daemon) groupStatus(group string) (state string, skipped bool, at time.Time, found bool) {
	st, ok := d.status()
	if !ok {
		return "", false, time.Time{}, false
	}
	for _, m := range st.Mirrors {
		for _, g := range m.Groups {
			if g.Group == group {
				return g.DestinationState, g.SkippedActive, g.At, true
			}
		}
	}
	return "", false, time.Time{}, false
}

// readRest consumes topic on the destination as group (which starts at its
// committed offset) until want records arrived, then polls one more second
// to make sure nothing else comes.
func readRest(t testing.TB, ctx context.Context, group, topic string, want int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, destination, kafkatest.Identity{}, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	var got []*kgo.Record
	for len(got) < want {
		got = append(got, cl.PollFetches(ctx).Records()...)
		if ctx.Err() != nil {
			t.Fatalf("group %s read %d of %d records on the destination: %v", group, len(got), want, ctx.Err())
		}
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	got = append(got, cl.PollFetches(pctx).Records()...)
	if len(got) != want {
		t.Fatalf("group %s read %d records on the destination, want exactly %d", group, len(got), want)
	}
	return got
}

// compactedTopicWithGaps creates a one-partition compacted topic on the
// source, writes rounds of updates until the log cleaner has left gaps
// inside the log, then freezes it (no further cleaning) and returns its
// content.
func compactedTopicWithGaps(t testing.TB, ctx context.Context, topic string) *verify.Log {
	t.Helper()
	adm := superAdmin(t, source)
	// The log cleaner looks for work every second (cluster-wide, harmless
	// for the other tests).
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.cleaner.backoff.ms", Value: kadm.StringPtr("1000")}}); err != nil {
		t.Fatalf("setting log.cleaner.backoff.ms: %v", err)
	}
	createTopic(t, ctx, adm, topic, 1, 3, map[string]*string{
		"cleanup.policy":            kadm.StringPtr("compact"),
		"segment.ms":                kadm.StringPtr("500"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
		"min.compaction.lag.ms":     kadm.StringPtr("0"),
		"max.compaction.lag.ms":     kadm.StringPtr("1000"),
	})
	producer := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	for round := range 6 {
		var recs []*kgo.Record
		for k := range 20 {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "key-%d", k), Value: fmt.Appendf(nil, "round %d", round)})
		}
		// A key written once survives where it is: gaps inside the log.
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "once-%d", round), Value: []byte("kept")})
		produceSync(t, ctx, producer, recs...)
		time.Sleep(700 * time.Millisecond) // roll a segment between rounds
	}
	cl := newClient(t, source, kafkatest.Identity{})
	for tick := 0; ; tick++ {
		produceSync(t, ctx, producer, &kgo.Record{Key: fmt.Appendf(nil, "tick-%d", tick), Value: []byte("roll")})
		log, err := verify.ReadLog(ctx, cl, topic, 0)
		if err == nil && int64(len(log.Entries)) < log.HighWatermark-log.LogStart-10 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the source topic %s was never compacted", topic)
		case <-time.After(time.Second):
		}
	}
	freeze := []kadm.AlterConfig{{Name: "cleanup.policy", Value: kadm.StringPtr("delete")}, {Name: "retention.ms", Value: kadm.StringPtr("-1")}}
	if resp, err := adm.AlterTopicConfigs(ctx, freeze, topic); err != nil || resp[0].Err != nil {
		t.Fatalf("freezing the compacted topic: %v %v", err, resp)
	}
	time.Sleep(2 * time.Second) // a cleaning pass in progress finishes
	log, err := verify.ReadLog(ctx, cl, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// TestConsumerGroupFailsOverAtTheNextRecordInMapModeOnACompactedTopic: on a
// compacted source topic with gaps (mirrored in map mode, so destination
// offsets differ from the source's), a group commits on the source right
// before a gap; after the sync, a consumer in that group on the destination
// starts at the destination record that carries the next source record, and
// reads the rest with no duplicate and no gap, key and value compared.
func TestConsumerGroupFailsOverAtTheNextRecordInMapModeOnACompactedTopic(t *testing.T) {
	ctx := testContext(t, 5*time.Minute)
	topic := topicName(t, "")
	group := "app-" + topic
	srcLog := compactedTopicWithGaps(t, ctx, topic)
	// Commit after the first record (past the first) followed by a gap: the
	// committed offset (last read + 1) is then not the offset of any source
	// record, and map mode must find the next one.
	k := -1
	for i := 1; i+1 < len(srcLog.Entries); i++ {
		if srcLog.Entries[i+1].Offset > srcLog.Entries[i].Offset+1 {
			k = i
			break
		}
	}
	if k < 0 {
		t.Fatalf("no gap inside the compacted log (test premise); offsets %d–%d, %d records", srcLog.LogStart, srcLog.HighWatermark, len(srcLog.Entries))
	}
	read := consumeAndCommit(t, ctx, group, topic, k+1)
	if last := read[len(read)-1]; last.Offset != srcLog.Entries[k].Offset {
		t.Fatalf("the source consumer stopped at offset %d, want %d", last.Offset, srcLog.Entries[k].Offset)
	}
	committed := srcLog.Entries[k].Offset + 1

	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 1)
	if ps, _ := d.partitionStatus(topic, 0); ps.Mode != "map" {
		t.Fatalf("mode %q, want map (test premise); notes %v", ps.Mode, ps.Notes)
	}
	dstLog, err := verify.ReadLog(ctx, newClient(t, destination, kafkatest.Identity{}), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(dstLog.Entries) != len(srcLog.Entries) {
		t.Fatalf("destination holds %d records, the source %d", len(dstLog.Entries), len(srcLog.Entries))
	}
	next := dstLog.Entries[k+1]
	if next.Offset == srcLog.Entries[k+1].Offset && next.Offset == committed {
		t.Fatalf("destination offset %d equals the source's: map mode translates nothing here (test premise)", next.Offset)
	}
	waitCommitted(t, ctx, group, topic, 0, next.Offset)

	rest := readRest(t, ctx, group, topic, len(srcLog.Entries)-(k+1))
	for i, r := range rest {
		s, de := srcLog.Entries[k+1+i], dstLog.Entries[k+1+i]
		if r.Offset != de.Offset || !bytes.Equal(r.Key, s.Key) || !bytes.Equal(r.Value, s.Value) {
			t.Fatalf("destination record %d after failover: offset %d key %q value %q; want offset %d with source record %d (offset %d) key %q value %q",
				i, r.Offset, r.Key, r.Value, de.Offset, k+1+i, s.Offset, s.Key, s.Value)
		}
	}
	t.Logf("source committed offset %d (a gap up to %d) became destination offset %d; %d records read after it",
		committed, srcLog.Entries[k+1].Offset, next.Offset, len(rest))
}

// TestGroupActiveOnTheDestinationIsNotTouchedUntilItLeaves: while a consumer
// of a group is connected on the destination, the source's commits are not
// written there (describe says the group was skipped, active); once it
// leaves, the source's offset is synced and a new consumer starts at it.
func TestGroupActiveOnTheDestinationIsNotTouchedUntilItLeaves(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	group := "app-" + topic
	createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	produceSync(t, ctx, newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic)), recs...)
	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 1)

	// A consumer of the group on the destination reads 10 records, commits
	// and stays in the group.
	dstAdm := superAdmin(t, destination)
	member := newClient(t, destination, kafkatest.Identity{}, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	var mine []*kgo.Record
	for len(mine) < 10 {
		mine = append(mine, member.PollRecords(ctx, 10-len(mine)).Records()...)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
	}
	if err := member.CommitRecords(ctx, mine...); err != nil {
		t.Fatal(err)
	}
	pollCtx, stopPolling := context.WithCancel(ctx)
	var polling sync.WaitGroup
	polling.Go(func() { // owned by this test: stopped and waited for below
		for pollCtx.Err() == nil {
			member.PollFetches(pollCtx)
		}
	})
	defer func() { stopPolling(); polling.Wait() }()
	for {
		listed, err := dstAdm.ListGroups(ctx)
		if err == nil && listed[group].State != "" && listed[group].State != "Empty" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group %s never became active on the destination", group)
		case <-time.After(200 * time.Millisecond):
		}
	}

	// The group commits further on the source, while active on the destination.
	consumeAndCommit(t, ctx, group, topic, 60)
	committedAt := time.Now()
	for rounds := 0; rounds < 2; { // two sync rounds that saw the source's commit
		if _, skipped, at, ok := d.groupStatus(group); ok && at.After(committedAt) {
			if !skipped {
				t.Fatalf("describe: group %s was synced while active on the destination", group)
			}
			rounds++
			committedAt = at
		}
		select {
		case <-ctx.Done():
			t.Fatalf("describe never reported group %s skipped as active", group)
		case <-time.After(250 * time.Millisecond):
		}
	}
	if got := committedOffset(t, ctx, dstAdm, group, topic, 0); got != 10 {
		t.Fatalf("the active group's destination offset is %d, want the 10 its consumer committed", got)
	}
	if state, _, _, _ := d.groupStatus(group); state == "" || state == "Empty" {
		t.Fatalf("describe reports destination state %q for an active group", state)
	}

	// The member leaves: the source's offset is synced.
	stopPolling()
	polling.Wait()
	member.Close()
	waitCommitted(t, ctx, group, topic, 0, 60)
	rest := readRest(t, ctx, group, topic, 40)
	for i, r := range rest {
		if want := int64(60 + i); r.Offset != want || string(r.Key) != fmt.Sprintf("k%d", want) {
			t.Fatalf("destination record %d after the member left: offset %d key %s, want offset %d key k%d", i, r.Offset, r.Key, want, want)
		}
	}
}

// TestGroupsIncludeAndExcludeDecideWhichGroupsSync: with
// mirror.groups.include=app-.* and mirror.groups.exclude=app-test.*, only the
// groups matching the include and not the exclude get offsets on the
// destination; exclude wins and patterns match whole names.
func TestGroupsIncludeAndExcludeDecideWhichGroupsSync(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	suffix := topic[strings.LastIndexByte(topic, '-')+1:]
	createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
	var recs []*kgo.Record
	for i := range 50 {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	produceSync(t, ctx, newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic)), recs...)
	synced := map[string]int{"app-orders-" + suffix: 20, "app-" + suffix: 25}
	notSynced := map[string]int{
		"app-test-" + suffix:    21, // excluded
		"app-testing-" + suffix: 22, // excluded: app-test.* is a prefix match
		"billing-" + suffix:     23, // not included
		"my-app-" + suffix:      24, // not included: patterns match whole names
	}
	for g, n := range synced {
		consumeAndCommit(t, ctx, g, topic, n)
	}
	for g, n := range notSynced {
		consumeAndCommit(t, ctx, g, topic, n)
	}

	d := startKmirror(t, topic, `mirror.groups.include: "app-.*"`, `mirror.groups.exclude: "app-test.*"`)
	d.waitMirrored(ctx, topic, 1)
	for g, n := range synced {
		waitCommitted(t, ctx, g, topic, 0, int64(n))
	}
	// The included groups were written in a sync round that saw every
	// group; let one more round pass, then look at the destination.
	seen := time.Now()
	for {
		if _, _, at, ok := d.groupStatus("app-" + suffix); ok && at.After(seen) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no further group sync round")
		case <-time.After(250 * time.Millisecond):
		}
	}
	dstAdm := superAdmin(t, destination)
	listed, err := dstAdm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, g := range listed.Groups() {
		if strings.HasSuffix(g, suffix) {
			mine = append(mine, g)
		}
	}
	slices.Sort(mine)
	if want := slices.Sorted(maps.Keys(synced)); !slices.Equal(mine, want) {
		t.Fatalf("groups of this test on the destination: %v, want exactly %v", mine, want)
	}
	for g := range notSynced {
		if got := committedOffset(t, ctx, dstAdm, g, topic, 0); got != -1 {
			t.Errorf("group %s has offset %d on the destination; it is outside the groups include/exclude", g, got)
		}
		if _, _, _, ok := d.groupStatus(g); ok {
			t.Errorf("describe lists group %s, outside the groups include/exclude", g)
		}
	}
}

// setShareAutoOffsetReset sets a share group's share.auto.offset.reset on a
// cluster (a GROUP config resource; share groups start at latest without it).
func setShareAutoOffsetReset(t testing.TB, ctx context.Context, c *kafkatest.Cluster, group, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value, cfg.Op = "share.auto.offset.reset", kmsg.StringPtr(value), kmsg.IncrementalAlterConfigOpSet
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, newClient(t, c, kafkatest.Identity{}))
	if err == nil && len(resp.Resources) == 1 {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("setting share.auto.offset.reset=%s on share group %s of %s: %v", value, group, c.Name(), err)
	}
}

// shareStartOffsets returns group's share-partition start offsets of topic's
// partitions on the cluster behind adm (partition → offset; partitions
// without one are missing).
func shareStartOffsets(t testing.TB, ctx context.Context, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	desc, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		t.Fatalf("describing the offsets of share group %s: %v", group, err)
	}
	out := map[int32]int64{}
	for p, o := range desc[group].Offsets[topic] {
		if o.Err == nil && o.StartOffset >= 0 {
			out[p] = o.StartOffset
		}
	}
	return out
}

// TestShareGroupStartOffsetsSyncToTheDestination: a share consumer reads and
// acknowledges records of each partition on the source, which moves the
// group's share-partition start offsets; after the sync the destination's
// start offsets equal the source's, and a share consumer of the group on the
// destination gets exactly the records from those start offsets on.
//
// Kafka persists a share partition's start offset with the state write
// that follows the acknowledgement moving it, so the source consumer reads
// and acknowledges in rounds until every partition's persisted start offset
// has moved; records acknowledged after it are delivered again on the
// destination (only start offsets are mirrored, as KIP-1279 says).
func TestShareGroupStartOffsetsSyncToTheDestination(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	group := "app-share-" + topic
	const partitions, unread = 2, 20 // unread: records per partition never consumed on the source
	createTopic(t, ctx, superAdmin(t, source), topic, partitions, 3, nil)
	producer := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produced := 0 // per partition
	produce := func(n int) {
		var recs []*kgo.Record
		for p := range int32(partitions) {
			for i := produced; i < produced+n; i++ {
				recs = append(recs, &kgo.Record{Partition: p, Key: fmt.Appendf(nil, "p%d-k%d", p, i), Value: fmt.Appendf(nil, "v%d", i)})
			}
		}
		produceSync(t, ctx, producer, recs...)
		produced += n
	}

	setShareAutoOffsetReset(t, ctx, source, group, "earliest")
	sc := newClient(t, source, kafkatest.Identity{}, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	srcAdm := superAdmin(t, source)
	moved := func(start map[int32]int64) bool {
		for p := range int32(partitions) {
			if start[p] <= 0 {
				return false
			}
		}
		return true
	}
	var srcStart map[int32]int64
	for round := 0; !moved(srcStart); round++ {
		if round == 5 {
			t.Fatalf("source start offsets of share group %s still %v after %d rounds of acknowledged records", group, srcStart, round)
		}
		produce(10)
		for got := 0; got < partitions*10; {
			fs := sc.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("the source share consumer read %d of %d records: %v", got, partitions*10, ctx.Err())
			}
			for _, r := range fs.Records() {
				r.Ack(kgo.AckAccept)
				got++
			}
		}
		if err := sc.FlushAcks(ctx); err != nil {
			t.Fatalf("acknowledging on the source: %v", err)
		}
		srcStart = shareStartOffsets(t, ctx, srcAdm, group, topic)
	}
	sc.Close()
	produce(unread) // never consumed on the source
	// The start offsets hold still once the consumer is gone.
	for {
		time.Sleep(time.Second)
		again := shareStartOffsets(t, ctx, srcAdm, group, topic)
		if maps.Equal(again, srcStart) {
			break
		}
		srcStart = again
	}
	t.Logf("source start offsets %v of %d records per partition", srcStart, produced)

	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, partitions)
	dstAdm := superAdmin(t, destination)
	var dstStart map[int32]int64
	for {
		if dstStart = shareStartOffsets(t, ctx, dstAdm, group, topic); maps.Equal(dstStart, srcStart) {
			break
		}
		select {
		case <-ctx.Done():
			st, _ := d.status()
			t.Fatalf("destination start offsets of share group %s are %v, want the source's %v; describe: %+v", group, dstStart, srcStart, st)
		case <-time.After(250 * time.Millisecond):
		}
	}

	// On the destination the group delivers every record from the start
	// offsets on, once, and none before them.
	want := 0
	for p := range int32(partitions) {
		want += produced - int(srcStart[p])
	}
	dc := newClient(t, destination, kafkatest.Identity{}, kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	keys := map[string]int{}
	for n := 0; n < want; {
		fs := dc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the destination share consumer read %d of %d records: %v", n, want, ctx.Err())
		}
		for _, r := range fs.Records() {
			r.Ack(kgo.AckAccept)
			keys[string(r.Key)]++
			n++
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, r := range dc.PollFetches(pctx).Records() {
		keys[string(r.Key)]++
	}
	for p := range int32(partitions) {
		for i := range produced {
			k := fmt.Sprintf("p%d-k%d", p, i)
			wantN := 0
			if int64(i) >= srcStart[p] {
				wantN = 1
			}
			if keys[k] != wantN {
				t.Errorf("record %s delivered %d times on the destination, want %d (start offset %d)", k, keys[k], wantN, srcStart[p])
			}
			delete(keys, k)
		}
	}
	if len(keys) > 0 {
		t.Errorf("unexpected records delivered on the destination: %v", keys)
	}
}
