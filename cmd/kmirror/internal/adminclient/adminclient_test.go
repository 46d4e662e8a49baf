package adminclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/admin/admintest"
	"github.com/kmirror/kmirror/core/config"
)

// serve runs an admin API on a fake controller and returns a client of it.
func serve(t *testing.T, ctl *admintest.Controller) *Client {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("t0k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := admin.New(admin.Options{Controller: ctl, Logger: hclog.New(&hclog.LoggerOptions{Output: io.Discard}), OpTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{AdminAddress: "127.0.0.1:0", AdminTokenFile: tokenFile, State: config.State{Type: config.StateTypeFile, Dir: dir},
		Mirrors: []config.Mirror{{Name: "dc1"}}}
	if err := srv.Start(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	f := &Flags{Address: srv.Addr(), tokenFile: tokenFile}
	c, err := f.Client(nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPlansLagAndFailoverCallTheAPI: each call sends its request and
// decodes the answer.
func TestPlansLagAndFailoverCallTheAPI(t *testing.T) {
	t.Parallel()
	ctl := &admintest.Controller{
		StatusValue: admin.Status{Mirrors: []admin.MirrorStatus{{Name: "dc1", Partitions: []admin.PartitionStatus{
			{Topic: "orders", Partition: 0, State: "MIRRORING", Lag: 4, SourceHighWatermark: 10},
			{Topic: "pay", Partition: 0, State: "MIRRORING", Lag: 0, SourceHighWatermark: 3},
		}}}},
		PlanResult:     admin.Plan{Steps: []string{"x"}, Topics: []admin.TopicPlan{{Topic: "orders", Partitions: []admin.PartitionPlan{{Action: admin.PlanStop}}}}},
		FailoverResult: admin.FailoverResult{Topics: []admin.TopicFailover{{Topic: "orders"}}},
	}
	c := serve(t, ctl)
	lag, err := c.Lag("dc1", []string{"orders"})
	if err != nil || lag.TotalLag != 4 || lag.CaughtUp || len(lag.Topics) != 1 || lag.Topics[0].Topic != "orders" {
		t.Fatalf("Lag: %+v %v", lag, err)
	}
	if lag, err = c.Lag("dc1", nil); err != nil || len(lag.Topics) != 2 {
		t.Fatalf("Lag of every topic: %+v %v", lag, err)
	}
	plans := map[string]func() (admin.Plan, error){
		"stop":     func() (admin.Plan, error) { return c.PlanStop("dc1", []string{"orders"}) },
		"failover": func() (admin.Plan, error) { return c.PlanFailover("dc1", []string{"orders"}, 3*time.Second) },
		"failback": func() (admin.Plan, error) { return c.PlanFailback("dc1", true, ".lost") },
		"delete":   func() (admin.Plan, error) { return c.PlanDelete("dc1") },
	}
	for op, plan := range plans {
		p, err := plan()
		if err != nil || !p.DryRun || p.Op != op || p.Topics[0].Partitions[0].Action != admin.PlanStop {
			t.Fatalf("%s plan: %+v %v", op, p, err)
		}
	}
	res, err := c.Failover("dc1", []string{"orders"}, 2*time.Second)
	if err != nil || res.Mirror != "dc1" || res.Topics[0].Topic != "orders" {
		t.Fatalf("Failover: %+v %v", res, err)
	}
	calls := ctl.Calls()
	want := fmt.Sprint(admintest.Call{Op: "failover", Mirror: "dc1", Topics: []string{"orders"}, Wait: 2 * time.Second})
	if len(calls) != 5 || fmt.Sprint(calls[4]) != want {
		t.Fatalf("calls %+v; want 4 plans then %s", calls, want)
	}
	for _, call := range calls[:4] {
		if !call.DryRun {
			t.Fatalf("a plan ran the operation: %+v", call)
		}
	}
}

// TestRefusalsKeepTheCodeAndHint: a refusal becomes an *Error with the
// status, the code and the hint, and its text says what to do.
func TestRefusalsKeepTheCodeAndHint(t *testing.T) {
	t.Parallel()
	ctl := &admintest.Controller{Err: fmt.Errorf("%w: mirror dc1: topic pattern \"nomatch\" matches no topic of the mirror", admin.ErrNoMatch)}
	c := serve(t, ctl)
	var res admin.OpResult
	err := c.Call(http.MethodPost, "/v1/mirrors/dc1/pause", admin.TopicsRequest{Topics: []string{"nomatch"}}, &res, 5*time.Second)
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity || ae.Code != admin.CodeNoMatchingTopics || ae.Hint == "" {
		t.Fatalf("no-match refusal: %#v", err)
	}
	if !strings.Contains(err.Error(), `"nomatch"`) || !strings.Contains(err.Error(), ae.Hint) || ae.Message() == err.Error() {
		t.Fatalf("refusal text %q", err)
	}
	_, err = c.Lag("ghost", nil)
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code != admin.CodeNoSuchMirror || !strings.Contains(err.Error(), "kmirror mirrors list") {
		t.Fatalf("unknown mirror: %v", err)
	}
}
