package admin_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testlog"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/admin/admintest"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/config/security"
	"github.com/kmirror/kmirror/internal/testpki"
)

const testToken = "tok-5f1d0c9e-not-a-real-secret"

type harness struct {
	t    *testing.T
	srv  *admin.Server
	ctl  *admintest.Controller
	logs *testlog.Buffer
	cfg  *config.Config
	url  string
	http *http.Client
}

func sampleStatus() admin.Status {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	return admin.Status{Mirrors: []admin.MirrorStatus{{
		Name: "dc1",
		Partitions: []admin.PartitionStatus{
			{Mirror: "dc1", Topic: "orders", Partition: 0, State: "MIRRORING", Mode: "preserve", LastMirroredOffset: 41, UpdatedAt: now},
			{Mirror: "dc1", Topic: "orders", Partition: 1, State: "MIRRORING", Mode: "preserve", LastMirroredOffset: 7, UpdatedAt: now},
			{Mirror: "dc1", Topic: "payments", Partition: 0, State: "FAILED", Mode: "map", LastError: "source truncated", UpdatedAt: now},
		},
	}, {Name: "dc3", Error: "source unreachable"}}}
}

// start runs a Server on 127.0.0.1:0 with a token file holding testToken,
// after edit has adjusted the configuration.
func start(t *testing.T, edit func(cfg *config.Config)) *harness {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{
		AdminAddress:   "127.0.0.1:0",
		AdminTokenFile: tokenFile,
		State:          config.State{Type: config.StateTypeFile, Dir: dir},
		Mirrors: []config.Mirror{
			{Name: "dc1", Source: config.Cluster{BootstrapServers: []string{"src1:9092", "src2:9092"}}},
			{Name: "dc2", Source: config.Cluster{BootstrapServers: []string{"other:9092"}}},
		},
	}
	if edit != nil {
		edit(cfg)
	}
	h := &harness{t: t, ctl: &admintest.Controller{StatusValue: sampleStatus()}, logs: &testlog.Buffer{}, cfg: cfg, http: &http.Client{Timeout: 10 * time.Second}}
	logger := hclog.New(&hclog.LoggerOptions{Output: h.logs, Level: hclog.Trace})
	var err error
	// These tests make many failed calls on purpose: the limit of failed
	// authentications has tests of its own (authlimit_test.go).
	h.srv, err = admin.New(admin.Options{Controller: h.ctl, Logger: logger, OpTimeout: 2 * time.Second, AuthFailuresMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.srv.Start(context.Background(), cfg); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.srv.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if strings.Contains(h.logs.String(), testToken) {
			t.Errorf("the token appears in the log:\n%s", h.logs)
		}
	})
	scheme := "http"
	if cfg.AdminTLSCertFile != "" {
		scheme = "https"
	}
	h.url = scheme + "://" + h.srv.Addr()
	return h
}

// do sends a request with the given bearer token ("" for none) and returns
// the status and body.
func (h *harness) do(method, path, token, body string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(b), testToken) {
		h.t.Errorf("the token appears in the answer to %s %s", method, path)
	}
	return resp.StatusCode, string(b)
}

// errorOf returns the message and hint of a JSON error answer, after
// checking that it has the one error shape: a message and a code.
func errorOf(t *testing.T, body string) string {
	t.Helper()
	var e admin.ErrorResponse
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" || e.Code == "" {
		t.Fatalf("body is not a JSON error with a message and a code: %q (%v)", body, err)
	}
	if e.Hint != "" {
		return e.Error + " | hint: " + e.Hint
	}
	return e.Error
}

func TestTokenIsRequiredAndWrongOnesChangeNothing(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	for _, tc := range []struct{ name, token, want string }{
		{"no token", "", "missing bearer token"},
		{"wrong token", "tok-wrong", "wrong bearer token"},
		{"token prefix", testToken[:10], "wrong bearer token"},
		{"token with suffix", testToken + "x", "wrong bearer token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/v1/mirrors/dc1/pause", "/v1/mirrors/dc1/failover", "/v1/mirrors/dc1/stop"} {
				code, body := h.do("POST", path, tc.token, `{"topics":["orders"]}`)
				if code != http.StatusUnauthorized || !strings.Contains(errorOf(t, body), tc.want) {
					t.Fatalf("POST %s: %d %s", path, code, body)
				}
			}
			code, body := h.do("GET", "/v1/mirrors", tc.token, "")
			if code != http.StatusUnauthorized {
				t.Fatalf("GET /v1/mirrors: %d %s", code, body)
			}
			code, _ = h.do("GET", "/no/such/route", tc.token, "")
			if code != http.StatusUnauthorized {
				t.Fatalf("an unauthenticated caller learns which routes exist: %d", code)
			}
		})
	}
	if calls := h.ctl.Calls(); len(calls) != 0 {
		t.Fatalf("refused calls reached the controller: %+v", calls)
	}
	if !strings.Contains(h.logs.String(), "admin call refused") || !strings.Contains(h.logs.String(), "caller=anonymous") {
		t.Errorf("refused calls are not logged:\n%s", h.logs)
	}
	code, _ := h.do("POST", "/v1/mirrors/dc1/pause", testToken, `{"topics":["orders"]}`)
	if code != http.StatusOK || len(h.ctl.Calls()) != 1 {
		t.Fatalf("right token: %d, calls %+v", code, h.ctl.Calls())
	}
	// The scheme is case-insensitive, as RFC 7235 says.
	req, _ := http.NewRequest("GET", h.url+"/v1/mirrors", nil)
	req.Header.Set("Authorization", "bearer "+testToken)
	resp, err := h.http.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("lower-case scheme: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestRoutesCallTheController(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	h.ctl.Update(func(c *admintest.Controller) {
		c.Result = admin.OpResult{Message: "done", Partitions: sampleStatus().Mirrors[0].Partitions[:1]}
	})
	h.ctl.Update(func(c *admintest.Controller) {
		c.FailoverResult = admin.FailoverResult{
			Topics: []admin.TopicFailover{{Topic: "orders", Partitions: []admin.PartitionFailover{{Partition: 0, LastMirroredOffset: 41}}}},
			Groups: []string{"billing"},
		}
	})
	cases := []struct {
		path, body string
		want       admintest.Call
	}{
		{"/v1/mirrors/dc1/pause", `{"topics":["orders.*"]}`, admintest.Call{Op: "pause", Mirror: "dc1", Topics: []string{"orders.*"}}},
		{"/v1/mirrors/dc1/pause", ``, admintest.Call{Op: "pause", Mirror: "dc1"}},
		{"/v1/mirrors/dc1/resume", `{"topics":[]}`, admintest.Call{Op: "resume", Mirror: "dc1", Topics: []string{}}},
		{"/v1/mirrors/dc1/stop", `{"topics":["a","b"]}`, admintest.Call{Op: "stop", Mirror: "dc1", Topics: []string{"a", "b"}}},
		{"/v1/mirrors/dc1/start", `{"topics":["o.*"],"exclude":["o-tmp"]}`, admintest.Call{Op: "start", Mirror: "dc1", Topics: []string{"o.*"}, Exclude: []string{"o-tmp"}}},
		{"/v1/mirrors/dc1/failover", `{"topics":["orders"],"wait_for_catch_up_ms":1500}`, admintest.Call{Op: "failover", Mirror: "dc1", Topics: []string{"orders"}, Wait: 1500 * time.Millisecond}},
		{"/v1/mirrors/dc1/failback", `{"allow_recreate":true,"side_topic_suffix":".lost"}`, admintest.Call{Op: "failback", Mirror: "dc1", AllowRecreate: true, SideTopicSuffix: ".lost"}},
		{"/v1/mirrors", `{"name":"dc9","config":"bootstrap.servers: a:9092\n"}`, admintest.Call{Op: "create", Mirror: "dc9", Settings: "bootstrap.servers: a:9092\n"}},
	}
	for i, tc := range cases {
		code, body := h.do("POST", tc.path, testToken, tc.body)
		if code != http.StatusOK {
			t.Fatalf("POST %s: %d %s", tc.path, code, body)
		}
		calls := h.ctl.Calls()
		if len(calls) != i+1 || fmt.Sprint(calls[i]) != fmt.Sprint(tc.want) {
			t.Fatalf("POST %s %s: call %+v, want %+v", tc.path, tc.body, calls[len(calls)-1], tc.want)
		}
		if tc.want.Op == "create" {
			var res admin.OpResult
			if err := json.Unmarshal([]byte(body), &res); err != nil || res.Mirror != "dc9" {
				t.Fatalf("create answer %s (%v)", body, err)
			}
			continue
		}
		if tc.want.Op == "failback" {
			var res admin.FailbackResult
			if err := json.Unmarshal([]byte(body), &res); err != nil || res.Of != "dc1" {
				t.Fatalf("failback answer %s (%v)", body, err)
			}
			continue
		}
		if tc.want.Op == "failover" {
			var res admin.FailoverResult
			if err := json.Unmarshal([]byte(body), &res); err != nil || res.Mirror != "dc1" || res.Topics[0].Partitions[0].LastMirroredOffset != 41 || res.Groups[0] != "billing" {
				t.Fatalf("failover answer %s (%v)", body, err)
			}
			for _, field := range []string{`"last_mirrored_offset": 41`, `"groups"`, `"topic": "orders"`} {
				if !strings.Contains(body, field) {
					t.Errorf("failover answer lacks %s: %s", field, body)
				}
			}
		} else {
			var res admin.OpResult
			if err := json.Unmarshal([]byte(body), &res); err != nil || res.Mirror != "dc1" || res.Message != "done" || len(res.Partitions) != 1 {
				t.Fatalf("%s answer %s (%v)", tc.want.Op, body, err)
			}
		}
	}

	if code, body := h.do("DELETE", "/v1/mirrors/dc9", testToken, ""); code != http.StatusOK {
		t.Fatalf("DELETE /v1/mirrors/dc9: %d %s", code, body)
	}
	if calls := h.ctl.Calls(); fmt.Sprint(calls[len(calls)-1]) != fmt.Sprint(admintest.Call{Op: "delete", Mirror: "dc9"}) {
		t.Fatalf("delete call %+v", calls[len(calls)-1])
	}
	code, body := h.do("GET", "/v1/mirrors", testToken, "")
	if code != http.StatusOK {
		t.Fatalf("list: %d %s", code, body)
	}
	var list admin.MirrorList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	want := []admin.MirrorSummary{
		{Name: "dc1", SourceBootstrap: []string{"src1:9092", "src2:9092"}, Partitions: map[string]int{"MIRRORING": 2, "FAILED": 1}, TotalPartitions: 3},
		{Name: "dc3", SourceBootstrap: []string{}, Partitions: map[string]int{}, Error: "source unreachable"},
		{Name: "dc2", SourceBootstrap: []string{"other:9092"}, Partitions: map[string]int{}},
	}
	if fmt.Sprint(list.Mirrors) != fmt.Sprint(want) {
		t.Fatalf("list = %+v\nwant %+v", list.Mirrors, want)
	}
	for _, field := range []string{`"name"`, `"source_bootstrap"`, `"partitions"`, `"total_partitions"`} {
		if !strings.Contains(body, field) {
			t.Errorf("list lacks %s", field)
		}
	}

	code, body = h.do("GET", "/v1/mirrors/dc1", testToken, "")
	var ms admin.MirrorStatus
	if code != http.StatusOK || json.Unmarshal([]byte(body), &ms) != nil || ms.Name != "dc1" || len(ms.Partitions) != 3 || ms.Partitions[2].LastError != "source truncated" {
		t.Fatalf("mirror status: %d %s", code, body)
	}
	code, body = h.do("GET", "/v1/mirrors/nope", testToken, "")
	if code != http.StatusNotFound || !strings.Contains(errorOf(t, body), `"nope"`) || !strings.Contains(errorOf(t, body), "kmirror mirrors list") {
		t.Fatalf("unknown mirror: %d %s", code, body)
	}
}

func TestBadRequestsAreRefusedBeforeTheController(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	cases := []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"POST", "/v1/mirrors/dc1/stop", `{}`, 400, "topics is required for stop"},
		{"POST", "/v1/mirrors/dc1/start", `{"exclude":["x"]}`, 400, "topics is required for start"},
		{"POST", "/v1/mirrors/dc1/pause", `{"topics":["orders.(*"]}`, 400, `topics[0] "orders.(*" is not a valid regex`},
		{"POST", "/v1/mirrors/dc1/start", `{"topics":["a"],"exclude":[""]}`, 400, "exclude[0] is empty"},
		{"POST", "/v1/mirrors/dc1/pause", `{"topic":["orders"]}`, 400, `unknown field "topic"`},
		{"POST", "/v1/mirrors/dc1/pause", `{"topics":"orders"}`, 400, "request body is not valid"},
		{"POST", "/v1/mirrors/dc1/pause", `{} {}`, 400, "more than one JSON value"},
		{"POST", "/v1/mirrors/dc1/start", `{"topics":["a"]}}`, 400, "more than one JSON value"}, // found by FuzzAdminBodies
		{"POST", "/v1/mirrors/dc1/failover", `{"wait_for_catch_up_ms":-1}`, 400, "wait_for_catch_up_ms is -1"},
		{"POST", "/v1/mirrors/dc1/failback", `{"side_topic_suffix":"/x"}`, 400, "side_topic_suffix"},
		{"POST", "/v1/mirrors", `{"name":"dc9"}`, 400, "name and config are required"},
		{"GET", "/v1/mirrors/dc1/pause", ``, 405, "use POST"},
		{"DELETE", "/v1/mirrors", ``, 405, "use GET"},
		{"GET", "/v2/things", ``, 404, "no admin API route GET /v2/things"},
	}
	for _, tc := range cases {
		code, body := h.do(tc.method, tc.path, testToken, tc.body)
		if code != tc.code || !strings.Contains(errorOf(t, body), tc.want) {
			t.Errorf("%s %s %s: %d %s; want %d …%s…", tc.method, tc.path, tc.body, code, body, tc.code, tc.want)
		}
	}
	if calls := h.ctl.Calls(); len(calls) != 0 {
		t.Fatalf("bad requests reached the controller: %+v", calls)
	}
}

func TestControllerErrorsMapToStatuses(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	cases := []struct {
		err  error
		code int
		want string
	}{
		{fmt.Errorf("mirror %q: %w", "dcx", admin.ErrNoMirror), 404, "kmirror mirrors list"},
		{fmt.Errorf("%w: topic pattern matches nothing", admin.ErrInvalidRequest), 400, "matches nothing"},
		{fmt.Errorf("%w: orders is STOPPED", admin.ErrConflict), 409, "kmirror mirrors describe --mirror dc1"},
		{fmt.Errorf("waiting for catch-up: %w", context.DeadlineExceeded), 504, "repeat the command"},
		{errors.New("state store unavailable"), 500, "the daemon's log (kmirror.admin and the mirror's lines) has details"},
	}
	for _, tc := range cases {
		h.ctl.Update(func(c *admintest.Controller) {
			c.Err = tc.err
		})
		for _, path := range []string{"/v1/mirrors/dc1/pause", "/v1/mirrors/dc1/failover"} {
			code, body := h.do("POST", path, testToken, `{"topics":["orders"]}`)
			msg := errorOf(t, body)
			if code != tc.code || !strings.Contains(msg, tc.err.Error()) || !strings.Contains(msg, tc.want) {
				t.Errorf("%v on %s: %d %q; want %d with …%s…", tc.err, path, code, msg, tc.code, tc.want)
			}
		}
	}
	if !strings.Contains(h.logs.String(), "admin call failed") || !strings.Contains(h.logs.String(), "status=409") {
		t.Errorf("failed calls are not logged with their status:\n%s", h.logs)
	}
}

func TestOperationsRunOutOfTimeWith504(t *testing.T) {
	t.Parallel()
	h := start(t, nil) // OpTimeout is 2 s
	h.ctl.Update(func(c *admintest.Controller) {
		c.Block = true
	})
	began := time.Now()
	code, body := h.do("POST", "/v1/mirrors/dc1/resume", testToken, ``)
	if code != http.StatusGatewayTimeout || !strings.Contains(errorOf(t, body), "did not finish in time") {
		t.Fatalf("blocked resume: %d %s", code, body)
	}
	// The 504 comes from the operation timeout, not before it, and not from
	// something much later (the upper bound leaves room for a loaded machine).
	if took := time.Since(began); took < 2*time.Second || took > 30*time.Second {
		t.Errorf("504 after %s; want it at the 2 s operation timeout", took)
	}
	// A failover's wait for catch-up extends its deadline.
	began = time.Now()
	code, _ = h.do("POST", "/v1/mirrors/dc1/failover", testToken, `{"wait_for_catch_up_ms":1000}`)
	if took := time.Since(began); code != http.StatusGatewayTimeout || took < 3*time.Second {
		t.Fatalf("failover with a 1 s wait: %d after %s; want 504 after at least 3 s", code, took)
	}
}

func TestEveryCallIsLoggedWithItsCallerAndNeverTheToken(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	h.do("POST", "/v1/mirrors/dc1/pause", testToken, `{"topics":["orders"]}`)
	h.do("GET", "/v1/mirrors", "wrong-"+testToken, "")
	logs := h.logs.String()
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	var ok, refused string
	for _, l := range lines {
		if strings.Contains(l, "admin call") && strings.Contains(l, "path=/v1/mirrors/dc1/pause") {
			ok = l
		}
		if strings.Contains(l, "admin call refused") && strings.Contains(l, "path=/v1/mirrors ") {
			refused = l
		}
	}
	okRE := regexp.MustCompile(`caller=token remote=127\.0\.0\.1:\d+ method=POST path=/v1/mirrors/dc1/pause status=200 auth=token took=\S+ outcome=ok`)
	if !okRE.MatchString(ok) {
		t.Errorf("the pause call's log line is %q", ok)
	}
	if !strings.Contains(refused, "caller=anonymous") || !strings.Contains(refused, "status=401") || !strings.Contains(refused, "wrong bearer token") {
		t.Errorf("the refused call's log line is %q", refused)
	}
	if strings.Contains(logs, testToken) || strings.Contains(logs, "Bearer") {
		t.Fatalf("the token or the Authorization header appears in the log:\n%s", logs)
	}
	if !strings.Contains(logs, "admin API listening") || !strings.Contains(logs, "bearer token ("+h.cfg.AdminTokenFile+")") {
		t.Errorf("the start-up line does not say how callers authenticate:\n%s", logs)
	}
}

func TestDefaultTokenFileIsCreatedOnceWithMode0600(t *testing.T) {
	t.Parallel()
	h := start(t, func(cfg *config.Config) { cfg.AdminTokenFile = "" })
	path := filepath.Join(h.cfg.State.Dir, config.DefaultAdminTokenFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the default token file was not created: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %s, want -rw-------", fi.Mode().Perm())
	}
	tok, err := security.ReadAdminToken(path)
	if err != nil || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(tok.Reveal()) {
		t.Fatalf("token is not 256 random bits in hex: %v", err)
	}
	if code, _ := h.do("GET", "/v1/mirrors", tok.Reveal(), ""); code != 200 {
		t.Fatalf("the created token is refused: %d", code)
	}
	if strings.Contains(h.logs.String(), tok.Reveal()) {
		t.Fatal("the created token is logged")
	}
	// A second daemon start keeps the existing token.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.Start(ctx, h.cfg); err != nil {
		t.Fatal(err)
	}
	again, _ := security.ReadAdminToken(path)
	if again.Reveal() != tok.Reveal() {
		t.Fatal("a restart replaced the existing token")
	}
}

func TestReloadRotatesTheTokenAndABadOneIsRejected(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	if err := os.WriteFile(h.cfg.AdminTokenFile, []byte("tok-rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _ := h.do("GET", "/v1/mirrors", testToken, ""); code != 200 {
		t.Fatal("the token changed before the reload")
	}
	if err := h.srv.Reload(context.Background(), h.cfg); err != nil {
		t.Fatal(err)
	}
	if code, _ := h.do("GET", "/v1/mirrors", testToken, ""); code != 401 {
		t.Fatalf("the old token still works after the reload: %d", code)
	}
	if code, _ := h.do("GET", "/v1/mirrors", "tok-rotated", ""); code != 200 {
		t.Fatalf("the new token is refused: %d", code)
	}
	bad := *h.cfg
	bad.AdminTokenFile = filepath.Join(t.TempDir(), "missing")
	if err := h.srv.Reload(context.Background(), &bad); err == nil || !strings.Contains(err.Error(), "admin.token.file") {
		t.Fatalf("reload with a missing token file: %v", err)
	}
	if code, _ := h.do("GET", "/v1/mirrors", "tok-rotated", ""); code != 200 {
		t.Fatalf("a rejected reload changed the credentials: %d", code)
	}
}

func TestEmptyAddressDisablesTheAPI(t *testing.T) {
	t.Parallel()
	srv, err := admin.New(admin.Options{Controller: &admintest.Controller{}, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background(), &config.Config{}); err != nil || srv.Addr() != "" {
		t.Fatalf("Start with admin.address \"\": %v, listening on %q", err, srv.Addr())
	}
	if err := srv.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.New(admin.Options{Logger: hclog.NewNullLogger()}); err == nil {
		t.Fatal("New without a controller succeeded")
	}
}

// tlsClient returns an HTTPS client trusting the PKI's CA, presenting the
// given client certificate (none when certFile is "").
func tlsClient(t *testing.T, p *testpki.PKI, certFile, keyFile string) *http.Client {
	t.Helper()
	pool, err := security.LoadCertPool(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{RootCAs: pool}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "operators CA")
	h := start(t, func(cfg *config.Config) {
		cfg.AdminTokenFile = "" // mTLS alone
		cfg.AdminTLSCertFile, cfg.AdminTLSKeyFile, cfg.AdminTLSClientCAFile = p.Server.CertFile, p.Server.KeyFile, p.CAFile
	})
	if _, err := os.Stat(filepath.Join(h.cfg.State.Dir, config.DefaultAdminTokenFile)); err == nil {
		t.Error("a token file was created although mTLS alone is configured")
	}
	// Without a client certificate: 401 with the reason.
	h.http = tlsClient(t, p, "", "")
	code, body := h.do("POST", "/v1/mirrors/dc1/pause", "", `{}`)
	if code != 401 || !strings.Contains(errorOf(t, body), "a client certificate is required") {
		t.Fatalf("no client certificate: %d %s", code, body)
	}
	// With one signed by the CA: the caller is its CN.
	alice := p.IssueClient(t, "alice-ops")
	h.http = tlsClient(t, p, alice.CertFile, alice.KeyFile)
	code, body = h.do("POST", "/v1/mirrors/dc1/pause", "", `{}`)
	if code != 200 {
		t.Fatalf("valid client certificate: %d %s", code, body)
	}
	if !regexp.MustCompile(`admin call: caller=cn=alice-ops remote=127\.0\.0\.1:\d+ method=POST path=/v1/mirrors/dc1/pause status=200 auth=mtls`).MatchString(h.logs.String()) {
		t.Errorf("the call is not logged with the certificate's CN:\n%s", h.logs)
	}
	// One signed by another CA is refused: Go's client does not even send
	// it (its issuer is not among the CAs the server asks for), and one
	// sent anyway fails the handshake.
	other := testpki.New(t, "rogue CA")
	mallory := other.IssueClient(t, "mallory")
	h.http = tlsClient(t, p, mallory.CertFile, mallory.KeyFile)
	if code, body := h.do("POST", "/v1/mirrors/dc1/pause", "", `{}`); code != 401 || !strings.Contains(errorOf(t, body), "a client certificate is required") {
		t.Fatalf("certificate of another CA: %d %s", code, body)
	}
	pair, err := tls.LoadX509KeyPair(mallory.CertFile, mallory.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	forced := tlsClient(t, p, "", "")
	forced.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	if resp, err := forced.Post(h.url+"/v1/mirrors/dc1/pause", "application/json", strings.NewReader(`{}`)); err == nil {
		resp.Body.Close()
		t.Fatalf("a certificate from another CA was accepted: %s", resp.Status)
	}
	// Plain HTTP to the TLS listener is no way in either.
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + h.srv.Addr() + "/v1/mirrors"); err == nil {
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP was served")
		}
		resp.Body.Close()
	}
	if n := len(h.ctl.Calls()); n != 1 {
		t.Fatalf("%d calls reached the controller, want only the authenticated one", n)
	}
}

func TestTokenAndMutualTLSAreBothRequiredWhenBothAreSet(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "operators CA")
	h := start(t, func(cfg *config.Config) {
		cfg.AdminTLSCertFile, cfg.AdminTLSKeyFile, cfg.AdminTLSClientCAFile = p.Server.CertFile, p.Server.KeyFile, p.CAFile
	})
	bob := p.IssueClient(t, "bob-ops")
	cert, key := bob.CertFile, bob.KeyFile
	h.http = tlsClient(t, p, cert, key)
	if code, body := h.do("GET", "/v1/mirrors", "", ""); code != 401 || !strings.Contains(errorOf(t, body), "missing bearer token") {
		t.Fatalf("certificate without token: %d %s", code, body)
	}
	h.http = tlsClient(t, p, "", "")
	if code, body := h.do("GET", "/v1/mirrors", testToken, ""); code != 401 || !strings.Contains(errorOf(t, body), "client certificate is required") {
		t.Fatalf("token without certificate: %d %s", code, body)
	}
	h.http = tlsClient(t, p, cert, key)
	if code, body := h.do("GET", "/v1/mirrors", testToken, ""); code != 200 {
		t.Fatalf("token and certificate: %d %s", code, body)
	}
	if !strings.Contains(h.logs.String(), "caller=cn=bob-ops") || !strings.Contains(h.logs.String(), `auth="mtls+token"`) {
		t.Errorf("log:\n%s", h.logs)
	}
}

func TestReloadSwapsTheServerCertificate(t *testing.T) {
	t.Parallel()
	p := testpki.New(t, "first CA")
	h := start(t, func(cfg *config.Config) {
		cfg.AdminTLSCertFile, cfg.AdminTLSKeyFile = p.Server.CertFile, p.Server.KeyFile
	})
	h.http = tlsClient(t, p, "", "")
	if code, _ := h.do("GET", "/v1/mirrors", testToken, ""); code != 200 {
		t.Fatal("HTTPS with a token failed")
	}
	p2 := testpki.New(t, "second CA")
	next := *h.cfg
	next.AdminTLSCertFile, next.AdminTLSKeyFile = p2.Server.CertFile, p2.Server.KeyFile
	if err := h.srv.Reload(context.Background(), &next); err != nil {
		t.Fatal(err)
	}
	h.http = tlsClient(t, p2, "", "")
	if code, _ := h.do("GET", "/v1/mirrors", testToken, ""); code != 200 {
		t.Fatal("the reloaded certificate is not served")
	}
	// The old CA no longer verifies the server.
	old := tlsClient(t, p, "", "")
	if resp, err := old.Get(h.url + "/v1/mirrors"); err == nil {
		resp.Body.Close()
		t.Fatal("the old certificate is still served")
	} else if !errors.As(err, new(*tls.CertificateVerificationError)) && !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("unexpected error: %v", err)
	}
}
