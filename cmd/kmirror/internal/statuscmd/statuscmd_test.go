package statuscmd

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/livestatus"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// sample is a mirror with a FAILED partition, two catching up (one that
// does not move) and an unreachable destination.
func sample() livestatus.Live {
	at := time.Date(2026, 12, 1, 22, 30, 0, 0, time.UTC)
	return livestatus.Live{GeneratedAt: at, SampledAt: at.Add(-2 * time.Second), IntervalSeconds: 5, Mirrors: []livestatus.LiveMirror{{
		Name: "dc1", States: map[string]int{"MIRRORING": 6, "FAILED": 1, "PAUSED": 1}, Partitions: 8, LagTotal: 1_234_567, LagMax: 900_000,
		BytesPerSecond: 52_400_000, RecordsPerSecond: 51_200,
		Clusters: []admin.ClusterStatus{{Cluster: "source", Reachable: true, Since: at.Add(-time.Hour)}, {Cluster: "destination", Reachable: false, Since: at.Add(-30 * time.Second), LastError: "dial tcp 10.0.0.7:9092: connect: connection refused"}},
		Failed:   []livestatus.LivePartition{{Topic: "orders", Partition: 3, State: "FAILED", Retry: "NonRetryable", Reason: "mirror dc1: topic orders partition 3: batch appended at another offset: expected 12042, got 12043", Progress: -1, ETASeconds: -1}},
		CatchingUp: []livestatus.LivePartition{
			{Topic: "orders", Partition: 0, State: "MIRRORING", Lag: 900_000, Progress: 0.25, RecordsPerSecond: 40_000, ETASeconds: 22.5},
			{Topic: "payments-with-a-long-name", Partition: 11, State: "MIRRORING", Lag: 334_567, Progress: 0.9, RecordsPerSecond: 0, ETASeconds: -1},
		},
	}, {Name: "dc2", States: map[string]int{"MIRRORING": 2}, Partitions: 2}}}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// TestRenderPlainAndTerminal: golden output for a pipe (plain text, ASCII
// bars) and for a terminal (colour, block bars); FAILED partitions and
// their reasons come before the partitions catching up.
func TestRenderPlainAndTerminal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		style Style
	}{{"plain.golden", Style{}}, {"terminal.golden", Style{Terminal: true, Width: 100}}} {
		var b bytes.Buffer
		Render(&b, sample(), c.style)
		golden(t, c.name, b.Bytes())
		out := b.String()
		if strings.Index(out, "FAILED (1)") > strings.Index(out, "catching up") {
			t.Errorf("%s: FAILED partitions are not listed first:\n%s", c.name, out)
		}
		if !c.style.Terminal && strings.IndexFunc(out, func(r rune) bool { return r > 127 }) >= 0 {
			t.Errorf("%s: plain output is not ASCII:\n%s", c.name, out)
		}
		if hasESC := strings.Contains(out, "\x1b["); hasESC != c.style.Terminal {
			t.Errorf("%s: ANSI colour %v on a terminal %v", c.name, hasESC, c.style.Terminal)
		}
	}
}

func serve(t *testing.T, live livestatus.Live, hits *atomic.Int32) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/live" {
			http.NotFound(w, r)
			return
		}
		if hits != nil {
			hits.Add(1)
		}
		_ = json.NewEncoder(w).Encode(live)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestRunReadsTheDaemonAndSaysWhatIsWrong: the command reads /v1/live from
// --http-address, keeps one mirror with --mirror, prints JSON with --json,
// and fails with a message for an unknown mirror, an unreachable daemon and
// missing flags.
func TestRunReadsTheDaemonAndSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	addr := serve(t, sample(), nil)
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"--http-address", addr, "--mirror", "dc2"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "mirror dc2: 2 partitions (MIRRORING 2)") || strings.Contains(out.String(), "dc1") {
		t.Errorf("--mirror dc2:\n%s", out.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"--http-address", addr, "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errOut.String())
	}
	var back livestatus.Live
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back.Mirrors) != 2 || back.Mirrors[0].LagTotal != 1_234_567 {
		t.Errorf("--json: %v %+v", err, back)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--http-address", addr, "--mirror", "nope"}, 1, `no mirror named "nope" is running`},
		{[]string{"--http-address", "127.0.0.1:1"}, 1, "cannot reach the daemon at http://127.0.0.1:1/v1/live"},
		{nil, 2, "--http-address HOST:PORT or --config FILE is required"},
		{[]string{"--http-address", addr, "--interval", "1ms"}, 2, "--interval 1ms: want at least 100ms"},
	} {
		errOut.Reset()
		if code := run(t.Context(), c.args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, errOut.String(), c.code, c.want)
		}
	}
}

// TestWatchPrintsSnapshotsUntilInterrupted: piped, --watch prints one
// snapshot after another (no screen control) and ends cleanly (exit 0)
// when interrupted.
func TestWatchPrintsSnapshotsUntilInterrupted(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	addr := serve(t, sample(), &hits)
	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"--http-address", addr, "--watch", "--interval", "100ms"}, &out, &errOut)
	}()
	for hits.Load() < 4 {
		time.Sleep(10 * time.Millisecond) // polling a counter the server moves, not synchronising with sleep
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if n := strings.Count(out.String(), "kmirror status at"); n < 3 {
		t.Errorf("%d snapshots; want at least 3:\n%s", n, out.String())
	}
	if strings.Contains(out.String(), "\x1b[") {
		t.Error("screen control codes written to a pipe")
	}
}

// run runs `kmirror status args...` as the command line does, with ctx in
// place of the interrupt signals, and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{Use: "kmirror"}
	root.AddCommand(newCommand(func() context.Context { return ctx }))
	return cli.Execute(root, append([]string{"status"}, args...), strings.NewReader(""), stdout, stderr)
}

// TestStatusInEveryFormat: -o json and -o yaml print the /v1/live document
// (golden files), the same fields in both.
func TestStatusInEveryFormat(t *testing.T) {
	t.Parallel()
	addr := serve(t, sample(), nil)
	for _, format := range []string{"json", "yaml"} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), []string{"--http-address", addr, "-o", format}, &out, &errOut); code != 0 {
			t.Fatalf("-o %s: exit %d: %s", format, code, errOut.String())
		}
		golden(t, "status."+format+".golden", out.Bytes())
	}
}
