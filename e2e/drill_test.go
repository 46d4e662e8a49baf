package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/batch"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// Disaster-recovery drills (issue #6) driven through the CLI and the admin
// API of a running daemon, on real brokers: A is the shared source cluster,
// B the shared destination.

// writeLoad writes rounds of plain records and transactions (every fourth
// aborted) over every partition of topic on c, with keys tagged by tag.
func writeLoad(t testing.TB, ctx context.Context, c *kafkatest.Cluster, topic, tag string, rounds int) {
	t.Helper()
	plain := newClient(t, c, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	txn := newClient(t, c, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-"+tag+"-txn"))
	for r := 0; r < rounds; r++ {
		var recs []*kgo.Record
		for i := 0; i < 20; i++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "%s-p-%d-%d", tag, r, i), Value: fmt.Appendf(nil, "plain %s %d %d", tag, r, i),
				Headers: []kgo.RecordHeader{{Key: "tag", Value: []byte(tag)}}})
		}
		produceSync(t, ctx, plain, recs...)
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		recs = recs[:0]
		for i := 0; i < 10; i++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "%s-t-%d-%d", tag, r, i), Value: fmt.Appendf(nil, "txn %s %d %d", tag, r, i)})
		}
		produceSync(t, ctx, txn, recs...)
		commit := kgo.TryCommit
		if r%4 == 3 {
			commit = kgo.TryAbort
		}
		if err := txn.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
}

// endOffsets returns the end offset of each partition of topic on c.
func endOffsets(t testing.TB, ctx context.Context, c *kafkatest.Cluster, topic string, partitions int32) []int64 {
	t.Helper()
	ends, err := superAdmin(t, c).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, partitions)
	for p := int32(0); p < partitions; p++ {
		o, ok := ends.Lookup(topic, p)
		if !ok || o.Err != nil {
			t.Fatalf("end offset of %s/%d: %v", topic, p, o.Err)
		}
		out[p] = o.Offset
	}
	return out
}

// identicalOn compares topic partition by partition, from (as the source)
// to to, offset by offset.
func identicalOn(t testing.TB, ctx context.Context, from, to *kafkatest.Cluster, topic string, partitions int32) {
	t.Helper()
	a, b := newClient(t, from, kafkatest.Identity{}), newClient(t, to, kafkatest.Identity{})
	for p := int32(0); p < partitions; p++ {
		_, diff, err := verify.Partition(ctx, a, b, topic, p)
		if err != nil {
			t.Fatalf("comparing %s/%d: %v", topic, p, err)
		}
		if diff != "" {
			t.Fatalf("%s/%d differs between %s and %s: %s", topic, p, from.Name(), to.Name(), diff)
		}
	}
}

// waitCopied waits until mirror has copied every partition of topic up to
// want (the next source offsets) and is MIRRORING.
func (d *daemon) waitCopied(ctx context.Context, name, topic string, want []int64) {
	d.t.Helper()
	for {
		var lag []string
		for p, w := range want {
			ps, ok := d.mirrorPartition(name, topic, int32(p))
			if !ok || ps.State != "MIRRORING" || ps.LastMirroredOffset+1 != w {
				lag = append(lag, fmt.Sprintf("%d: %s %d/%d %s", p, ps.State, ps.LastMirroredOffset+1, w, ps.LastError))
			}
		}
		if len(lag) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			d.t.Fatalf("mirror %s did not copy %s: %v", name, topic, lag)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// firstVisibleAtOrAfter returns the offset of the first record a
// read_committed consumer sees at or after offset from in log (-1: none).
func firstVisibleAtOrAfter(log *verify.Log, from int64) int64 {
	for _, e := range log.Entries {
		if e.Offset >= from && e.Visible && !e.Control {
			return e.Offset
		}
	}
	return -1
}

// TestFailoverAndFailbackRoundTripUnderLoad is the full drill: A→B under
// plain and transactional load with a consumer group; planned failover with
// --wait-for-catch-up; the group continues on B at exactly the next record;
// producers write to B; failback B→A copies only what B got after the
// failover, offsets identical; fail over to A; mirror A→B again. Every record
// is checked on both sides.
func TestFailoverAndFailbackRoundTripUnderLoad(t *testing.T) {
	ctx := testContext(t, 6*time.Minute)
	topic := topicName(t, "")
	const parts = 2
	createTopic(t, ctx, superAdmin(t, source), topic, parts, 3, nil)
	group := topic + "-app"
	d := startKmirror(t, regexp.QuoteMeta(topic), fmt.Sprintf("mirror.groups.include: %q", regexp.QuoteMeta(group)))

	writeLoad(t, ctx, source, topic, "a1", 12) // while kmirror mirrors
	// The application consumes part of the topic on A and commits.
	app := newClient(t, source, kafkatest.Identity{}, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit())
	seen, from := 0, map[int32]bool{}
	for seen < 150 || len(from) < parts {
		fs := app.PollRecords(ctx, 50)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { from[r.Partition] = true })
		seen += fs.NumRecords()
	}
	if err := app.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	app.Close()
	committed, err := superAdmin(t, source).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}

	// Planned failover: producers stopped, wait for zero lag.
	aEnds := endOffsets(t, ctx, source, topic, parts)
	code, out, errOut := d.cli("failover", "--yes", "--mirror", d.mirror, "--wait-for-catch-up", "90s", "--json")
	if code != 0 {
		t.Fatalf("failover: exit %d\n%s\n%s", code, out, errOut)
	}
	var fo admin.FailoverResult
	if err := json.Unmarshal([]byte(out), &fo); err != nil {
		t.Fatalf("failover --json: %v\n%s", err, out)
	}
	if len(fo.Topics) != 1 || len(fo.Topics[0].Partitions) != parts || !strings.Contains(strings.Join(fo.Groups, ","), group) {
		t.Fatalf("failover result %+v", fo)
	}
	for _, p := range fo.Topics[0].Partitions {
		if p.LastMirroredOffset != aEnds[p.Partition]-1 {
			t.Fatalf("partition %d: last mirrored offset %d, want %d (A's end - 1)", p.Partition, p.LastMirroredOffset, aEnds[p.Partition]-1)
		}
	}
	identicalOn(t, ctx, source, destination, topic, parts)

	// The group's offsets on B are those it committed on A (preserve mode).
	bOffsets, err := superAdmin(t, destination).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < parts; p++ {
		ca, _ := committed.Lookup(topic, p)
		cb, ok := bOffsets.Lookup(topic, p)
		if !ok || cb.At != ca.At {
			t.Fatalf("group %s on B at %s/%d: %+v (found %v), A committed %d", group, topic, p, cb, ok, ca.At)
		}
	}
	// A consumer of the group on B gets, on each partition, first the
	// record right after what the group committed on A.
	aLogs := make([]*verify.Log, parts)
	for p := int32(0); p < parts; p++ {
		if aLogs[p], err = verify.ReadLog(ctx, newClient(t, source, kafkatest.Identity{}), topic, p); err != nil {
			t.Fatal(err)
		}
	}
	onB := newClient(t, destination, kafkatest.Identity{}, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit())
	expect := 0 // partitions with records after the group's offset
	for p := int32(0); p < parts; p++ {
		ca, _ := committed.Lookup(topic, p)
		if firstVisibleAtOrAfter(aLogs[p], ca.At) >= 0 {
			expect++
		}
	}
	if expect == 0 {
		t.Fatal("the group consumed everything on A: nothing left to check on B (test premise)")
	}
	first := map[int32]*kgo.Record{}
	for len(first) < expect {
		fs := onB.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming on B: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if first[r.Partition] == nil {
				first[r.Partition] = r
			}
		})
	}
	onB.Close()
	for p := int32(0); p < parts; p++ {
		ca, _ := committed.Lookup(topic, p)
		want := firstVisibleAtOrAfter(aLogs[p], ca.At)
		r := first[p]
		if want < 0 {
			if r != nil {
				t.Fatalf("partition %d: the group read %d %s on B, but it had consumed everything on A", p, r.Offset, r.Key)
			}
			continue
		}
		var wantKey string
		for _, e := range aLogs[p].Entries {
			if e.Offset == want {
				wantKey = string(e.Key)
			}
		}
		if r.Offset != want || string(r.Key) != wantKey {
			t.Fatalf("partition %d: the group's first record on B is %d %s, want %d %s (right after its committed offset %d)", p, r.Offset, r.Key, want, wantKey, ca.At)
		}
	}

	// B is the primary: producers write there.
	writeLoad(t, ctx, destination, topic, "b1", 5)
	bEnds := endOffsets(t, ctx, destination, topic, parts)

	code, out, errOut = d.cli("failback", "--mirror", d.mirror, "--json")
	if code != 0 {
		t.Fatalf("failback: exit %d\n%s\n%s", code, out, errOut)
	}
	var fb admin.FailbackResult
	if err := json.Unmarshal([]byte(out), &fb); err != nil {
		t.Fatalf("failback --json: %v\n%s", err, out)
	}
	reverse := d.mirror + "-failback"
	if fb.Mirror != reverse || len(fb.Topics) != 1 {
		t.Fatalf("failback result %+v", fb)
	}
	for _, p := range fb.Topics[0].Partitions {
		if p.Action != admin.FailbackContinue || p.From != aEnds[p.Partition] {
			t.Fatalf("failback of partition %d: %+v, want continue from %d", p.Partition, p, aEnds[p.Partition])
		}
	}
	d.waitCopied(ctx, reverse, topic, bEnds)
	identicalOn(t, ctx, destination, source, topic, parts)
	// Only what B got after the failover was copied back.
	var want float64
	for p := range bEnds {
		want += float64(bEnds[p] - aEnds[p])
	}
	if got, ok := d.metric(fmt.Sprintf(`kmirror_mirrored_offsets_total{mirror=%q`, reverse)); !ok || got != want {
		t.Fatalf("the failback mirror copied %v offsets (found %v), want %v (only B's new records and markers)", got, ok, want)
	}
	// And exactly the bytes of B's batches after the failover point.
	var wantBytes float64
	bcl := newClient(t, destination, kafkatest.Identity{})
	for p := int32(0); p < parts; p++ {
		err := verify.Scan(ctx, bcl, topic, p, aEnds[p], bEnds[p], func(b batch.Batch) error {
			wantBytes += float64(len(b))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, ok := d.metric(fmt.Sprintf(`kmirror_mirrored_bytes_total{mirror=%q`, reverse)); !ok || got != wantBytes {
		t.Fatalf("the failback mirror appended %v bytes (found %v), want %v (B's batches after the failover)", got, ok, wantBytes)
	}

	// The application, now on B, consumes on and commits; group offsets
	// sync in the reverse direction too.
	onB = newClient(t, destination, kafkatest.Identity{}, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit())
	for n := 0; n < 40; {
		fs := onB.PollRecords(ctx, 40-n)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming on B: %v", err)
		}
		n += fs.NumRecords()
	}
	if err := onB.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	onB.Close()
	onBOffsets, err := superAdmin(t, destination).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}

	// Switch back: fail the reverse mirror over (A writable; its last group
	// sync carries the group's offsets from B to A), write to A, mirror A→B
	// again.
	code, out, errOut = d.cli("failover", "--yes", "--mirror", reverse, "--wait-for-catch-up", "90s", "--json")
	if code != 0 {
		t.Fatalf("failover of %s: exit %d\n%s\n%s", reverse, code, out, errOut)
	}
	var back admin.FailoverResult
	if err := json.Unmarshal([]byte(out), &back); err != nil || !strings.Contains(strings.Join(back.Groups, ","), group) {
		t.Fatalf("failover of %s: groups synced %s (%v)", reverse, out, err)
	}
	onA, err := superAdmin(t, source).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < parts; p++ {
		ob, okB := onBOffsets.Lookup(topic, p)
		oa, okA := onA.Lookup(topic, p)
		if okB != okA || ob.At != oa.At {
			t.Fatalf("group %s at %s/%d: %d on B (found %v), %d on A (found %v); the reverse sync should copy B's", group, topic, p, ob.At, okB, oa.At, okA)
		}
	}
	writeLoad(t, ctx, source, topic, "a2", 4)
	if code, out, errOut := d.cli("mirrors", "start", "--mirror", d.mirror, "--topics", regexp.QuoteMeta(topic)); code != 0 {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errOut)
	}
	d.waitCopied(ctx, d.mirror, topic, endOffsets(t, ctx, source, topic, parts))
	identicalOn(t, ctx, source, destination, topic, parts)
}

// TestUnplannedFailoverWithTheSourceClusterGone: a source transaction is
// open when the whole source cluster dies; after failover (no wait; the last
// group sync fails and is reported as a warning), a read_committed consumer
// on the destination is not blocked and sees no record of the open
// transaction.
func TestUnplannedFailoverWithTheSourceClusterGone(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	doomed, err := kafkatest.Start(ctx, kafkatest.Options{Name: "doomed", Brokers: 1})
	if err != nil {
		t.Fatalf("starting a private source cluster: %v", err)
	}
	defer doomed.Close()
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, doomed), topic, 1, 1, nil)
	plain := newClient(t, doomed, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	produceSync(t, ctx, plain, &kgo.Record{Key: []byte("before-1")}, &kgo.Record{Key: []byte("before-2")})
	txn := newClient(t, doomed, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-open"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, ctx, txn, &kgo.Record{Key: []byte("open-1")}, &kgo.Record{Key: []byte("open-2")})

	d := startKmirror(t, regexp.QuoteMeta(topic), "bootstrap.servers: "+doomed.BootstrapServers(kafkatest.Plaintext))
	d.waitCopied(ctx, d.mirror, topic, []int64{4})
	dadm := superAdmin(t, destination)
	if lso, err := dadm.ListCommittedOffsets(ctx, topic); err != nil {
		t.Fatal(err)
	} else if o, _ := lso.Lookup(topic, 0); o.Offset != 2 {
		t.Fatalf("destination last stable offset %d while the source transaction is open, want 2", o.Offset)
	}
	if err := doomed.KillBroker(0); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := d.cli("failover", "--yes", "--mirror", d.mirror, "--json")
	if code != 0 {
		t.Fatalf("failover with the source gone: exit %d\n%s\n%s", code, out, errOut)
	}
	var fo admin.FailoverResult
	if err := json.Unmarshal([]byte(out), &fo); err != nil {
		t.Fatal(err)
	}
	if len(fo.Topics) != 1 || fo.Topics[0].Partitions[0].LastMirroredOffset != 3 || len(fo.Warnings) == 0 {
		t.Fatalf("failover result %+v: want last mirrored offset 3 and a warning about the last group sync", fo)
	}
	hw, err1 := dadm.ListEndOffsets(ctx, topic)
	lso, err2 := dadm.ListCommittedOffsets(ctx, topic)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	h, _ := hw.Lookup(topic, 0)
	l, _ := lso.Lookup(topic, 0)
	if h.Offset != 5 || l.Offset != 5 {
		t.Fatalf("destination high watermark %d, last stable offset %d; want both 5 (the open transaction aborted at 4)", h.Offset, l.Offset)
	}
	recs := consumeExactly(t, ctx, destination, topic, true, 2)
	for _, r := range recs {
		if strings.HasPrefix(string(r.Key), "open") {
			t.Fatalf("read_committed consumer on the destination saw %s of the open transaction", r.Key)
		}
	}
}

// TestDivergentFailbackKeepsTheRecordsAndRecreatesOnlyWhenAllowed: records
// written to A after the last mirrored offset end up in the side topic;
// without --allow-recreate the partition is FAILED with a clear reason; with
// it, A ends identical to B.
func TestDivergentFailbackKeepsTheRecordsAndRecreatesOnlyWhenAllowed(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 1, 3, nil)
	writeLoad(t, ctx, source, topic, "a1", 3)
	d := startKmirror(t, regexp.QuoteMeta(topic))
	d.waitMirrored(ctx, topic, 1)
	if code, out, errOut := d.cli("failover", "--yes", "--mirror", d.mirror); code != 0 {
		t.Fatalf("failover: exit %d\n%s\n%s", code, out, errOut)
	}
	lost := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	produceSync(t, ctx, lost, &kgo.Record{Key: []byte("lost-1"), Value: []byte("x")}, &kgo.Record{Key: []byte("lost-2"), Value: []byte("y")})
	writeLoad(t, ctx, destination, topic, "b1", 2)

	code, out, errOut := d.cli("failback", "--mirror", d.mirror)
	if code != 1 || !strings.Contains(errOut, "1 partition(s) FAILED") || !strings.Contains(out, "--allow-recreate") {
		t.Fatalf("failback of a diverged partition: exit %d\n%s\n%s", code, out, errOut)
	}
	reverse := d.mirror + "-failback"
	for {
		ps, ok := d.mirrorPartition(reverse, topic, 0)
		if ok && ps.State == "FAILED" && ps.Retry == "NonRetryable" && strings.Contains(ps.LastError, topic+".kmirror-diverged") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the failback mirror's partition is not FAILED with the side topic named: %+v", ps)
		case <-time.After(250 * time.Millisecond):
		}
	}
	side := consumeExactly(t, ctx, source, topic+".kmirror-diverged", true, 2)
	if string(side[0].Key) != "lost-1" || string(side[1].Key) != "lost-2" {
		t.Fatalf("side topic holds %s, %s", side[0].Key, side[1].Key)
	}

	code, out, errOut = d.cli("failback", "--yes", "--mirror", d.mirror, "--allow-recreate", "--json")
	if code != 0 {
		t.Fatalf("failback --allow-recreate: exit %d\n%s\n%s", code, out, errOut)
	}
	var fb admin.FailbackResult
	if err := json.Unmarshal([]byte(out), &fb); err != nil || !fb.Topics[0].Recreated {
		t.Fatalf("failback --allow-recreate result %s (%v)", out, err)
	}
	d.waitCopied(ctx, reverse, topic, endOffsets(t, ctx, destination, topic, 1))
	identicalOn(t, ctx, destination, source, topic, 1)
}

// TestFailoverCompletesAfterTheDaemonIsKilledInTheMiddle: the daemon is
// killed with SIGKILL as soon as the failover is recorded in its state store;
// restarted, it completes the failover on its own (partitions STOPPED, the
// open transaction aborted), and repeating the command returns the result.
func TestFailoverCompletesAfterTheDaemonIsKilledInTheMiddle(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	topic := topicName(t, "")
	const parts = 6
	createTopic(t, ctx, superAdmin(t, source), topic, parts, 3, nil)
	writeLoad(t, ctx, source, topic, "a1", 3)
	var open []*kgo.Record
	for p := int32(0); p < parts; p++ {
		open = append(open, &kgo.Record{Key: []byte("open"), Partition: p})
	}
	manual := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic), kgo.TransactionalID(topic+"-open-m"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := manual.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(t, ctx, manual, open...)
	d := startKmirror(t, regexp.QuoteMeta(topic))
	d.waitMirrored(ctx, topic, parts)

	done := make(chan struct{})
	go func() { // owned by the test: ends when the CLI returns (the daemon dies under it).
		defer close(done)
		_, _, _ = d.cli("failover", "--yes", "--mirror", d.mirror)
	}()
	// The file store keeps key "mirrors/<m>/control" as data/mirrors%2F<m>%2Fcontrol.
	control := filepath.Join(d.stateDir, "data", "mirrors%2F"+d.mirror+"%2Fcontrol")
	for {
		if _, err := os.Stat(control); err == nil {
			break
		}
		matches, _ := filepath.Glob(filepath.Join(d.stateDir, "data", "*"))
		select {
		case <-ctx.Done():
			t.Fatalf("the failover was never recorded at %s (state dir holds %v)", control, matches)
		case <-time.After(5 * time.Millisecond):
		}
	}
	d.stop(syscall.SIGKILL)
	<-done

	d.start()
	for p := int32(0); p < parts; p++ {
		d.waitState(ctx, topic, p, "STOPPED")
	}
	adm := superAdmin(t, destination)
	hw, err1 := adm.ListEndOffsets(ctx, topic)
	lso, err2 := adm.ListCommittedOffsets(ctx, topic)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	for p := int32(0); p < parts; p++ {
		h, _ := hw.Lookup(topic, p)
		l, _ := lso.Lookup(topic, p)
		if h.Offset != l.Offset {
			t.Fatalf("partition %d: high watermark %d, last stable offset %d: a transaction hangs", p, h.Offset, l.Offset)
		}
	}
	code, out, errOut := d.cli("failover", "--yes", "--mirror", d.mirror, "--json")
	var fo admin.FailoverResult
	if code != 0 || json.Unmarshal([]byte(out), &fo) != nil || len(fo.Topics) != 1 || len(fo.Topics[0].Partitions) != parts {
		t.Fatalf("repeated failover: exit %d\n%s\n%s", code, out, errOut)
	}
	srcEnds, err := superAdmin(t, source).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range fo.Topics[0].Partitions {
		o, _ := srcEnds.Lookup(topic, p.Partition)
		if p.LastMirroredOffset != o.Offset-1 {
			t.Fatalf("partition %d: last mirrored offset %d, source end %d", p.Partition, p.LastMirroredOffset, o.Offset)
		}
	}
	_ = manual.EndTransaction(context.Background(), kgo.TryAbort)
}
