package admin_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
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
	// The fuzzer fails authentication on purpose, thousands of times from
	// one address: the limit of failed authentications (authlimit_test.go)
	// would answer 429 to all but the first ten.
	srv, err := admin.New(admin.Options{Controller: ctl, Logger: hclog.NewNullLogger(), OpTimeout: 2 * time.Second, AuthFailuresMax: -1})
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

// bodyRoutes are the admin API's routes that decode a JSON body, on mirror
// dc1, each with what the controller must receive for a request it
// accepts, and whether the documented rules accept the request (given that
// its body decodes). The model is written from docs/operations.md, not from
// the handler.
var bodyRoutes = []struct {
	path   string
	decode func([]byte) (call admintest.Call, valid bool, err error)
}{
	{"/v1/mirrors/dc1/pause", topicsRoute("pause", false)},
	{"/v1/mirrors/dc1/resume", topicsRoute("resume", false)},
	{"/v1/mirrors/dc1/stop", topicsRoute("stop", true)},
	{"/v1/mirrors/dc1/start", func(b []byte) (admintest.Call, bool, error) {
		var req admin.StartRequest
		err := strictDecode(b, &req)
		return admintest.Call{Op: "start", Mirror: "dc1", Topics: req.Topics, Exclude: req.Exclude},
			len(req.Topics) > 0 && regexesValid(req.Topics) && regexesValid(req.Exclude), err
	}},
	{"/v1/mirrors/dc1/failover", func(b []byte) (admintest.Call, bool, error) {
		var req admin.FailoverRequest
		err := strictDecode(b, &req)
		wait := time.Duration(req.WaitForCatchUpMs) * time.Millisecond
		return admintest.Call{Op: "failover", Mirror: "dc1", Topics: req.Topics, Wait: wait},
			req.WaitForCatchUpMs >= 0 && req.WaitForCatchUpMs <= (24*time.Hour).Milliseconds() && regexesValid(req.Topics), err
	}},
	{"/v1/mirrors/dc1/failback", func(b []byte) (admintest.Call, bool, error) {
		var req admin.FailbackRequest
		err := strictDecode(b, &req)
		return admintest.Call{Op: "failback", Mirror: "dc1", AllowRecreate: req.AllowRecreate, SideTopicSuffix: req.SideTopicSuffix},
			req.SideTopicSuffix == "" || regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`).MatchString(req.SideTopicSuffix), err
	}},
	{"/v1/mirrors", func(b []byte) (admintest.Call, bool, error) {
		var req admin.CreateRequest
		err := strictDecode(b, &req)
		return admintest.Call{Op: "create", Mirror: req.Name, Settings: req.Config},
			req.Name != "" && strings.TrimSpace(req.Config) != "" && config.CheckMirrorName(req.Name) == nil, err
	}},
}

func topicsRoute(op string, required bool) func([]byte) (admintest.Call, bool, error) {
	return func(b []byte) (admintest.Call, bool, error) {
		var req admin.TopicsRequest
		err := strictDecode(b, &req)
		return admintest.Call{Op: op, Mirror: "dc1", Topics: req.Topics}, (!required || len(req.Topics) > 0) && regexesValid(req.Topics), err
	}
}

// strictDecode decodes a body the way docs/operations.md describes it: one
// JSON object (or nothing), no unknown field, nothing after it.
func strictDecode(b []byte, v any) error {
	if len(bytes.Trim(b, " \t\r\n")) == 0 { // JSON's white space
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the JSON value (%v)", err)
	}
	return nil
}

func regexesValid(list []string) bool {
	for _, p := range list {
		if _, err := regexp.Compile(p); err != nil || strings.TrimSpace(p) == "" {
			return false
		}
	}
	return true
}

// FuzzAdminBodies posts arbitrary bodies, with the right token, to every
// route that decodes one. Nothing panics and nothing answers 5xx; a body
// that does not decode or breaks a documented rule gets 400 and never
// reaches the controller; a valid one reaches it exactly as sent; and an
// answer never shows a create request's settings, which may hold a secret.
func FuzzAdminBodies(f *testing.F) {
	for i, body := range []string{
		`{"topics":["orders.*"]}`, `{}`, `{"topics":[".*"]}`, `{"topics":["a"],"exclude":["a-tmp"]}`,
		`{"topics":["a"],"wait_for_catch_up_ms":1000}`, `{"allow_recreate":true,"side_topic_suffix":".old"}`,
		`{"name":"dc9","config":"bootstrap.servers: src:9092\nsasl.password: hunter2-in-a-create\n"}`,
	} {
		f.Add(uint8(i), body)
	}
	f.Add(uint8(0), `{"topics":["("]}`)
	f.Add(uint8(2), `{"topics":[]}`)
	f.Add(uint8(3), `{"topics":["a"]}}`)
	f.Add(uint8(4), `{"wait_for_catch_up_ms":-1}`)
	f.Add(uint8(4), `{"wait_for_catch_up_ms":1e3}`)
	f.Add(uint8(5), `{"side_topic_suffix":"../x"}`)
	f.Add(uint8(6), `{"name":"a b","config":"x","extra":1}`)
	f.Add(uint8(6), `{"name":"dc9","config":"x"} {"name":"dc8","config":"y"}`)
	f.Add(uint8(1), ` `)
	h, ctl := fuzzServer(f)
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		rt := bodyRoutes[int(route)%len(bodyRoutes)]
		r := httptest.NewRequest(http.MethodPost, rt.path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+testToken)
		before := len(ctl.Calls())
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		calls := ctl.Calls()[before:]
		code, answer := w.Code, w.Body.String()

		want, valid, decErr := rt.decode([]byte(body))
		switch {
		case code >= 500:
			t.Fatalf("POST %s %q: %d %s", rt.path, body, code, answer)
		case decErr != nil || !valid:
			if code != http.StatusBadRequest || len(calls) != 0 {
				t.Fatalf("POST %s %q (decodes: %v, valid: %v): %d %s, controller saw %+v; want 400 and nothing done", rt.path, body, decErr, valid, code, answer, calls)
			}
		default:
			if code != http.StatusOK || len(calls) != 1 {
				t.Fatalf("POST %s %q: %d %s, controller saw %+v; want 200 and one call", rt.path, body, code, answer, calls)
			}
			got := calls[0]
			if len(got.Topics) == 0 && len(want.Topics) == 0 {
				got.Topics, want.Topics = nil, nil
			}
			if len(got.Exclude) == 0 && len(want.Exclude) == 0 {
				got.Exclude, want.Exclude = nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("POST %s %q: the controller got %+v, want %+v", rt.path, body, got, want)
			}
		}
		var create admin.CreateRequest
		if strictDecode([]byte(body), &create) == nil && len(create.Config) >= 8 && !strings.Contains(create.Name+rt.path, create.Config) && strings.Contains(answer, create.Config) {
			t.Fatalf("POST %s %q: the answer shows the settings: %s", rt.path, body, answer)
		}
	})
}
