package groupsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kmirror/kmirror/core/metrics"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

func TestNewRejectsMissingOptions(t *testing.T) {
	t.Parallel()
	_, err := New(Options{Mirror: "m1"})
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("New without clients: got %v, want ErrInvalidOptions", err)
	}
	for _, want := range []string{"Source", "Destination", "Mirrored"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestPreserveCopiesOffsetsAndMetadataAndConsumerStartsAtNextRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	// The destination holds the mirrored records at the source's offsets.
	prod := kfaketest.NewClient(t, e.dst, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte{byte(i)}}
		if err := prod.ProduceSync(kfaketest.Context(t), r).FirstErr(); err != nil {
			t.Fatalf("producing: %v", err)
		}
	}
	commit(t, e.srcAdm, "app", "meta-1", map[int32]int64{0: 4, 1: 0})
	if err := e.srcAdm.CommitAllOffsets(kfaketest.Context(t), "app", kadm.Offsets{unmirror: {0: {Topic: unmirror, Partition: 0, At: 7, LeaderEpoch: -1}}}); err != nil {
		t.Fatal(err)
	}

	rep := e.sync(t)
	g := mustFind(t, rep.Groups, "app")
	if g.Synced != 2 || g.Err != "" || g.SkippedActive || g.Kind != KindConsumer {
		t.Fatalf("report for app = %+v, want 2 partitions synced", g)
	}
	if at, meta := committed(t, e.dstAdm, "app", 0); at != 4 || meta != "meta-1" {
		t.Fatalf("destination offset of %s/0 = %d %q, want 4 %q", topic, at, meta, "meta-1")
	}
	resp, err := e.dstAdm.FetchOffsets(kfaketest.Context(t), "app")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.Lookup(unmirror, 0); ok {
		t.Fatalf("offset of the unmirrored topic %s was copied", unmirror)
	}

	// A second cycle writes nothing: the sync is idempotent.
	if g := mustFind(t, e.sync(t).Groups, "app"); g.Synced != 0 || g.Err != "" {
		t.Fatalf("second cycle report = %+v, want nothing written", g)
	}

	cons := kfaketest.NewClient(t, e.dst, kgo.ConsumerGroup("app"), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(100*time.Millisecond))
	for {
		fs := cons.PollFetches(kfaketest.Context(t))
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming on the destination: %v", err)
		}
		if recs := fs.Records(); len(recs) > 0 {
			if recs[0].Partition != 0 || recs[0].Offset != 4 {
				t.Fatalf("consumer started at %d/%d, want 0/4", recs[0].Partition, recs[0].Offset)
			}
			return
		}
	}
}

func TestIncludeDecidesWhichGroupsAreSynced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(g string) bool { return strings.HasPrefix(g, "keep-") })
	commit(t, e.srcAdm, "keep-a", "", map[int32]int64{0: 3})
	commit(t, e.srcAdm, "drop-b", "", map[int32]int64{0: 3})

	rep := e.sync(t)
	if len(rep.Groups) != 1 || rep.Groups[0].Group != "keep-a" {
		t.Fatalf("report groups = %+v, want only keep-a", rep.Groups)
	}
	listed, err := e.dstAdm.ListGroups(kfaketest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed["keep-a"]; !ok {
		t.Errorf("keep-a missing on the destination: %v", listed.Groups())
	}
	if _, ok := listed["drop-b"]; ok {
		t.Errorf("excluded group drop-b was created on the destination")
	}
}

func TestGroupActiveOnDestinationIsSkippedUntilItLeaves(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	commit(t, e.srcAdm, "busy", "", map[int32]int64{0: 6})

	cons := kfaketest.NewClient(t, e.dst, kgo.ConsumerGroup("busy"), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(100*time.Millisecond))
	pollCtx, cancel := context.WithCancel(kfaketest.Context(t))
	done := make(chan struct{})
	go func() { // owned by this test: cancelled and waited for below
		defer close(done)
		for pollCtx.Err() == nil {
			cons.PollFetches(pollCtx)
		}
	}()
	waitState(t, e.dstAdm, "busy", func(s string) bool { return s != "" && s != "Empty" && s != "Dead" })

	rep := e.sync(t)
	g := mustFind(t, rep.Groups, "busy")
	if !g.SkippedActive || g.Synced != 0 {
		t.Fatalf("report for an active group = %+v, want SkippedActive", g)
	}
	if st := mustFind(t, e.syncer.Status(), "busy"); !st.SkippedActive || st.At.IsZero() {
		t.Fatalf("Status for the active group = %+v, want SkippedActive with a time", st)
	}
	if at, _ := committed(t, e.dstAdm, "busy", 0); at == 6 {
		t.Fatalf("the offset of an active group was written")
	}
	if !g.LastSynced.IsZero() {
		t.Fatalf("LastSynced = %v for a group never synced, want zero", g.LastSynced)
	}

	cancel()
	<-done
	cons.Close() // leaves the group
	waitState(t, e.dstAdm, "busy", func(s string) bool { return s == "Empty" || s == "Dead" })

	g = mustFind(t, e.sync(t).Groups, "busy")
	if g.SkippedActive || g.Synced != 1 {
		t.Fatalf("report after the member left = %+v, want 1 partition synced", g)
	}
	if at, _ := committed(t, e.dstAdm, "busy", 0); at != 6 {
		t.Fatalf("destination offset = %d, want 6", at)
	}
	if st := mustFind(t, e.syncer.Status(), "busy"); st.SkippedActive || st.LastSynced.IsZero() || !st.LastSynced.Equal(g.At) {
		t.Fatalf("Status after the sync = %+v, want LastSynced = At = %v", st, g.At)
	}
}

func waitState(t *testing.T, adm *kadm.Client, group string, ok func(string) bool) {
	t.Helper()
	ctx := kfaketest.Context(t)
	kfaketest.WaitFor(t, "group "+group+" to reach the expected state", func() (bool, string) {
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			return false, err.Error()
		}
		g, found := listed[group]
		return found && ok(g.State), fmt.Sprintf("listing %+v", listed)
	})
}

func TestOffsetBeyondMirroredEndIsClampedThenResynced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.mirrored.setEnd(5)
	commit(t, e.srcAdm, "lagging", "", map[int32]int64{0: 8})

	g := mustFind(t, e.sync(t).Groups, "lagging")
	if g.Clamped != 1 || g.Synced != 1 {
		t.Fatalf("report = %+v, want 1 clamped and synced", g)
	}
	if at, _ := committed(t, e.dstAdm, "lagging", 0); at != 5 {
		t.Fatalf("destination offset = %d, want the mirrored end 5", at)
	}

	e.mirrored.setEnd(10)
	g = mustFind(t, e.sync(t).Groups, "lagging")
	if g.Clamped != 0 || g.Synced != 1 {
		t.Fatalf("report after the mirror caught up = %+v, want 1 synced, none clamped", g)
	}
	if at, _ := committed(t, e.dstAdm, "lagging", 0); at != 8 {
		t.Fatalf("destination offset = %d, want 8", at)
	}
}

func TestDestinationOffsetNeverMovesBackwardsUnlessTheSourceDid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	commit(t, e.srcAdm, "g", "", map[int32]int64{0: 5})
	e.sync(t)

	// Someone moved the destination ahead; the source did not move.
	commit(t, e.dstAdm, "g", "", map[int32]int64{0: 9})
	g := mustFind(t, e.sync(t).Groups, "g")
	if g.Kept != 1 || g.Synced != 0 {
		t.Fatalf("report = %+v, want the partition kept", g)
	}
	if at, _ := committed(t, e.dstAdm, "g", 0); at != 9 {
		t.Fatalf("destination offset = %d, want 9 untouched", at)
	}

	// A restarted process has no history: it keeps the destination too.
	fresh := e.newSyncer(t, nil)
	if _, err := fresh.Sync(kfaketest.Context(t)); err != nil {
		t.Fatal(err)
	}
	if at, _ := committed(t, e.dstAdm, "g", 0); at != 9 {
		t.Fatalf("after a restart the destination offset = %d, want 9 untouched", at)
	}

	// The source moves backwards: the destination follows.
	commit(t, e.srcAdm, "g", "", map[int32]int64{0: 3})
	g = mustFind(t, e.sync(t).Groups, "g")
	if g.Synced != 1 {
		t.Fatalf("report after the source rewound = %+v, want 1 synced", g)
	}
	if at, _ := committed(t, e.dstAdm, "g", 0); at != 3 {
		t.Fatalf("destination offset = %d, want 3", at)
	}
}

// TestNeverBackwardsHistorySurvivesARestartThroughTheStore: the source
// rewinds a group while the daemon is down; the restarted syncer reads the
// stored history, sees the source below what it last saw, and the
// destination follows — where an in-memory history would keep the
// destination ahead.
func TestNeverBackwardsHistorySurvivesARestartThroughTheStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	store := memstore.New()
	withStore := func() *Syncer {
		s, err := New(Options{Mirror: "m1", Source: e.srcAdm, Destination: e.dstAdm, Mirrored: e.mirrored, Store: store})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	commit(t, e.srcAdm, "g", "", map[int32]int64{0: 6})
	if _, err := withStore().Sync(kfaketest.Context(t)); err != nil {
		t.Fatal(err)
	}
	ent, err := store.Get(kfaketest.Context(t), statestore.GroupHistoryKey("m1"))
	if err != nil || !strings.Contains(string(ent.Value), `"offset":6`) {
		t.Fatalf("stored history %s (%v), want offset 6", ent.Value, err)
	}
	// While the daemon is down: the destination is ahead (a consumer ran
	// there), and the source group is rewound below what was seen.
	commit(t, e.dstAdm, "g", "", map[int32]int64{0: 9})
	commit(t, e.srcAdm, "g", "", map[int32]int64{0: 2})
	rep, err := withStore().Sync(kfaketest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if g := mustFind(t, rep.Groups, "g"); g.Synced != 1 {
		t.Fatalf("report after the restart = %+v, want the rewind synced", g)
	}
	if at, _ := committed(t, e.dstAdm, "g", 0); at != 2 {
		t.Fatalf("destination offset = %d, want 2 (the source moved backwards)", at)
	}
}

func TestMapModeTranslatesOffsets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.mirrored.shift = 100
	commit(t, e.srcAdm, "mapped", "x", map[int32]int64{0: 7, 1: 2})
	e.sync(t)
	for p, want := range map[int32]int64{0: 107, 1: 102} {
		if at, meta := committed(t, e.dstAdm, "mapped", p); at != want || meta != "x" {
			t.Errorf("destination offset of %s/%d = %d %q, want %d %q", topic, p, at, meta, want, "x")
		}
	}
}

func TestFailedTranslationIsReportedAndCountedOtherPartitionsSynced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.mirrored.failPart = 1
	commit(t, e.srcAdm, "half", "", map[int32]int64{0: 4, 1: 4})
	rep := e.sync(t)
	g := mustFind(t, rep.Groups, "half")
	if g.Synced != 1 || !strings.Contains(g.Err, "no mapping") || rep.Errors != 1 {
		t.Fatalf("report = %+v (errors %d), want 1 synced and the translation error", g, rep.Errors)
	}
	if at, _ := committed(t, e.dstAdm, "half", 0); at != 4 {
		t.Fatalf("destination offset of partition 0 = %d, want 4", at)
	}
	v, ok, err := e.metrics.Value("kmirror_consumer_group_offset_sync_error_total", map[string]string{"mirror": "m1"})
	if err != nil || !ok || v != 1 {
		t.Fatalf("consumer group sync error counter = %v (found %v, err %v), want 1", v, ok, err)
	}
	v, ok, err = e.metrics.Value("kmirror_group_offset_sync_groups", map[string]string{"mirror": "m1", "kind": KindConsumer})
	if err != nil || !ok || v != 0 {
		t.Fatalf("groups synced gauge = %v (found %v, err %v), want 0 (the only group failed)", v, ok, err)
	}
}

func TestShareGroupStartOffsetsAreSynced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	os := kadm.Offsets{}
	addOffset(os, kadm.Offset{Topic: topic, Partition: 0, At: 3})
	addOffset(os, kadm.Offset{Topic: unmirror, Partition: 0, At: 2})
	if _, err := e.srcAdm.AlterShareGroupOffsets(kfaketest.Context(t), "sg", os); err != nil {
		t.Fatalf("creating the source share group: %v", err)
	}
	commit(t, e.srcAdm, "cg", "", map[int32]int64{0: 1})

	rep := e.sync(t)
	if rep.ShareGroupsUnsupported {
		t.Fatal("kfake supports share groups, but the report says unsupported")
	}
	g := mustFind(t, rep.ShareGroups, "sg")
	if g.Kind != KindShare || g.Synced != 1 || g.Err != "" {
		t.Fatalf("share group report = %+v, want 1 partition synced", g)
	}
	if _, ok := find(rep.Groups, "sg"); ok {
		t.Fatal("the share group was also treated as a consumer group")
	}
	desc, err := e.dstAdm.DescribeShareGroupOffsets(kfaketest.Context(t), "sg")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := desc["sg"].Offsets.Lookup(topic, 0); !ok || o.StartOffset != 3 {
		t.Fatalf("destination start offset of %s/0 = %+v, want 3", topic, o)
	}
	if o, ok := desc["sg"].Offsets.Lookup(unmirror, 0); ok && o.StartOffset >= 0 {
		t.Fatalf("start offset of the unmirrored topic was copied: %+v", o)
	}
	v, ok, err := e.metrics.Value("kmirror_group_offset_sync_groups", map[string]string{"mirror": "m1", "kind": KindShare})
	if err != nil || !ok || v != 1 {
		t.Fatalf("share groups synced gauge = %v (found %v, err %v), want 1", v, ok, err)
	}
}

func TestShareGroupsUnsupportedOnDestinationConsumerGroupsStillSynced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, kfake.MaxVersions(kversion.V3_9_0()))
	os := kadm.Offsets{}
	addOffset(os, kadm.Offset{Topic: topic, Partition: 0, At: 3})
	if _, err := e.srcAdm.AlterShareGroupOffsets(kfaketest.Context(t), "sg", os); err != nil {
		t.Fatalf("creating the source share group: %v", err)
	}
	commit(t, e.srcAdm, "cg", "", map[int32]int64{0: 2})

	for range 2 {
		rep := e.sync(t)
		if !rep.ShareGroupsUnsupported || len(rep.ShareGroups) != 0 {
			t.Fatalf("report = %+v, want share groups unsupported and none synced", rep)
		}
		if rep.Errors != 0 {
			t.Fatalf("report errors = %d, want 0", rep.Errors)
		}
	}
	if at, _ := committed(t, e.dstAdm, "cg", 0); at != 2 {
		t.Fatalf("consumer group offset on the destination = %d, want 2", at)
	}
	v, ok, err := e.metrics.Value("kmirror_share_group_offset_sync_error_total", map[string]string{"mirror": "m1"})
	if err != nil || !ok || v != 1 {
		t.Fatalf("share group sync error counter = %v (found %v, err %v), want 1 (counted once)", v, ok, err)
	}
}

func TestShareGroupActiveOnDestinationIsSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	os := kadm.Offsets{}
	addOffset(os, kadm.Offset{Topic: topic, Partition: 0, At: 3})
	if _, err := e.srcAdm.AlterShareGroupOffsets(kfaketest.Context(t), "sg", os); err != nil {
		t.Fatalf("creating the source share group: %v", err)
	}
	cons := kfaketest.NewClient(t, e.dst, kgo.ShareGroup("sg"), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(100*time.Millisecond))
	pollCtx, cancel := context.WithCancel(kfaketest.Context(t))
	done := make(chan struct{})
	go func() { // owned by this test: cancelled and waited for below
		defer close(done)
		for pollCtx.Err() == nil {
			cons.PollFetches(pollCtx)
		}
	}()
	defer func() { cancel(); <-done }()
	waitState(t, e.dstAdm, "sg", func(s string) bool { return s != "" && s != "Empty" && s != "Dead" })

	g := mustFind(t, e.sync(t).ShareGroups, "sg")
	if !g.SkippedActive || g.Synced != 0 {
		t.Fatalf("report for an active share group = %+v, want SkippedActive", g)
	}
	desc, err := e.dstAdm.DescribeShareGroupOffsets(kfaketest.Context(t), "sg")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := desc["sg"].Offsets.Lookup(topic, 0); ok && o.StartOffset == 3 {
		t.Fatalf("the start offset of an active share group was written: %+v", o)
	}
}

func TestSyncFailsWhenSourceGroupsCannotBeListed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.src.ControlKey(int16(kmsg.ListGroups), func(req kmsg.Request) (kmsg.Response, error, bool) {
		resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil, true
	})
	_, err := e.syncer.Sync(kfaketest.Context(t))
	if !errors.Is(err, kerr.GroupAuthorizationFailed) || !strings.Contains(err.Error(), "source") {
		t.Fatalf("Sync error = %v, want the source's GROUP_AUTHORIZATION_FAILED", err)
	}
	v, ok, err := e.metrics.Value("kmirror_consumer_group_offset_sync_error_total", map[string]string{"mirror": "m1"})
	if err != nil || !ok || v != 1 {
		t.Fatalf("consumer group sync error counter = %v (found %v, err %v), want 1", v, ok, err)
	}
}

func TestStatusForgetsGroupsGoneFromTheSource(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	commit(t, e.srcAdm, "old", "", map[int32]int64{0: 1})
	commit(t, e.srcAdm, "stays", "", map[int32]int64{0: 1})
	e.sync(t)
	if len(e.syncer.Status()) != 2 {
		t.Fatalf("Status = %+v, want 2 groups", e.syncer.Status())
	}
	if _, err := e.srcAdm.DeleteGroup(kfaketest.Context(t), "old"); err != nil {
		t.Fatal(err)
	}
	e.sync(t)
	st := e.syncer.Status()
	if len(st) != 1 || st[0].Group != "stays" {
		t.Fatalf("Status after deleting a source group = %+v, want only stays", st)
	}
}

func TestLastSyncedIsKeptWhenALaterCycleFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err := New(Options{Mirror: "m1", Source: e.srcAdm, Destination: e.dstAdm, Mirrored: e.mirrored, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, e.srcAdm, "g", "", map[int32]int64{0: 1})
	first := clock
	if _, err := s.Sync(kfaketest.Context(t)); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Minute)
	e.mirrored.mu.Lock()
	e.mirrored.failPart = 0
	e.mirrored.mu.Unlock()
	commit(t, e.srcAdm, "g", "", map[int32]int64{0: 2})
	rep, err := s.Sync(kfaketest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	g := mustFind(t, rep.Groups, "g")
	if g.Err == "" || !g.At.Equal(clock) || !g.LastSynced.Equal(first) {
		t.Fatalf("report = %+v, want an error, At %v and LastSynced %v", g, clock, first)
	}
	if st := mustFind(t, s.Status(), "g"); !st.LastSynced.Equal(first) || st.Err == "" {
		t.Fatalf("Status = %+v, want the error and LastSynced %v", st, first)
	}
}

func TestShareGroupsUnsupportedOnSourceConsumerGroupsStillSynced(t *testing.T) {
	t.Parallel()
	e := &env{src: seededCluster(t, kfake.MaxVersions(kversion.V3_9_0())), dst: seededCluster(t), mirrored: &fakeMirrored{end: 1000, failPart: -1}}
	e.srcAdm, e.dstAdm = kfaketest.NewAdmin(t, e.src), kfaketest.NewAdmin(t, e.dst)
	p, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	e.metrics = p
	e.syncer = e.newSyncer(t, nil)
	commit(t, e.srcAdm, "cg", "", map[int32]int64{0: 2})

	rep := e.sync(t)
	if !rep.ShareGroupsUnsupported || rep.Errors != 0 {
		t.Fatalf("report = %+v, want share groups unsupported and no errors", rep)
	}
	if g := mustFind(t, rep.Groups, "cg"); g.Synced != 1 {
		t.Fatalf("consumer group report = %+v, want 1 synced", g)
	}
	notes := e.syncer.Notes()
	if len(notes) != 1 || !strings.Contains(notes[0], "share groups are not synced") || !strings.Contains(notes[0], "source broker") ||
		!strings.Contains(notes[0], "DescribeShareGroupOffsets") {
		t.Fatalf("notes = %q, want one saying share groups are not synced because the source lacks DescribeShareGroupOffsets", notes)
	}
}

// The filter is called once per cycle with every source group, its kind and
// state; what it keeps is synced, whatever order it returns.
func TestFilterSeesEveryGroupOnceAndDecides(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	commit(t, e.srcAdm, "cg-keep", "", map[int32]int64{0: 2})
	commit(t, e.srcAdm, "cg-drop", "", map[int32]int64{0: 2})
	os := kadm.Offsets{}
	addOffset(os, kadm.Offset{Topic: topic, Partition: 0, At: 3})
	for _, g := range []string{"sg-keep", "sg-drop"} {
		if _, err := e.srcAdm.AlterShareGroupOffsets(kfaketest.Context(t), g, os); err != nil {
			t.Fatalf("creating the source share group %s: %v", g, err)
		}
	}
	var calls [][]filter.Group
	e.syncer = e.newSyncerWith(t, filter.Funcs{Name: "keep", Groups: func(_ context.Context, _ string, in []filter.Group) ([]filter.Group, error) {
		calls = append(calls, slices.Clone(in))
		var out []filter.Group
		for i := len(in) - 1; i >= 0; i-- { // reversed: the order is the filter's
			if strings.HasSuffix(in[i].ID, "-keep") {
				out = append(out, in[i])
			}
		}
		return out, nil
	}})
	rep := e.sync(t)
	if len(calls) != 1 {
		t.Fatalf("the filter was called %d times in a cycle, want once", len(calls))
	}
	kinds := map[string]string{}
	for _, g := range calls[0] {
		kinds[g.ID] = g.Kind
		if g.State == "" {
			t.Errorf("group %s reached the filter without a state", g.ID)
		}
	}
	want := map[string]string{"cg-keep": filter.GroupClassic, "cg-drop": filter.GroupClassic, "sg-keep": filter.GroupShare, "sg-drop": filter.GroupShare}
	if !maps.Equal(kinds, want) {
		t.Fatalf("the filter saw %v, want %v", kinds, want)
	}
	if len(rep.Groups) != 1 || rep.Groups[0].Group != "cg-keep" || len(rep.ShareGroups) != 1 || rep.ShareGroups[0].Group != "sg-keep" {
		t.Fatalf("report groups %+v share groups %+v, want only cg-keep and sg-keep", rep.Groups, rep.ShareGroups)
	}
	listed, err := e.dstAdm.ListGroups(kfaketest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := listed.Groups(); !slices.Equal(sorted(got), []string{"cg-keep", "sg-keep"}) {
		t.Fatalf("destination groups %v, want cg-keep and sg-keep", got)
	}
}

// A filter that fails, or returns a group it was not given, makes no
// decision: the cycle fails, is counted, and writes nothing.
func TestFilterErrorOrInventedGroupSyncsNothing(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]filter.Filter{
		"error": filter.Funcs{Name: "down", Groups: func(context.Context, string, []filter.Group) ([]filter.Group, error) {
			return nil, filter.ErrUnavailable
		}},
		"invented": filter.Funcs{Name: "invents", Groups: func(_ context.Context, _ string, in []filter.Group) ([]filter.Group, error) {
			return append(slices.Clone(in), filter.Group{ID: "ghost", Kind: filter.GroupClassic, State: "Empty"}), nil
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			commit(t, e.srcAdm, "app", "", map[int32]int64{0: 2})
			e.syncer = e.newSyncerWith(t, f)
			_, err := e.syncer.Sync(kfaketest.Context(t))
			if err == nil || !strings.Contains(err.Error(), "no group is synced") {
				t.Fatalf("Sync = %v, want a failed cycle", err)
			}
			if name == "error" && !errors.Is(err, filter.ErrUnavailable) {
				t.Fatalf("Sync = %v, want it to wrap the filter's error", err)
			}
			if name == "invented" && !errors.Is(err, filter.ErrInvalidOutput) {
				t.Fatalf("Sync = %v, want ErrInvalidOutput", err)
			}
			listed, err := e.dstAdm.ListGroups(kfaketest.Context(t))
			if err != nil {
				t.Fatal(err)
			}
			if len(listed) != 0 {
				t.Fatalf("destination groups %v after a failed filter, want none", listed.Groups())
			}
			v, ok, err := e.metrics.Value("kmirror_consumer_group_offset_sync_error_total", map[string]string{"mirror": "m1"})
			if err != nil || !ok || v != 1 {
				t.Fatalf("consumer group sync errors = %v (found %v, err %v), want 1", v, ok, err)
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
