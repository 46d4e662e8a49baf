package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/admin/admintest"
	"github.com/kmirror/kmirror/core/config"
)

// The exact request of issue #10: with a valid token, an escaped '/' made
// the path parameter "dc1/partitions", which skipped the checks on mirror
// dc1 and deleted its partition records. It is refused before the
// controller.
func TestAnEscapedSlashInAMirrorNameIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	code, body := h.do("DELETE", "/v1/mirrors/dc1%2Fpartitions", testToken, "")
	if code != http.StatusBadRequest || !strings.Contains(errorOf(t, body), `invalid mirror name "dc1/partitions"`) {
		t.Fatalf("DELETE /v1/mirrors/dc1%%2Fpartitions: %d %s; want 400 naming the invalid mirror name", code, body)
	}
	// Every route with a path parameter, with names outside the grammar.
	routes := []struct{ method, suffix, body string }{
		{"GET", "", ""}, {"DELETE", "", ""},
		{"POST", "/pause", `{}`}, {"POST", "/resume", `{}`}, {"POST", "/stop", `{"topics":[".*"]}`},
		{"POST", "/start", `{"topics":[".*"]}`}, {"POST", "/failover", `{}`}, {"POST", "/failback", `{}`},
	}
	for _, name := range []string{"dc1%2Fpartitions", "dc1%2f", "%2e%2e", ".", "dc1.x", "dc%C3%A9", "dc1%00", "a%20b", "%2F"} {
		for _, r := range routes {
			path := "/v1/mirrors/" + name + r.suffix
			if code, body := h.do(r.method, path, testToken, r.body); code != http.StatusBadRequest {
				t.Errorf("%s %s: %d %s; want 400", r.method, path, code, body)
			}
		}
	}
	for _, name := range []string{"dc1/partitions", "a b", "dc1.x", "é", "../dc1"} {
		body := `{"name":` + strconv.Quote(name) + `,"config":"bootstrap.servers: src:9092"}`
		if code, answer := h.do("POST", "/v1/mirrors", testToken, body); code != http.StatusBadRequest || !strings.Contains(errorOf(t, answer), "invalid mirror name") {
			t.Errorf("create %q: %d %s; want 400 invalid mirror name", name, code, answer)
		}
	}
	if calls := h.ctl.Calls(); len(calls) != 0 {
		t.Fatalf("refused requests reached the controller: %+v", calls)
	}
	// A valid name still gets through.
	if code, body := h.do("DELETE", "/v1/mirrors/dc-9_x", testToken, ""); code != http.StatusOK {
		t.Fatalf("DELETE /v1/mirrors/dc-9_x: %d %s", code, body)
	}
}

// fuzzServer starts an admin server whose token is testToken and returns
// its handler and fake controller.
func fuzzServer(f *testing.F) (http.Handler, *admintest.Controller) {
	dir := f.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	cfg := &config.Config{
		AdminAddress:   "127.0.0.1:0",
		AdminTokenFile: tokenFile,
		State:          config.State{Type: config.StateTypeFile, Dir: dir},
		Mirrors:        []config.Mirror{{Name: "dc1", Source: config.Cluster{BootstrapServers: []string{"src1:9092"}}}},
	}
	ctl := &admintest.Controller{StatusValue: sampleStatus()}
	srv, err := admin.New(admin.Options{Controller: ctl, Logger: hclog.NewNullLogger(), OpTimeout: 2 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	if err := srv.Start(context.Background(), cfg); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	return srv.Handler(), ctl
}

// invalidInRequest says whether the request carries a mirror name outside
// the grammar (in the path or a create body) or a topic regex that does not
// compile: such a request must get a 4xx.
func invalidInRequest(r *http.Request, body string) bool {
	segs := strings.Split(r.URL.EscapedPath(), "/")
	if len(segs) >= 4 && segs[0] == "" && segs[1] == "v1" && segs[2] == "mirrors" {
		name, err := url.PathUnescape(segs[3])
		if err != nil || config.CheckMirrorName(name) != nil {
			return true
		}
	}
	var b struct {
		Name    *string  `json:"name"`
		Topics  []string `json:"topics"`
		Exclude []string `json:"exclude"`
	}
	if json.Unmarshal([]byte(body), &b) != nil {
		return false
	}
	if b.Name != nil && r.Method == http.MethodPost && r.URL.Path == "/v1/mirrors" && config.CheckMirrorName(*b.Name) != nil {
		return true
	}
	for _, p := range append(b.Topics, b.Exclude...) {
		if _, err := regexp.Compile(p); err != nil {
			return true
		}
	}
	return false
}

// FuzzAdminRequests sends arbitrary requests to the admin API (method,
// request target, credentials, body) and checks that nothing panics, that a
// request without the right token always gets 401, that one with an invalid
// mirror name or regex gets a 4xx, that a refused request never reaches the
// controller, and that the controller only ever sees valid mirror names.
// auth: 0 no token, 1 a wrong one, anything else the right one.
func FuzzAdminRequests(f *testing.F) {
	seeds := []struct {
		method, target string
		auth           uint8
		body           string
	}{
		{"DELETE", "/v1/mirrors/dc1%2Fpartitions", 2, ""},
		{"DELETE", "/v1/mirrors/dc1%2fpartitions", 2, ""},
		{"DELETE", "/v1/mirrors/dc1%2Fpartitions", 0, ""},
		{"DELETE", "/v1/mirrors/dc1%2Fpartitions", 1, ""},
		{"DELETE", "/v1/mirrors/dc9", 2, ""},
		{"DELETE", "/v1/mirrors/", 2, ""},
		{"DELETE", "/v1/mirrors/dc1/", 2, ""},
		{"GET", "/v1/mirrors", 0, ""},
		{"GET", "/v1/mirrors", 2, ""},
		{"GET", "/v1/mirrors/dc1", 2, ""},
		{"GET", "/v1/mirrors/dc1?x=%2F", 2, ""},
		{"PUT", "/v1/mirrors/dc1", 2, ""},
		{"POST", "/v1/mirrors/dc1/pause", 2, `{"topics":["orders.*"]}`},
		{"POST", "/v1/mirrors/dc%31/resume", 2, `{}`},
		{"POST", "/v1/mirrors/..%2Fdc1/stop", 2, `{"topics":[".*"]}`},
		{"POST", "/v1/mirrors/%2e%2e/stop", 2, `{"topics":[".*"]}`},
		{"POST", "/v1/mirrors/dc1/../dc2/stop", 2, `{"topics":[".*"]}`},
		{"POST", "/v1/mirrors//stop", 2, `{"topics":[".*"]}`},
		{"POST", "/v1/mirrors/dc1%00/start", 2, `{"topics":["a"]}`},
		{"POST", "/v1/mirrors/dc1/start", 2, `{"topics":["("],"exclude":["a"]}`},
		{"POST", "/v1/mirrors/dc%C3%A9/resume", 2, ``},
		{"POST", "/v1/mirrors/dc1.x/failover", 2, `{}`},
		{"POST", "/v1/mirrors/dc1/failover", 2, `{"wait_for_catch_up_ms":9223372036854775807}`},
		{"POST", "/v1/mirrors/dc1/failover", 2, `{"topics":["a"],"wait_for_catch_up_ms":1000}`},
		{"POST", "/v1/mirrors/dc1/failback", 2, `{"side_topic_suffix":"../x"}`},
		{"POST", "/v1/mirrors/dc1/failback", 2, `{"allow_recreate":true}`},
		{"POST", "/v1/mirrors", 2, `{"name":"dc1/partitions","config":"bootstrap.servers: x:1"}`},
		{"POST", "/v1/mirrors", 2, `{"name":"ok","config":"bootstrap.servers: x:1"}`},
		{"POST", "/v1/mirrors", 1, `{"name":"ok","config":"bootstrap.servers: x:1"}`},
		{"POST", "/v1/mirrors", 2, `{"name":"a b","config":"x"}`},
		{"POST", "/v1/mirrors/%zz/pause", 2, ``},
		{"OPTIONS", "*", 2, ``},
	}
	for _, s := range seeds {
		f.Add(s.method, s.target, s.auth, s.body)
	}
	h, ctl := fuzzServer(f)
	f.Fuzz(func(t *testing.T, method, target string, auth uint8, body string) {
		if strings.ContainsAny(method+target, " \t\r\n") {
			return // not one request line
		}
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(method + " " + target + " HTTP/1.1\r\nHost: kmirror\r\n\r\n")))
		if err != nil {
			return // the HTTP server answers it without the handler
		}
		switch auth {
		case 0:
		case 1:
			r.Header.Set("Authorization", "Bearer not-"+testToken)
		default:
			r.Header.Set("Authorization", "Bearer "+testToken)
		}
		r.Body = http.NoBody
		if body != "" {
			r.Body = io.NopCloser(strings.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		before := len(ctl.Calls())
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		calls := ctl.Calls()
		code := w.Code

		if auth <= 1 && code != http.StatusUnauthorized {
			t.Fatalf("%s %s without the right token: %d, want 401", method, target, code)
		}
		if invalidInRequest(r, body) && (code < 400 || code >= 500) {
			t.Fatalf("%s %s %q with an invalid name or regex: %d, want 4xx", method, target, body, code)
		}
		if code >= 300 && len(calls) != before {
			t.Fatalf("%s %s %q refused with %d, yet the controller saw %+v", method, target, body, code, calls[before:])
		}
		for _, c := range calls[before:] {
			if err := config.CheckMirrorName(c.Mirror); err != nil {
				t.Fatalf("%s %s %q: the controller got mirror name %q: %v", method, target, body, c.Mirror, err)
			}
		}
	})
}
