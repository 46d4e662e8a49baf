package topicsync

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/kfaketest"
)

func TestNewRejectsMissingOptions(t *testing.T) {
	t.Parallel()
	_, err := New(Options{Mirror: "m1"})
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "Source, Destination, Filter, InScope, Engine") {
		t.Fatalf("New without options: %v, want ErrInvalidOptions naming every missing one", err)
	}
}

// A round creates every in-scope source topic missing on the destination
// with the source's partition count and configs minus
// mirror.topic.properties.exclude, hands each to Engine.Start with its
// partition count, and leaves excluded topics alone; a second round
// creates nothing.
func TestSyncCreatesInScopeTopicsWithSourceConfigsMinusExcludedAndStartsThem(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "orders-eu", 3, map[string]*string{"retention.ms": kadm.StringPtr("86400000"), "min.insync.replicas": kadm.StringPtr("1"), "cleanup.policy": kadm.StringPtr("compact")})
	kfaketest.CreateTopic(t, f.srcCl, "orders.tmp-1", 1, nil)
	kfaketest.CreateTopic(t, f.srcCl, "payments", 2, nil)
	kfaketest.CreateTopic(t, f.srcCl, "other", 1, nil)
	s, eng := newSyncer(t, f, nil, `orders.*,payments`, `orders\.tmp.*`, "min.insync.replicas")
	ctx := context.Background()

	rep, err := s.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"orders-eu", "payments"}; !reflect.DeepEqual(rep.Created, want) || !reflect.DeepEqual(rep.Ready, want) {
		t.Fatalf("report %+v, want %v created and ready", rep, want)
	}
	if want := map[string]int32{"orders-eu": 3, "payments": 2}; !reflect.DeepEqual(eng.started, want) {
		t.Fatalf("started %v, want %v", eng.started, want)
	}
	if got, want := dynamicConfigs(t, f.dstCl, "orders-eu"), map[string]string{"retention.ms": "86400000", "cleanup.policy": "compact"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("destination configs of orders-eu = %v, want %v (min.insync.replicas is excluded)", got, want)
	}
	for _, topic := range []string{"orders.tmp-1", "other"} {
		if n := partitionCount(t, f.dstCl, topic); n != 0 {
			t.Fatalf("out-of-scope topic %s exists on the destination with %d partitions", topic, n)
		}
	}
	rep, err = s.Sync(ctx)
	if err != nil || len(rep.Created) != 0 || len(rep.Expanded) != 0 || len(rep.Ready) != 2 {
		t.Fatalf("second round: %+v, %v; want nothing created, both topics ready", rep, err)
	}
}

// A destination topic deleted under the mirror after its partitions copied
// records is not created again: the round tells the engine (which fails
// the partitions) and does not start them; a missing topic whose
// partitions copied nothing is created as before; and once the engine no
// longer has anything written (an operator's reset), the topic is created
// again.
func TestSyncDoesNotRecreateADestinationTopicDeletedUnderTheMirror(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "orders", 2, nil)
	kfaketest.CreateTopic(t, f.srcCl, "fresh", 1, nil)
	s, eng := newSyncer(t, f, nil, `orders,fresh`, "", "")
	ctx := context.Background()
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	deleteTopic(t, f.dstCl, "orders")
	deleteTopic(t, f.dstCl, "fresh")
	kfaketest.WaitFor(t, "the client's metadata without the deleted topics", func() (bool, string) {
		return partitionCount(t, f.dstCl, "orders") == 0 && partitionCount(t, f.dstCl, "fresh") == 0, ""
	})
	eng.mu.Lock()
	eng.written["orders"] = true
	delete(eng.started, "orders")
	delete(eng.started, "fresh")
	eng.mu.Unlock()

	for round := 1; round <= 2; round++ {
		rep, err := s.Sync(ctx)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !reflect.DeepEqual(rep.DestinationDeleted, []string{"orders"}) || slices.Contains(rep.Created, "orders") || slices.Contains(rep.Ready, "orders") {
			t.Fatalf("round %d: report %+v; want orders deleted, neither created nor ready", round, rep)
		}
		if n := partitionCount(t, f.dstCl, "orders"); n != 0 {
			t.Fatalf("round %d: the deleted destination topic orders was created again with %d partitions", round, n)
		}
		if round == 1 && !reflect.DeepEqual(rep.Created, []string{"fresh"}) {
			t.Fatalf("round 1: created %v; want fresh (nothing copied into it) created again", rep.Created)
		}
	}
	eng.mu.Lock()
	if !reflect.DeepEqual(eng.destGone, []string{"orders", "orders"}) {
		t.Fatalf("DestinationDeleted calls %v, want orders once per round", eng.destGone)
	}
	if _, ok := eng.started["orders"]; ok {
		t.Fatalf("orders was handed to Start: %v", eng.started)
	}
	eng.written["orders"] = false // an operator reset its partitions
	eng.mu.Unlock()
	rep, err := s.Sync(ctx)
	if err != nil || !reflect.DeepEqual(rep.Created, []string{"orders"}) || partitionCount(t, f.dstCl, "orders") != 2 {
		t.Fatalf("after the reset: %+v, %v; want orders created with 2 partitions", rep, err)
	}
}

// A source topic that grows is expanded on the destination, and its new
// partitions are handed to Engine.Start.
func TestSyncExpandsPartitionsToTheSourcesCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "grow", 1, nil)
	s, eng := newSyncer(t, f, nil, "grow", "", "")
	ctx := context.Background()
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(f.srcCl).UpdatePartitions(ctx, 3, "grow"); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Expanded, []string{"grow"}) || eng.started["grow"] != 3 {
		t.Fatalf("report %+v, started %v; want grow expanded and 3 partitions started", rep, eng.started)
	}
	if n := partitionCount(t, f.dstCl, "grow"); n != 3 {
		t.Fatalf("destination has %d partitions, want 3", n)
	}
}

// A topic another mirror claimed is neither created nor started, and the
// round's error names the topic and both mirrors; a topic an operator
// stopped is neither created nor started, without an error.
func TestSyncLeavesTopicsClaimedElsewhereOrStoppedByAnOperatorAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "shared", 1, nil)
	kfaketest.CreateTopic(t, f.srcCl, "held", 1, nil)
	kfaketest.CreateTopic(t, f.srcCl, "mine", 1, nil)
	s, eng := newSyncer(t, f, nil, ".*", "", "")
	eng.claims["shared"] = "second"
	eng.stoppedBy["held"] = true
	rep, err := s.Sync(context.Background())
	if err == nil {
		t.Fatal("no error for a topic claimed by another mirror")
	}
	for _, want := range []string{"shared", "mirror test", "mirror second"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "held") {
		t.Fatalf("error %q names the stopped topic", err)
	}
	if !reflect.DeepEqual(rep.Ready, []string{"mine"}) || !reflect.DeepEqual(eng.started, map[string]int32{"mine": 1}) {
		t.Fatalf("report %+v, started %v; want only mine", rep, eng.started)
	}
	for _, topic := range []string{"shared", "held"} {
		if n := partitionCount(t, f.dstCl, topic); n != 0 {
			t.Fatalf("%s was created on the destination", topic)
		}
	}
}

// The partitions of a topic deleted on the source, and of one that left the
// mirror's scope, are handed to Engine.Stop with the reason; a known topic
// still on the source and in scope is not.
func TestSyncStopsTopicsDeletedOnTheSourceOrOutOfScope(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "orders", 1, nil)
	kfaketest.CreateTopic(t, f.srcCl, "gone", 1, nil)
	kfaketest.CreateTopic(t, f.srcCl, "old", 1, nil)
	s, eng := newSyncer(t, f, nil, "orders,gone", "", "")
	ctx := context.Background()
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	deleteTopic(t, f.srcCl, "gone")
	eng.recorded = []string{"old"} // a previous configuration mirrored it
	rep, err := s.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"gone": ReasonDeleted, "old": ReasonOutOfScope}
	if !reflect.DeepEqual(eng.stops, want) || !reflect.DeepEqual(rep.Stopped, want) {
		t.Fatalf("stops %v, report %v; want %v", eng.stops, rep.Stopped, want)
	}
	if n := partitionCount(t, f.dstCl, "gone"); n != 1 {
		t.Fatalf("destination topic gone has %d partitions, want it kept", n)
	}
}

// A topic the mirror knows that the all-topics listing omits, but that
// the source answers another error than UNKNOWN_TOPIC_OR_PARTITION for when
// asked by name (TOPIC_AUTHORIZATION_FAILED: an authorizer hides it), is not
// taken as deleted.
func TestSyncDoesNotStopATopicTheSourceOnlyHides(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s, eng := newSyncer(t, f, nil, "hidden", "", "")
	eng.recorded = []string{"hidden"}
	asked := false
	f.src.ControlKey(kmsg.Metadata.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.MetadataRequest)
		if len(req.Topics) != 1 || req.Topics[0].Topic == nil || *req.Topics[0].Topic != "hidden" {
			return nil, nil, false
		}
		f.src.KeepControl()
		asked = true
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		st := kmsg.NewMetadataResponseTopic()
		st.Topic, st.ErrorCode = req.Topics[0].Topic, kerr.TopicAuthorizationFailed.Code
		resp.Topics = append(resp.Topics, st)
		return resp, nil, true
	})
	rep, err := s.Sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !asked {
		t.Fatal("the source was not asked for the missing topic by name")
	}
	if len(eng.stops) != 0 || len(rep.Stopped) != 0 {
		t.Fatalf("stops %v for a topic the source only hides", eng.stops)
	}
}

// A source topic deleted and created again under its name has a new topic
// id: its running partitions are told so, it is not started again, and its
// configs are no longer synced.
func TestSyncTellsTheRunningPartitionsOfARecreatedTopic(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "again", 2, nil)
	s, eng := newSyncer(t, f, nil, "again", "", "")
	ctx := context.Background()
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	deleteTopic(t, f.srcCl, "again")
	kfaketest.CreateTopic(t, f.srcCl, "again", 3, map[string]*string{"retention.ms": kadm.StringPtr("1000")})
	req := kmsg.NewPtrMetadataRequest() // asks a broker: kadm would answer from the client's cache
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("again")
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, f.srcCl)
	if err != nil {
		t.Fatal(err)
	}
	newID := resp.Topics[0].TopicID
	eng.started = map[string]int32{}
	rep, err := s.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Recreated, []string{"again"}) || len(eng.recreated) != 2 || len(rep.Ready) != 0 || len(eng.started) != 0 {
		t.Fatalf("report %+v, recreated %v, started %v; want both running partitions told and nothing started", rep, eng.recreated, eng.started)
	}
	for _, r := range eng.recreated {
		if r.Topic != "again" || r.TopicID != newID {
			t.Fatalf("recreated %+v, want topic again with the new id %x", r, newID)
		}
	}
	if n := partitionCount(t, f.dstCl, "again"); n != 2 {
		t.Fatalf("destination has %d partitions, want 2: the new topic's third is not added", n)
	}
	crep, err := s.SyncConfigs(ctx)
	if err != nil || crep.Changed != 0 {
		t.Fatalf("config round %+v, %v; want nothing changed for a recreated topic", crep, err)
	}
	if _, ok := dynamicConfigs(t, f.dstCl, "again")["retention.ms"]; ok {
		t.Fatal("a config of the recreated source topic reached the destination")
	}
}

// When kmirror may not write the first topic it starts, the round ends
// there: no later topic is created on the destination or started.
func TestSyncStopsAtTheFirstTopicKmirrorCannotWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "a-first", 1, nil)
	kfaketest.CreateTopic(t, f.srcCl, "b-second", 1, nil)
	s, eng := newSyncer(t, f, nil, ".*", "", "")
	eng.startErr["a-first"] = fmt.Errorf("mirror test: %w: User:bob may not write", ErrCannotWrite)
	rep, err := s.Sync(context.Background())
	if !errors.Is(err, ErrCannotWrite) {
		t.Fatalf("error %v, want ErrCannotWrite", err)
	}
	if n := partitionCount(t, f.dstCl, "b-second"); n != 0 || len(eng.started) != 0 {
		t.Fatalf("b-second has %d destination partitions, started %v; want nothing after the failed write check", n, eng.started)
	}
	if !reflect.DeepEqual(rep.Created, []string{"a-first"}) {
		t.Fatalf("created %v, want only a-first", rep.Created)
	}
}

// A config round copies source changes to the topics the mirror owns,
// never excluded keys, deletes what the source no longer sets, and reports
// each key the destination rejects, by topic and key, while the others
// sync.
func TestSyncConfigsAppliesChangesAndReportsRejectedKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	kfaketest.CreateTopic(t, f.srcCl, "conf", 1, map[string]*string{"retention.ms": kadm.StringPtr("1000")})
	kfaketest.CreateTopic(t, f.srcCl, "theirs", 1, map[string]*string{"retention.ms": kadm.StringPtr("1000")})
	kfaketest.CreateTopic(t, f.dstCl, "conf", 1, map[string]*string{"segment.bytes": kadm.StringPtr("1048576")})
	kfaketest.CreateTopic(t, f.dstCl, "theirs", 1, nil)
	f.dst.ControlKey(kmsg.IncrementalAlterConfigs.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		f.dst.KeepControl()
		req := kr.(*kmsg.IncrementalAlterConfigsRequest)
		for _, r := range req.Resources {
			for _, c := range r.Configs {
				if c.Name == "cleanup.policy" {
					resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
					rr := kmsg.NewIncrementalAlterConfigsResponseResource()
					rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
					rr.ErrorCode = kerr.PolicyViolation.Code
					resp.Resources = append(resp.Resources, rr)
					return resp, nil, true
				}
			}
		}
		return nil, nil, false
	})
	s, eng := newSyncer(t, f, nil, ".*", "", "min.insync.replicas")
	eng.claims["conf"], eng.claims["theirs"] = "test", "second"
	if _, err := kadm.NewClient(f.srcCl).AlterTopicConfigs(context.Background(), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
		{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: kadm.StringPtr("1")},
	}, "conf"); err != nil {
		t.Fatal(err)
	}
	rep, err := s.SyncConfigs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changed != 2 || rep.Rejected != 1 || len(rep.Errors) != 1 {
		t.Fatalf("report %+v, want 2 changed (retention.ms set, segment.bytes deleted) and cleanup.policy rejected", rep)
	}
	if e := rep.Errors[0]; e.Topic != "conf" || e.Key != "cleanup.policy" || !strings.Contains(e.Error, "POLICY_VIOLATION") || !strings.Contains(e.Error, "mirror.topic.properties.exclude") {
		t.Fatalf("config error %+v", e)
	}
	if got, want := dynamicConfigs(t, f.dstCl, "conf"), map[string]string{"retention.ms": "1000"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("destination configs of conf = %v, want %v", got, want)
	}
	if got := dynamicConfigs(t, f.dstCl, "theirs"); len(got) != 0 {
		t.Fatalf("configs %v synced to a topic another mirror owns", got)
	}
}

// A topic with more partitions than one request may create (KRaft refuses
// more than 10,000 metadata records per operation) is created with
// MaxPartitionsPerRequest and grown in steps of as many; so is an
// expansion.
//
// Not parallel: it lowers the package variable MaxPartitionsPerRequest,
// which the other tests read. Go runs it to the end, restoring the
// variable, before the parallel tests resume.
func TestSyncCreatesAndExpandsLargeTopicsInSteps(t *testing.T) {
	defer func(n int32) { MaxPartitionsPerRequest = n }(MaxPartitionsPerRequest)
	MaxPartitionsPerRequest = 4
	f := newFixture(t)
	var mu sync.Mutex
	var steps []string
	f.dst.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.dst.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		for _, rt := range req.(*kmsg.CreateTopicsRequest).Topics {
			steps = append(steps, fmt.Sprintf("create %d", rt.NumPartitions))
		}
		return nil, nil, false
	})
	f.dst.ControlKey(int16(kmsg.CreatePartitions), func(req kmsg.Request) (kmsg.Response, error, bool) {
		f.dst.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		for _, rt := range req.(*kmsg.CreatePartitionsRequest).Topics {
			steps = append(steps, fmt.Sprintf("grow to %d", rt.Count))
		}
		return nil, nil, false
	})
	kfaketest.CreateTopic(t, f.srcCl, "big", 10, nil)
	s, eng := newSyncer(t, f, nil, "big", "", "")
	ctx := context.Background()
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := partitionCount(t, f.dstCl, "big"); n != 10 || eng.started["big"] != 10 {
		t.Fatalf("destination has %d partitions, %d started; want 10", n, eng.started["big"])
	}
	if _, err := kadm.NewClient(f.srcCl).UpdatePartitions(ctx, 15, "big"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := partitionCount(t, f.dstCl, "big"); n != 15 || eng.started["big"] != 15 {
		t.Fatalf("destination has %d partitions, %d started; want 15", n, eng.started["big"])
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := strings.Join(steps, ", "), "create 4, grow to 8, grow to 10, grow to 14, grow to 15"; got != want {
		t.Fatalf("requests: %s; want %s", got, want)
	}
}

// A destination that never answers whether the new partitions serve (a
// broker out of file descriptors leaves the client retrying) does not hold
// the topic up: after ReadyWait its partitions start, and fail on their own
// with the reason.
func TestANewTopicThatNeverServesStillStartsAfterReadyWait(t *testing.T) {
	defer func(d time.Duration) { ReadyWait = d }(ReadyWait)
	ReadyWait = 300 * time.Millisecond
	f := newFixture(t)
	release := make(chan struct{})
	defer close(release)
	f.dst.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
		f.dst.KeepControl()
		f.dst.SleepControl(func() { <-release })
		return nil, nil, false
	})
	kfaketest.CreateTopic(t, f.srcCl, "stuck", 3, nil)
	s, eng := newSyncer(t, f, nil, "stuck", "", "")
	done := make(chan error, 1)
	go func() { _, err := s.Sync(context.Background()); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Sync still waits for the new partitions to serve after 20 s (ReadyWait is 300 ms)")
	}
	if eng.started["stuck"] != 3 {
		t.Fatalf("%d partitions started, want 3", eng.started["stuck"])
	}
}
