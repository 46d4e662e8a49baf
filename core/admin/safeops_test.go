package admin_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/admin/admintest"
)

// errorBody decodes a JSON error answer.
func errorBody(t *testing.T, body string) admin.ErrorResponse {
	t.Helper()
	var e admin.ErrorResponse
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" || e.Code == "" {
		t.Fatalf("body is not a JSON error with a message and a code: %q (%v)", body, err)
	}
	return e
}

// TestUnknownMirrorIs404NamingItOnEveryRoute: every route of a mirror
// answers 404 with code no_such_mirror, a message naming the mirror and a
// hint, whether the server (describe, lag) or the engine (the operations)
// finds it missing.
func TestUnknownMirrorIs404NamingItOnEveryRoute(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	h.ctl.Update(func(c *admintest.Controller) {
		c.Err = fmt.Errorf("%w %q in this daemon (mirrors: dc1)", admin.ErrNoMirror, "ghost")
	})
	cases := []struct{ method, path, body string }{
		{"GET", "/v1/mirrors/ghost", ""},
		{"GET", "/v1/mirrors/ghost/lag", ""},
		{"DELETE", "/v1/mirrors/ghost", ""},
		{"DELETE", "/v1/mirrors/ghost?dry_run=true", ""},
		{"POST", "/v1/mirrors/ghost/pause", `{"topics":["a"]}`},
		{"POST", "/v1/mirrors/ghost/resume", ``},
		{"POST", "/v1/mirrors/ghost/stop", `{"topics":["a"]}`},
		{"POST", "/v1/mirrors/ghost/stop", `{"topics":["a"],"dry_run":true}`},
		{"POST", "/v1/mirrors/ghost/start", `{"topics":["a"]}`},
		{"POST", "/v1/mirrors/ghost/failover", `{}`},
		{"POST", "/v1/mirrors/ghost/failover", `{"dry_run":true}`},
		{"POST", "/v1/mirrors/ghost/failback", `{}`},
		{"POST", "/v1/mirrors/ghost/failback", `{"dry_run":true,"allow_recreate":true}`},
	}
	for _, tc := range cases {
		code, body := h.do(tc.method, tc.path, testToken, tc.body)
		e := errorBody(t, body)
		if code != http.StatusNotFound || e.Code != admin.CodeNoSuchMirror || !strings.Contains(e.Error, `"ghost"`) || !strings.Contains(e.Hint, "kmirror mirrors list") {
			t.Errorf("%s %s %s: %d %s; want 404 no_such_mirror naming ghost", tc.method, tc.path, tc.body, code, body)
		}
	}
}

// TestEveryFailureHasAStatusCodeAndHint: each kind of failure maps to its
// status and code; those the caller can act on carry a hint; none is a
// bare 500.
func TestEveryFailureHasAStatusCodeAndHint(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	cases := []struct {
		err   error
		code  int
		ecode string
		hint  string
	}{
		{fmt.Errorf("%w: mirror dc1: topic pattern \"nomatch\" matches no topic of the mirror", admin.ErrNoMatch), 422, admin.CodeNoMatchingTopics, "lists the mirror's topics"},
		{fmt.Errorf("%w: mirror dc1 has not connected to its clusters yet", admin.ErrUnavailable), 503, admin.CodeUnavailable, "repeat the command"},
		{fmt.Errorf("mirror dc1: failover: the last group offset sync failed (%w): dial tcp: connection refused", admin.ErrLastSyncFailed), 503, admin.CodeUnavailable, "fail over without a wait"},
		{fmt.Errorf("mirror dc1: waiting for catch-up: %w within --wait-for-catch-up 1s; nothing was changed", admin.ErrNotCaughtUp), 504, admin.CodeTimeout, "/v1/mirrors/dc1/lag"},
		{fmt.Errorf("%w: orders is STOPPED", admin.ErrConflict), 409, admin.CodeConflict, "kmirror mirrors describe --mirror dc1"},
		{fmt.Errorf("%w: bad", admin.ErrInvalidRequest), 400, admin.CodeInvalidRequest, ""},
		{fmt.Errorf("mirror dc1: reading the end offsets of orders on the old source: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), 503, admin.CodeUnavailable, "once it is reachable"},
		{fmt.Errorf("mirror dc1: listing groups: %w", kerr.CoordinatorLoadInProgress), 503, admin.CodeUnavailable, "once it is reachable"},
		{fmt.Errorf("mirror dc1: recreating orders on the old source: %w", kerr.TopicAuthorizationFailed), 502, admin.CodeKafkaRefused, "permission to grant"},
		{fmt.Errorf("disk on fire"), 500, admin.CodeInternal, "the daemon's log"},
	}
	for _, tc := range cases {
		h.ctl.Update(func(c *admintest.Controller) { c.Err = tc.err })
		req, _ := http.NewRequest("POST", h.url+"/v1/mirrors/dc1/failover", strings.NewReader(`{"topics":["orders"],"wait_for_catch_up_ms":1000}`))
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := h.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e admin.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != tc.code || e.Code != tc.ecode || e.Error != tc.err.Error() || !strings.Contains(e.Hint, tc.hint) || (tc.hint == "") != (e.Hint == "") {
			t.Errorf("%v: %d %+v; want %d %s with hint …%s…", tc.err, resp.StatusCode, e, tc.code, tc.ecode, tc.hint)
		}
		if got := resp.Header.Get("Retry-After"); (tc.code == 503) != (got != "") {
			t.Errorf("%v: Retry-After %q", tc.err, got)
		}
	}
	// Errors the server finds itself have the shape too.
	for _, tc := range []struct {
		method, path, token string
		code                int
		ecode               string
	}{
		{"GET", "/v1/mirrors", "wrong", 401, admin.CodeUnauthorized},
		{"GET", "/v2/x", testToken, 404, admin.CodeNoSuchRoute},
		{"GET", "/v1/mirrors/dc1/pause", testToken, 405, admin.CodeMethodNotAllowed},
		{"POST", "/v1/mirrors/dc1/stop", testToken, 400, admin.CodeInvalidRequest},
	} {
		code, body := h.do(tc.method, tc.path, tc.token, "")
		if e := errorBody(t, body); code != tc.code || e.Code != tc.ecode {
			t.Errorf("%s %s: %d %s; want %d %s", tc.method, tc.path, code, body, tc.code, tc.ecode)
		}
	}
}

// TestDryRunsAnswerAPlanAndRunNoOperation: dry_run on stop, failover,
// failback and delete asks the controller for a plan, never for the
// operation, and answers it marked dry_run; pause and resume refuse
// dry_run; bad dry_run query values are refused.
func TestDryRunsAnswerAPlanAndRunNoOperation(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	h.ctl.Update(func(c *admintest.Controller) {
		c.PlanResult = admin.Plan{Steps: []string{"stop"}, Topics: []admin.TopicPlan{{Topic: "orders", Partitions: []admin.PartitionPlan{
			{Partition: 0, State: "MIRRORING", Lag: 3, LastMirroredOffset: 41, Action: admin.PlanStop},
		}}}}
	})
	cases := []struct {
		method, path, body string
		want               admintest.Call
	}{
		{"POST", "/v1/mirrors/dc1/stop", `{"topics":["orders"],"dry_run":true}`, admintest.Call{Op: "stop", Mirror: "dc1", Topics: []string{"orders"}, DryRun: true}},
		{"POST", "/v1/mirrors/dc1/failover", `{"topics":["orders"],"wait_for_catch_up_ms":2000,"dry_run":true}`, admintest.Call{Op: "failover", Mirror: "dc1", Topics: []string{"orders"}, Wait: 2 * time.Second, DryRun: true}},
		{"POST", "/v1/mirrors/dc1/failback", `{"allow_recreate":true,"dry_run":true}`, admintest.Call{Op: "failback", Mirror: "dc1", AllowRecreate: true, DryRun: true}},
		{"DELETE", "/v1/mirrors/dc9?dry_run=true", ``, admintest.Call{Op: "delete", Mirror: "dc9", DryRun: true}},
	}
	for i, tc := range cases {
		code, body := h.do(tc.method, tc.path, testToken, tc.body)
		var p admin.Plan
		if code != http.StatusOK || json.Unmarshal([]byte(body), &p) != nil || !p.DryRun || p.Op != tc.want.Op || p.Mirror != tc.want.Mirror || p.Topics[0].Partitions[0].Action != admin.PlanStop {
			t.Fatalf("%s %s: %d %s", tc.method, tc.path, code, body)
		}
		for _, field := range []string{`"dry_run": true`, `"steps"`, `"state": "MIRRORING"`, `"action": "stop"`, `"last_mirrored_offset": 41`} {
			if !strings.Contains(body, field) {
				t.Errorf("%s %s: answer lacks %s: %s", tc.method, tc.path, field, body)
			}
		}
		if calls := h.ctl.Calls(); len(calls) != i+1 || fmt.Sprint(calls[i]) != fmt.Sprint(tc.want) {
			t.Fatalf("%s %s: calls %+v, want %+v", tc.method, tc.path, calls, tc.want)
		}
	}
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "/v1/mirrors/dc1/pause", `{"dry_run":true}`, "dry_run is not supported by pause"},
		{"POST", "/v1/mirrors/dc1/resume", `{"dry_run":true}`, "dry_run is not supported by resume"},
		{"DELETE", "/v1/mirrors/dc9?dry_run=maybe", ``, "use true or false"},
		{"DELETE", "/v1/mirrors/dc9?dryrun=true", ``, `unknown query parameter "dryrun"`},
	} {
		code, body := h.do(tc.method, tc.path, testToken, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(errorOf(t, body), tc.want) {
			t.Errorf("%s %s %s: %d %s; want 400 …%s…", tc.method, tc.path, tc.body, code, body, tc.want)
		}
	}
	if n := len(h.ctl.Calls()); n != len(cases) {
		t.Fatalf("refused dry runs reached the controller: %+v", h.ctl.Calls())
	}
}

// TestLagReportsPerTopicWhetherAPlannedFailoverCouldStart: the lag route
// sums the lag of each topic's partitions, counts those caught up as a
// planned failover's wait does (MIRRORING with no lag, or STOPPED), and
// refuses a topic pattern that matches no partition.
func TestLagReportsPerTopicWhetherAPlannedFailoverCouldStart(t *testing.T) {
	t.Parallel()
	h := start(t, nil)
	h.ctl.Update(func(c *admintest.Controller) {
		c.StatusValue = admin.Status{Mirrors: []admin.MirrorStatus{{Name: "dc1", Partitions: []admin.PartitionStatus{
			{Topic: "orders", Partition: 0, State: "MIRRORING", Lag: 0, SourceHighWatermark: 10},
			{Topic: "orders", Partition: 1, State: "MIRRORING", Lag: 7, SourceHighWatermark: 20},
			{Topic: "orders", Partition: 2, State: "MIRRORING", Lag: 5, SourceHighWatermark: 30},
			{Topic: "pay", Partition: 0, State: "STOPPED", Lag: 0, SourceHighWatermark: 5},
			{Topic: "pay", Partition: 1, State: "MIRRORING", Lag: 0, SourceHighWatermark: 9},
		}}}}
	})
	code, body := h.do("GET", "/v1/mirrors/dc1/lag", testToken, "")
	var lag admin.LagReport
	if code != http.StatusOK || json.Unmarshal([]byte(body), &lag) != nil {
		t.Fatalf("lag: %d %s", code, body)
	}
	if lag.Mirror != "dc1" || lag.CaughtUp || lag.TotalLag != 12 || len(lag.Topics) != 2 || lag.At.IsZero() {
		t.Fatalf("lag: %s", body)
	}
	o, p := lag.Topics[0], lag.Topics[1]
	if o.Topic != "orders" || o.Partitions != 3 || o.Lag != 12 || o.MaxLag != 7 || o.CaughtUp != 1 || o.States["MIRRORING"] != 3 {
		t.Fatalf("orders: %+v", o)
	}
	if p.Topic != "pay" || p.Lag != 0 || p.CaughtUp != 2 || p.States["STOPPED"] != 1 {
		t.Fatalf("pay: %+v", p)
	}
	code, body = h.do("GET", "/v1/mirrors/dc1/lag?topic=pay", testToken, "")
	if json.Unmarshal([]byte(body), &lag) != nil || code != 200 || !lag.CaughtUp || len(lag.Topics) != 1 {
		t.Fatalf("lag of pay: %d %s", code, body)
	}
	code, body = h.do("GET", "/v1/mirrors/dc1/lag?topic=pay&topic=nomatch", testToken, "")
	if e := errorBody(t, body); code != http.StatusUnprocessableEntity || e.Code != admin.CodeNoMatchingTopics || !strings.Contains(e.Error, `"nomatch"`) || strings.Contains(e.Error, `"pay"`) {
		t.Fatalf("lag of a pattern matching nothing: %d %s", code, body)
	}
	code, body = h.do("GET", "/v1/mirrors/dc1/lag?topics=pay", testToken, "")
	if code != http.StatusBadRequest || !strings.Contains(errorOf(t, body), `unknown query parameter "topics"`) {
		t.Fatalf("misspelt parameter: %d %s", code, body)
	}
	if calls := h.ctl.Calls(); len(calls) != 0 {
		t.Fatalf("lag called operations: %+v", calls)
	}
}
