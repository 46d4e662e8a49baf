package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// TestPipelinedAppendsKeepOffsetsThroughLeaderChangesAndKills: a backlog of
// small batches (plain and transactional) is mirrored with several appends
// in flight per partition while the destination partition leader is killed,
// then shut down in a controlled way (NOT_LEADER_OR_FOLLOWER answers to
// appends in flight), and kmirror itself is killed (SIGKILL) in the middle of
// its pipelines. Every partition ends identical to the source, offset by
// offset, with the same transactional visibility: nothing duplicated, nothing
// lost, no offset moved — unless the destination wrote a transaction marker
// twice (its coordinator failed over): then the partition says so (map mode,
// or FAILED with the offset mismatch) and is the source's copy up to there.
//
// The mirror runs from the one-broker cluster to the three-broker one, whose
// partition leaders can move.
func TestPipelinedAppendsKeepOffsetsThroughLeaderChangesAndKills(t *testing.T) {
	ctx := testContext(t, 6*time.Minute)
	from, to := destination, source
	topic := topicName(t, "")
	const partitions = 2
	createTopic(t, ctx, superAdmin(t, from), topic, partitions, 1, nil)
	toAdm := superAdmin(t, to)
	minISR := "2"
	createTopic(t, ctx, toAdm, topic, partitions, 3, map[string]*string{"min.insync.replicas": &minISR})

	// The backlog: small batches (4 KiB at most) of two plain producers
	// and a transactional one, interleaved.
	load := func(tag string, rounds int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 3)
		for i := range 2 {
			wg.Go(func() {
				cl, err := from.NewClient(kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(4096), kgo.ProducerLinger(0))
				if err != nil {
					errs <- err
					return
				}
				defer cl.Close()
				for n := range rounds * 200 {
					cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "%s-p%d-%d", tag, i, n), Value: make([]byte, 180)}, func(_ *kgo.Record, err error) {
						if err != nil {
							select {
							case errs <- err:
							default:
							}
						}
					})
				}
				if err := cl.Flush(ctx); err != nil {
					errs <- err
				}
			})
		}
		wg.Go(func() {
			cl, err := from.NewClient(kafkatest.Identity{}, kgo.TransactionalID(topic+"-"+tag+"-tx"), kgo.DefaultProduceTopic(topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			for n := range rounds * 4 {
				if err := cl.BeginTransaction(); err != nil {
					errs <- err
					return
				}
				for k := range 6 { // one batch each
					rec := &kgo.Record{Partition: int32(k % partitions), Key: fmt.Appendf(nil, "%s-tx%d-%d", tag, n, k), Value: make([]byte, 100)}
					if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
						errs <- err
						return
					}
				}
				if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(n%3 != 0)); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("producing to the source: %v", err)
		}
	}
	load("backlog", 60)

	d := startKmirrorWith(t, topic, []string{"destination:\n  bootstrap.servers: " + to.BootstrapServers(kafkatest.Plaintext)},
		"bootstrap.servers: "+from.BootstrapServers(kafkatest.Plaintext))
	more := make(chan struct{})
	go func() { // owned by the test: it waits on more below.
		defer close(more)
		load("live", 20)
	}()

	leaderOf := func() int32 {
		t.Helper()
		leader, _ := partitionState(t, ctx, toAdm, topic)
		return leader
	}
	waitAppending := func() {
		t.Helper()
		for {
			if ps, ok := d.partitionStatus(topic, 0); ok && ps.State == "MIRRORING" && ps.LastMirroredOffset > 0 {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatal("partition 0 never started mirroring")
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	waitAppending()
	// The destination leader dies with appends in flight.
	killed := leaderOf()
	if err := to.KillBroker(int(killed)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := to.RestartBroker(ctx, int(killed)); err != nil {
		t.Fatal(err)
	}
	waitFullISR(t, ctx, toAdm, topic)
	// kmirror dies in the middle of its pipelines.
	d.stop(syscall.SIGKILL)
	d.start()
	waitAppending()
	// The destination leader shuts down in a controlled way: appends in
	// flight are answered NOT_LEADER_OR_FOLLOWER.
	stopped := leaderOf()
	if err := to.StopBroker(int(stopped)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := to.RestartBroker(ctx, int(stopped)); err != nil {
		t.Fatal(err)
	}
	waitFullISR(t, ctx, toAdm, topic)
	<-more

	// A destination broker restarted while its transaction coordinator
	// was writing markers may write one twice (Kafka rewrites the markers
	// after a coordinator failover). Seen while the marker is replayed, the
	// partition goes on in map mode (checked through its offset map); seen
	// after it, by the next append landing one offset later, the partition
	// fails with an offset mismatch (checked below: the one difference is
	// that extra marker, and everything before it is the source's copy).
	failedAt := waitCaughtUpOrMismatched(t, ctx, d, from, topic, partitions)
	remapped := map[int32]bool{}
	for p := range int32(partitions) {
		ps, _ := d.partitionStatus(topic, p)
		if _, failed := failedAt[p]; !failed && ps.Mode == "map" {
			if notes := strings.Join(ps.Notes, "; "); !strings.Contains(notes, "wrote the transaction marker") {
				t.Fatalf("%s[%d] in map mode for another reason: %q", topic, p, notes)
			}
			remapped[p] = true
		}
	}
	lg := d.log()
	d.stop(syscall.SIGTERM)
	src, dst := newClient(t, from, kafkatest.Identity{}), newClient(t, to, kafkatest.Identity{})
	for p := range int32(partitions) {
		srcLog, err := verify.ReadLog(ctx, src, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		dstLog, err := verify.ReadLog(ctx, dst, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		var diff string
		if at, failed := failedAt[p]; failed {
			t.Logf("%s[%d]: FAILED at destination offset %d (%s); checking that the one difference is a marker written twice", topic, p, at, "offset mismatch")
			diff = onlyAnExtraMarkerAt(srcLog, dstLog, at)
		} else if remapped[p] {
			t.Logf("%s[%d]: a marker was written twice by the destination; comparing through the offset map", topic, p)
			diff = verify.DiffMapped(srcLog, dstLog, storedPartitionMap(t, ctx, d, topic, p).Lookup)
		} else {
			diff = verify.Diff(srcLog, dstLog)
		}
		if diff != "" {
			t.Fatalf("%s[%d] differs between source and destination: %s", topic, p, diff)
		}
		if srcLog.HighWatermark < 10000 {
			t.Fatalf("%s[%d]: only %d offsets on the source (test premise: a large backlog)", topic, p, srcLog.HighWatermark)
		}
	}
	// Test premise: the leader changes reached appends (kmirror logs each
	// resent pipeline and each retried append at debug level).
	resent, retried := strings.Count(lg, "resending pipelined appends"), strings.Count(lg, "retrying append")
	t.Logf("pipelines resent %d times, appends retried %d times", resent, retried)
	if resent+retried == 0 {
		t.Fatal("no append was resent or retried: the leader changes did not reach the data path (test premise)")
	}
}

// waitCaughtUpOrMismatched waits until every partition of topic is either
// mirrored up to the source's end, or FAILED with an offset mismatch on an
// append (a marker the destination wrote twice after the replay returned);
// it returns the expected destination offset of each failed one.
func waitCaughtUpOrMismatched(t testing.TB, ctx context.Context, d *daemon, from *kafkatest.Cluster, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	adm := superAdmin(t, from)
	re := regexp.MustCompile(`batch appended at another offset: expected offset (\d+), got (\d+)`)
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		failed := map[int32]int64{}
		done := err == nil
		var lagging []string
		for p := int32(0); done && p < partitions; p++ {
			o, _ := ends.Lookup(topic, p)
			ps, ok := d.partitionStatus(topic, p)
			if ok && ps.State == "FAILED" {
				if m := re.FindStringSubmatch(ps.LastError); m != nil {
					at, _ := strconv.ParseInt(m[1], 10, 64)
					failed[p] = at
					continue
				}
			}
			if !ok || ps.State != "MIRRORING" || ps.LastMirroredOffset+1 != o.Offset {
				done = false
				lagging = append(lagging, fmt.Sprintf("%d: %s mirrored to %d of %d %s", p, ps.State, ps.LastMirroredOffset+1, o.Offset, ps.LastError))
			}
		}
		if done {
			return failed
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s not mirrored in time: %v", topic, lagging)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// onlyAnExtraMarkerAt checks a partition that failed at destination offset
// at: the destination is the source's copy below it, and what it holds at
// it is a marker the source does not have there. "" when so.
func onlyAnExtraMarkerAt(src, dst *verify.Log, at int64) string {
	for i, s := range src.Entries {
		if s.Offset >= at {
			break
		}
		if i >= len(dst.Entries) {
			return fmt.Sprintf("destination ends at entry %d, before offset %d", i, at)
		}
		if d := verify.DiffEntry(s, dst.Entries[i], true); d != "" {
			return "below the failure: " + d
		}
	}
	for _, e := range dst.Entries {
		if e.Offset == at {
			if !e.Control {
				return fmt.Sprintf("destination offset %d is a record, not a marker written twice", at)
			}
			return ""
		}
	}
	return fmt.Sprintf("destination has no entry at offset %d", at)
}
