package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/internal/kfaketest"
)

// TestOperatorDrillThroughTheCLI runs `kmirror run` against two in-process
// clusters and drives the real engine from the command line: pause, resume,
// a refused call with a wrong token, and a planned failover whose printed
// last mirrored offsets are the source's.
func TestOperatorDrillThroughTheCLI(t *testing.T) {
	t.Parallel()
	src, dst := kfaketest.NewCluster(t), kfaketest.NewCluster(t)
	cl := kfaketest.NewClient(t, src, kgo.DefaultProduceTopic("orders"))
	ctx := context.Background()
	kfaketest.CreateTopic(t, cl, "orders", 2, nil)
	produce := func(n int) {
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(30)

	stateDir := t.TempDir()
	cfgPath := writeFile(t, "kmirror.yaml", fmt.Sprintf(`log.format: json
http.address: 127.0.0.1:0
admin.address: 127.0.0.1:0
mirror.metadata.refresh.interval.ms: 500
shutdown.timeout.ms: 10000
destination:
  bootstrap.servers: %s
state:
  dir: %s
mirrors:
  - name: drill
    bootstrap.servers: %s
    mirror.topics.include: orders
`, strings.Join(dst.ListenAddrs(), ","), stateDir, strings.Join(src.ListenAddrs(), ",")))
	d := startRun(t, cfgPath)
	line := d.waitLog(t, "admin API listening")
	addr, _ := line["address"].(string)
	// --config supplies the token (in state.dir); --admin-address the
	// bound port, since the file says :0.
	cli := func(args ...string) (int, string, string) {
		return kmirror(t, nil, append(args, "--config", cfgPath, "--admin-address", addr)...)
	}
	describe := func() map[int32]admin.PartitionStatus {
		t.Helper()
		code, out, errOut := cli("mirrors", "describe", "--mirror", "drill", "--json")
		if code != exitOK {
			t.Fatalf("describe: exit %d\n%s", code, errOut)
		}
		var desc struct {
			Partitions []admin.PartitionStatus `json:"partitions"`
		}
		if err := json.Unmarshal([]byte(out), &desc); err != nil {
			t.Fatalf("describe --json: %v\n%s", err, out)
		}
		ps := map[int32]admin.PartitionStatus{}
		for _, p := range desc.Partitions {
			ps[p.Partition] = p
		}
		return ps
	}
	ends := func() map[int32]int64 {
		t.Helper()
		lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		lo.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return out
	}
	// waitFor polls describe until every partition is in state and, when
	// caughtUp, has mirrored up to the source's end offset.
	waitFor := func(state string, caughtUp bool) map[int32]admin.PartitionStatus {
		t.Helper()
		var ps map[int32]admin.PartitionStatus
		kfaketest.WaitFor(t, "partitions "+state, func() (bool, string) {
			var end map[int32]int64
			ps, end = describe(), ends()
			ok := len(ps) == 2
			for p, st := range ps {
				if st.State != state || (caughtUp && st.LastMirroredOffset+1 != end[p]) {
					ok = false
				}
			}
			return ok, fmt.Sprintf("%+v (source ends %v)\n%s", ps, end, tail(d.log(), 40))
		})
		return ps
	}
	waitFor("MIRRORING", true)

	code, out, errOut := cli("mirrors", "pause", "--mirror", "drill", "--topics", "ord.*")
	if code != exitOK {
		t.Fatalf("pause: exit %d\n%s%s", code, out, errOut)
	}
	paused := waitFor("PAUSED", false)
	produce(10) // written while paused: not mirrored until resume
	// Gives the mirror the time it would need to copy them (two metadata
	// refresh intervals), which must not happen: nothing happening has no
	// event to wait for.
	time.Sleep(time.Second)
	for p, st := range describe() {
		if st.State != "PAUSED" || st.LastMirroredOffset != paused[p].LastMirroredOffset {
			t.Fatalf("partition %d moved while paused: %+v", p, st)
		}
	}

	// A wrong token is refused and changes nothing.
	wrong := writeFile(t, "wrong.token", "0123456789abcdef\n")
	code, _, errOut = kmirror(t, nil, "mirrors", "resume", "--mirror", "drill", "--admin-address", addr, "--token-file", wrong)
	if code != exitUnauthorized || !strings.Contains(errOut, "401") {
		t.Fatalf("resume with a wrong token: exit %d\n%s", code, errOut)
	}
	// Gives a resume wrongly accepted the time to take effect: nothing
	// happening has no event to wait for.
	time.Sleep(500 * time.Millisecond)
	for p, st := range describe() {
		if st.State != "PAUSED" {
			t.Fatalf("partition %d is %s after a refused resume", p, st.State)
		}
	}

	if code, out, errOut = cli("mirrors", "resume", "--mirror", "drill"); code != exitOK {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	waitFor("MIRRORING", true)

	code, out, errOut = cli("failover", "--mirror", "drill", "--wait-for-catch-up", "30s", "--json", "--yes")
	if code != exitOK {
		t.Fatalf("failover: exit %d\n%s%s\n%s", code, out, errOut, tail(d.log(), 40))
	}
	var res admin.FailoverResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("failover --json: %v\n%s", err, out)
	}
	end := ends()
	if len(res.Topics) != 1 || res.Topics[0].Topic != "orders" || len(res.Topics[0].Partitions) != 2 {
		t.Fatalf("failover result: %s", out)
	}
	for _, p := range res.Topics[0].Partitions {
		if p.LastMirroredOffset+1 != end[p.Partition] {
			t.Errorf("partition %d: last mirrored offset %d, source end %d", p.Partition, p.LastMirroredOffset, end[p.Partition])
		}
	}
	waitFor("STOPPED", false)
	// Repeating the failover is harmless (operations are idempotent).
	if code, out, errOut = cli("failover", "--mirror", "drill", "--yes"); code != exitOK || !strings.Contains(out, "orders") {
		t.Fatalf("repeated failover: exit %d\n%s%s", code, out, errOut)
	}
	if tok, err := filepath.Glob(filepath.Join(stateDir, "admin.token")); err != nil || len(tok) != 1 {
		t.Fatalf("no admin token in state.dir: %v %v", tok, err)
	}
	if !strings.Contains(d.log(), `"caller":"token"`) {
		t.Errorf("the daemon's log lacks the admin calls' caller:\n%s", tail(d.log(), 20))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
