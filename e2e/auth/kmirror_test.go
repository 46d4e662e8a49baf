package auth

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/verify"
	"github.com/kmirror/kmirror/e2e/kafkatest"
	"github.com/kmirror/kmirror/e2e/kmirrortest"
)

// kmirrorBinary is the kmirror binary of this checkout (e2e/kmirrortest).
var kmirrorBinary = kmirrortest.Binary

// daemon is one `kmirror run` process of a test (e2e/kmirrortest); the
// test's cleanup stops it.
type daemon struct{ p *kmirrortest.Process }

// startKmirror runs `kmirror run` on cfg, a configuration without the
// daemon-wide keys it adds (addresses, log format, retry timings, state).
func startKmirror(t testing.TB, cfg string) *daemon {
	t.Helper()
	return &daemon{kmirrortest.Start(t, kmirrortest.Options{
		Config: func(dir string) string {
			return fmt.Sprintf(`log.level: debug
log.format: json
mirror.metadata.refresh.interval.ms: 2000
mirror.failed.retry.initial.backoff.ms: 200
mirror.failed.retry.max.backoff.ms: 2000
shutdown.timeout.ms: 20000
state:
  dir: %s
`, filepath.Join(dir, "state")) + cfg
		},
		// The harness's Kerberos environment is not the daemon's: it
		// reads krb5.conf from its sasl.kerberos.krb5.conf key.
		DropEnv: []string{"KRB5"},
	})}
}

func (d *daemon) running() bool { return d.p.Running() }

func (d *daemon) log() string { return d.p.Log() }

// describe reads /v1/describe; ok is false while the daemon does not answer.
func (d *daemon) describe() (admin.Status, bool) { return d.p.Describe() }

// waitFor polls describe every 200 ms until ok says so, failing the test
// with what last said otherwise when ctx ends or the daemon exits.
func (d *daemon) waitFor(t testing.TB, ctx context.Context, what string, ok func(admin.Status) (bool, string)) admin.Status {
	t.Helper()
	last := "describe never answered"
	for {
		if st, answered := d.describe(); answered {
			var done bool
			if done, last = ok(st); done {
				return st
			}
		}
		if !d.running() {
			t.Fatalf("kmirror exited while waiting for %s:\n%s", what, tail(d.log(), 40))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not in time; last: %s", what, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitMirrored waits until every partition of topic is MIRRORING up to the
// source's end offset.
func (d *daemon) waitMirrored(t testing.TB, ctx context.Context, topic string, partitions int32) {
	t.Helper()
	adm := adminOf(t, source)
	d.waitFor(t, ctx, topic+" mirrored", func(st admin.Status) (bool, string) {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		var lagging []string
		for p := range partitions {
			end, _ := ends.Lookup(topic, p)
			ps, found := partitionStatus(st, topic, p)
			if !found || ps.State != "MIRRORING" || ps.LastMirroredOffset+1 != end.Offset {
				lagging = append(lagging, fmt.Sprintf("%d: %s mirrored to %d of %d %s", p, ps.State, ps.LastMirroredOffset+1, end.Offset, ps.LastError))
			}
		}
		return len(lagging) == 0, strings.Join(lagging, "; ")
	})
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

func adminOf(t testing.TB, c *kafkatest.Cluster) *kadm.Client {
	t.Helper()
	adm, err := c.Admin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.Close)
	return adm
}

// client is a harness client of c on its PLAINTEXT listener: the tests
// write and read with it, kmirror alone uses GSSAPI.
func client(t testing.TB, c *kafkatest.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := c.NewClient(kafkatest.Identity{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// verifyTopic compares every partition of topic on both clusters record by
// record (offsets, keys, values, headers, timestamps, transaction markers
// and visibility) and returns how many records the source holds.
func verifyTopic(t testing.TB, ctx context.Context, topic string, partitions int32) int {
	t.Helper()
	src, dst := client(t, source), client(t, destination)
	n := 0
	for p := range partitions {
		log, diff, err := verify.Partition(ctx, src, dst, topic, p)
		if err != nil {
			t.Fatalf("verifying %s[%d]: %v", topic, p, err)
		}
		if diff != "" {
			t.Fatalf("%s[%d] differs between the source and the destination: %s", topic, p, diff)
		}
		for _, e := range log.Entries {
			if !e.Control {
				n++
			}
		}
	}
	return n
}

var tail = kmirrortest.Tail
