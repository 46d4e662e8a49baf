package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/core/livestatus"
	"github.com/kmirror/kmirror/e2e/kafkatest"
)

// TestStatusPageInChromium loads the daemon's status page in headless
// Chromium (Debian's chromium, installed by scripts/install-deps.sh) while
// a mirror runs, and checks what the page shows, after its script has read
// /v1/live, against describe: the mirror, its partition count, each
// partition's state and lag, and both clusters reachable. It keeps a
// screenshot of the page as a test artifact ($KMIRROR_TEST_ARTIFACTS, or
// e2e/artifacts/), and checks that it is a page, not a blank image.
func TestStatusPageInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (scripts/install-deps.sh installs Debian's chromium): %v", err)
	}
	ctx := testContext(t, 3*time.Minute)
	topic := topicName(t, "")
	createTopic(t, ctx, superAdmin(t, source), topic, 3, 3, nil)
	producer := newClient(t, source, kafkatest.Identity{}, kgo.DefaultProduceTopic(topic))
	for i := range 300 {
		produceSync(t, ctx, producer, &kgo.Record{Partition: int32(i % 3), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	d := startKmirror(t, topic)
	d.waitMirrored(ctx, topic, 3)
	// Traffic while the daemon samples (every 5 s), so that the page has
	// throughput to chart; then the topic settles, so that the page and
	// describe can be compared.
	trickle, stopTrickle := context.WithCancel(ctx)
	trickled := make(chan struct{})
	go func() { // owned by the test: stopTrickle ends it, trickled says so
		defer close(trickled)
		for i := 0; trickle.Err() == nil; i++ {
			producer.Produce(trickle, &kgo.Record{Key: fmt.Appendf(nil, "t%d", i), Value: fmt.Appendf(nil, "trickle %d", i)}, nil)
			select {
			case <-trickle.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	waitLive(t, ctx, d, func(l livestatus.Live) bool {
		if len(l.Mirrors) != 1 || len(l.Mirrors[0].History) < 3 {
			return false
		}
		for _, p := range l.Mirrors[0].History {
			if p.BytesPerSecond > 0 && p.RecordsPerSecond > 0 {
				return true
			}
		}
		return false
	})
	stopTrickle()
	<-trickled
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	d.waitMirrored(ctx, topic, 3)

	url := "http://" + d.httpAddr + "/"
	dom := runChromium(t, ctx, chromium, "--dump-dom", url)
	if !strings.Contains(dom, `data-loaded="true"`) {
		t.Fatalf("the page never rendered the daemon's data:\n%s", tail(dom, 40))
	}
	if !regexp.MustCompile(`data-mirror="` + regexp.QuoteMeta(d.mirror) + `"[^>]*data-partitions="3"`).MatchString(dom) {
		t.Errorf("the page does not show mirror %s with 3 partitions:\n%s", d.mirror, tail(dom, 40))
	}
	for _, chart := range []string{"bytes_per_second", "records_per_second"} {
		m := regexp.MustCompile(`data-chart="` + chart + `" data-max="([0-9.e+]+)" data-points="([0-9]+)"`).FindStringSubmatch(dom)
		if m == nil {
			t.Errorf("the page has no %s chart", chart)
			continue
		}
		if top, _ := strconv.ParseFloat(m[1], 64); top <= 0 {
			t.Errorf("the %s chart peaks at %s over %s samples while traffic ran", chart, m[1], m[2])
		}
	}
	rows := pageRows(dom, topic)
	st, ok := d.status()
	if !ok {
		t.Fatal("describe did not answer")
	}
	for p := int32(0); p < 3; p++ {
		ps, ok := d.partitionStatus(topic, p)
		if !ok {
			t.Fatalf("describe lacks %s/%d: %+v", topic, p, st)
		}
		row, ok := rows[p]
		if !ok {
			t.Errorf("the page lacks %s/%d", topic, p)
			continue
		}
		if row.state != ps.State || row.lag != ps.Lag {
			t.Errorf("%s/%d: the page shows %s with lag %d, describe %s with lag %d", topic, p, row.state, row.lag, ps.State, ps.Lag)
		}
	}
	for _, c := range []string{"source", "destination"} {
		if !strings.Contains(dom, `data-cluster="`+c+`" data-reachable="true"`) {
			t.Errorf("the page does not show the %s cluster reachable", c)
		}
	}

	dir := os.Getenv("KMIRROR_TEST_ARTIFACTS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "status-page.png")
	_ = os.Remove(shot)
	runChromium(t, ctx, chromium, "--screenshot="+shot, "--window-size=1280,1000", "--hide-scrollbars", url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 1000 {
		t.Errorf("screenshot of %dx%d, want 1280x1000", b.Dx(), b.Dy())
	}
	colours := map[uint32]bool{}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y += 4 {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x += 4 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[r>>8<<16|g>>8<<8|b>>8] = true
		}
	}
	if len(colours) < 20 {
		t.Errorf("the screenshot has %d colours: a blank page?", len(colours))
	}
	t.Logf("status page screenshot: %s", shot)
}

// waitLive polls the daemon's /v1/live until cond holds.
func waitLive(t *testing.T, ctx context.Context, d *daemon, cond func(livestatus.Live) bool) {
	t.Helper()
	var last livestatus.Live
	for {
		resp, err := http.Get("http://" + d.httpAddr + "/v1/live")
		if err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&last)
			resp.Body.Close()
			if cond(last) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the status page's data never got there: %+v", last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// runChromium runs headless Chromium with args and returns its standard
// output; the virtual time budget lets the page's script read /v1/live
// and render before the DOM is dumped or the screenshot taken.
func runChromium(t *testing.T, ctx context.Context, chromium string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=10000"}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, tail(stderr.String(), 30))
	}
	return string(out)
}

type pageRow struct {
	state string
	lag   int64
}

var rowAttr = regexp.MustCompile(`data-(partition|state|lag)="([^"]*)"`)

// pageRows reads the partition rows of topic from the page's DOM.
func pageRows(dom, topic string) map[int32]pageRow {
	rows := map[int32]pageRow{}
	for _, tag := range regexp.MustCompile(`<tr [^>]*data-topic="`+regexp.QuoteMeta(topic)+`"[^>]*>`).FindAllString(dom, -1) {
		var p int64 = -1
		var r pageRow
		for _, m := range rowAttr.FindAllStringSubmatch(tag, -1) {
			switch m[1] {
			case "partition":
				p, _ = strconv.ParseInt(m[2], 10, 32)
			case "state":
				r.state = m[2]
			case "lag":
				r.lag, _ = strconv.ParseInt(m[2], 10, 64)
			}
		}
		if p >= 0 {
			rows[int32(p)] = r
		}
	}
	return rows
}
