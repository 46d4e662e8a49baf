package mirror

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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// TestPatternsThatMatchNothingAreRefusedAndRecordNoRule: pause, resume,
// stop, start and failover with a pattern that matches no topic of the
// mirror are refused with ErrNoMatch naming every such pattern; nothing is
// recorded (no operator record in the state store), so a restarted daemon
// keeps mirroring, including a topic created later that the pattern would
// have matched.
func TestPatternsThatMatchNothingAreRefusedAndRecordNoRule(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "orders", 1)
	f.produce(t, "orders", 5, "tx-o")
	store := memstore.New()
	cfg := f.config(t, ".*")
	e := startEngine(t, cfg, store)
	f.waitMirrored(t, e, "orders", 1)
	ctx := kfaketest.Context(t)

	ops := map[string]func() error{
		"pause":  func() error { _, err := e.Pause(ctx, "test", []string{"order", "nomatch.*"}); return err },
		"resume": func() error { _, err := e.Resume(ctx, "test", []string{"order", "nomatch.*"}); return err },
		"stop":   func() error { _, err := e.StopTopics(ctx, "test", []string{"order", "nomatch.*"}); return err },
		"start":  func() error { _, err := e.StartTopics(ctx, "test", []string{"order", "nomatch.*"}, nil); return err },
		"failover": func() error {
			_, err := e.Failover(ctx, admin.FailoverOrder{Mirror: "test", Topics: []string{"order", "nomatch.*"}})
			return err
		},
		"stop plan": func() error {
			_, err := e.Plan(ctx, admin.PlanOrder{Op: admin.OpStop, Mirror: "test", Topics: []string{"order", "nomatch.*"}})
			return err
		},
	}
	for op, do := range ops {
		err := do()
		if !errors.Is(err, admin.ErrNoMatch) || !strings.Contains(err.Error(), `"order", "nomatch.*"`) || !strings.Contains(err.Error(), "orders") {
			t.Errorf("%s with patterns matching nothing: %v; want admin.ErrNoMatch naming both patterns and the mirror's topics", op, err)
		}
	}
	// A pattern that matches goes with one that does not: still refused.
	if _, err := e.Pause(ctx, "test", []string{"orders", "nomatch"}); !errors.Is(err, admin.ErrNoMatch) || strings.Contains(err.Error(), `"orders"`) {
		t.Errorf("pause of orders and nomatch: %v; want ErrNoMatch naming only nomatch", err)
	}
	if _, err := store.Get(ctx, statestore.ControlKey("test")); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("operator record after refused requests: %v; want none", err)
	}

	stopEngine(t, e)
	f.createTopic(t, "nomatch-later", 1)
	f.produce(t, "nomatch-later", 3, "tx-n")
	e2 := startEngine(t, cfg, store)
	f.waitMirrored(t, e2, "nomatch-later", 1)
	if s := states(e2, "orders"); s != "0:MIRRORING" {
		t.Fatalf("orders after a restart: %s", s)
	}
}

// TestDeletingAMirrorThatNeverExistedIsNoMirror: deleting (or planning to
// delete) a name that is neither running nor recorded is ErrNoMirror, not
// "deleted".
func TestDeletingAMirrorThatNeverExistedIsNoMirror(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e := startEngine(t, f.config(t, "none"), memstore.New())
	ctx := kfaketest.Context(t)
	if _, err := e.DeleteMirror(ctx, "never-existed"); !errors.Is(err, admin.ErrNoMirror) || !strings.Contains(err.Error(), `"never-existed"`) {
		t.Fatalf("delete of a mirror that never existed: %v", err)
	}
	if _, err := e.Plan(ctx, admin.PlanOrder{Op: admin.OpDelete, Mirror: "never-existed"}); !errors.Is(err, admin.ErrNoMirror) {
		t.Fatalf("delete plan of a mirror that never existed: %v", err)
	}
	for _, op := range []string{admin.OpStop, admin.OpFailover, admin.OpFailback} {
		if _, err := e.Plan(ctx, admin.PlanOrder{Op: op, Mirror: "never-existed", Topics: []string{".*"}}); !errors.Is(err, admin.ErrNoMirror) {
			t.Errorf("%s plan of a mirror that never existed: %v", op, err)
		}
	}
}

// TestDryRunsSayWhatWouldHappenPerPartitionAndChangeNothing: the plans of
// stop and failover list every matching partition with its state now and
// the action; afterwards every partition still mirrors and no rule is
// recorded. The delete plan of a run-time mirror refuses as delete would
// while it mirrors, and once its topics are stopped lists its partitions,
// and the mirror is still there.
func TestDryRunsSayWhatWouldHappenPerPartitionAndChangeNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "pay", 2)
	f.createTopic(t, "log", 1)
	f.produce(t, "pay", 20, "tx-p")
	f.produce(t, "log", 5, "tx-l")
	store := memstore.New()
	e := startEngine(t, f.config(t, "pay|log"), store)
	f.waitMirrored(t, e, "pay", 2)
	f.waitMirrored(t, e, "log", 1)
	ctx := kfaketest.Context(t)

	p, err := e.Plan(ctx, admin.PlanOrder{Op: admin.OpStop, Mirror: "test", Topics: []string{"pay"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Topics) != 1 || p.Topics[0].Topic != "pay" || len(p.Topics[0].Partitions) != 2 {
		t.Fatalf("stop plan: %+v", p)
	}
	for _, pp := range p.Topics[0].Partitions {
		if pp.State != "MIRRORING" || pp.Action != admin.PlanStop || !strings.Contains(pp.Detail, "STOPPED") {
			t.Fatalf("stop plan of pay/%d: %+v", pp.Partition, pp)
		}
	}
	p, err = e.Plan(ctx, admin.PlanOrder{Op: admin.OpFailover, Mirror: "test", WaitForCatchUp: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Topics) != 2 || !strings.Contains(strings.Join(p.Steps, "\n"), "wait up to 1s") || !strings.Contains(strings.Join(p.Steps, "\n"), "stop rule for topics matching .*") {
		t.Fatalf("failover plan: %+v", p)
	}
	if _, err := store.Get(ctx, statestore.ControlKey("test")); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("operator record after dry runs: %v; want none", err)
	}
	f.produce(t, "pay", 5, "tx-p2")
	f.waitMirrored(t, e, "pay", 2)
	if s := states(e, "pay") + " " + states(e, "log"); s != "0:MIRRORING 1:MIRRORING 0:MIRRORING" {
		t.Fatalf("states after dry runs: %s", s)
	}

}

// TestDeletePlanRefusesAsDeleteWouldAndListsWhatItWouldForget: the delete
// plan of a run-time mirror refuses while it mirrors, and once its topics
// are stopped lists its partitions; the mirror is still there afterwards.
func TestDeletePlanRefusesAsDeleteWouldAndListsWhatItWouldForget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "live", 2)
	f.produce(t, "live", 10, "tx-l")
	e := startEngine(t, f.config(t, "nothing-matches-this"), memstore.New())
	ctx := kfaketest.Context(t)
	settings := []byte(fmt.Sprintf("bootstrap.servers: %s\nmirror.topics.include: \"live\"\n", strings.Join(f.src.ListenAddrs(), ",")))
	if _, err := e.CreateMirror(ctx, "rt", settings); err != nil {
		t.Fatal(err)
	}
	waitMirrorCopied(t, e, "rt", "live", endOffset(t, f.srcCl, "live", 0))
	if _, err := e.Plan(ctx, admin.PlanOrder{Op: admin.OpDelete, Mirror: "rt"}); !errors.Is(err, admin.ErrConflict) || !strings.Contains(err.Error(), "stop its topics first") {
		t.Fatalf("delete plan of a mirroring run-time mirror: %v; want the refusal delete gives", err)
	}
	if _, err := e.Plan(ctx, admin.PlanOrder{Op: admin.OpDelete, Mirror: "test"}); !errors.Is(err, admin.ErrConflict) {
		t.Fatalf("delete plan of a configuration mirror: %v", err)
	}
	if _, err := e.StopTopics(ctx, "rt", []string{".*"}); err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(ctx, admin.PlanOrder{Op: admin.OpDelete, Mirror: "rt"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Topics) != 1 || len(p.Topics[0].Partitions) != 2 || p.Topics[0].Partitions[1].Action != admin.PlanDelete || p.Topics[0].Partitions[1].State != "STOPPED" {
		t.Fatalf("delete plan: %+v", p)
	}
	if names := mirrorNames(e); names != "rt,test" {
		t.Fatalf("mirrors after the delete plan: %s", names)
	}
	if _, err := e.DeleteMirror(ctx, "rt"); err != nil {
		t.Fatal(err)
	}
}

// TestFailbackOfAMirrorCreatedThroughTheAPI: a mirror made with
// CreateMirror fails over and back like a configured one (it used to be
// refused as "itself a failback mirror"), its failback mirror is started
// again after a restart, and a failback mirror itself is still refused.
func TestFailbackOfAMirrorCreatedThroughTheAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "made", 1)
	produceTo(t, f.srcCl, "made", "a1", 6)
	store := memstore.New()
	cfg := f.config(t, "nothing-matches-this")
	e := startEngine(t, cfg, store)
	ctx := kfaketest.Context(t)
	settings := []byte(fmt.Sprintf("bootstrap.servers: %s\nmirror.topics.include: \"made\"\n", strings.Join(f.src.ListenAddrs(), ",")))
	if _, err := e.CreateMirror(ctx, "rt", settings); err != nil {
		t.Fatal(err)
	}
	waitMirrorCopied(t, e, "rt", "made", endOffset(t, f.srcCl, "made", 0))
	if _, err := e.Failover(ctx, admin.FailoverOrder{Mirror: "rt"}); err != nil {
		t.Fatal(err)
	}
	produceTo(t, f.dstCl, "made", "b1", 4)

	p, err := e.Plan(ctx, admin.PlanOrder{Op: admin.OpFailback, Mirror: "rt"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Topics) != 1 || p.Topics[0].Partitions[0].Action != admin.FailbackContinue || p.Topics[0].Partitions[0].Failback.From != 6 {
		t.Fatalf("failback plan of a created mirror: %+v", p)
	}
	res, err := e.Failback(ctx, admin.FailbackOrder{Mirror: "rt"})
	if err != nil {
		t.Fatalf("failback of a created mirror: %v", err)
	}
	if res.Mirror != "rt-failback" || res.Topics[0].Partitions[0].Action != admin.FailbackContinue {
		t.Fatalf("failback result %+v", res)
	}
	waitMirrorCopied(t, e, "rt-failback", "made", endOffset(t, f.dstCl, "made", 0))
	identical(t, f.dstCl, f.srcCl, "made", 0)
	if _, err := e.Failback(ctx, admin.FailbackOrder{Mirror: "rt-failback"}); !errors.Is(err, admin.ErrInvalidRequest) || !strings.Contains(err.Error(), "itself a failback mirror (of rt)") {
		t.Fatalf("failback of a failback mirror: %v", err)
	}

	stopEngine(t, e)
	e = startEngine(t, cfg, store)
	if names := mirrorNames(e); names != "rt,rt-failback,test" {
		t.Fatalf("mirrors after a restart: %s", names)
	}
	produceTo(t, f.dstCl, "made", "b2", 2)
	waitMirrorCopied(t, e, "rt-failback", "made", endOffset(t, f.dstCl, "made", 0))
}

// TestFailbackPlanOfADivergedTopicNamesWhatWouldBeCreatedAndDeleted: with
// records on the old source beyond the last mirrored offset, the failback
// plan says the side topic would be created and, with AllowRecreate, that
// the topic would be deleted on the old source; nothing is: no side topic,
// the old source's records are all there, no failback mirror.
func TestFailbackPlanOfADivergedTopicNamesWhatWouldBeCreatedAndDeleted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "split", 1)
	ctx := kfaketest.Context(t)
	produceTo(t, f.srcCl, "split", "a1", 10)
	store := memstore.New()
	e := startEngine(t, f.config(t, "split"), store)
	f.waitMirrored(t, e, "split", 1)
	if _, err := e.Failover(ctx, admin.FailoverOrder{Mirror: "test"}); err != nil {
		t.Fatal(err)
	}
	produceTo(t, f.srcCl, "split", "lost", 3)
	produceTo(t, f.dstCl, "split", "b1", 4)

	p, err := e.Plan(ctx, admin.PlanOrder{Op: admin.OpFailback, Mirror: "test"})
	if err != nil {
		t.Fatal(err)
	}
	pp := p.Topics[0].Partitions[0]
	if pp.Action != admin.FailbackFailed || pp.Failback.Diverged != 3 || pp.LastMirroredOffset != 9 ||
		fmt.Sprint(p.CreateOnOldSource) != "[split.kmirror-diverged]" || len(p.DeleteOnOldSource) != 0 {
		t.Fatalf("failback plan without allow_recreate: %+v (partition %+v)", p, pp)
	}
	p, err = e.Plan(ctx, admin.PlanOrder{Op: admin.OpFailback, Mirror: "test", AllowRecreate: true})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(p.DeleteOnOldSource) != "[split]" || p.Topics[0].Partitions[0].Action != admin.FailbackRecreated || !strings.Contains(strings.Join(p.Steps, "\n"), "DELETE on the old source the topics split") {
		t.Fatalf("failback plan with allow_recreate: %+v", p)
	}
	if n := endOffset(t, f.srcCl, "split", 0); n != 13 {
		t.Fatalf("old source's split ends at %d after the plans, want 13", n)
	}
	if n := partitionCount(t, f.srcCl, "split.kmirror-diverged"); n != 0 {
		t.Fatalf("the plans created the side topic (%d partitions)", n)
	}
	if names := mirrorNames(e); names != "test" {
		t.Fatalf("mirrors after the plans: %s", names)
	}
	if left, err := store.List(ctx, statestore.MirrorPrefix("test-failback")); err != nil || len(left) != 0 {
		t.Fatalf("the plans recorded %d keys of the failback mirror (%v)", len(left), err)
	}
}

// TestAdminAPIOnTheEngineAnswersRefusalsWithTheirCodes: through the admin
// API on a running engine, a pattern matching nothing is 422 naming it, an
// unknown mirror 404 naming it (delete included), a stop dry run answers
// the plan and the partitions keep mirroring, and the lag route reports
// the mirror caught up.
func TestAdminAPIOnTheEngineAnswersRefusalsWithTheirCodes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "orders", 2)
	f.produce(t, "orders", 10, "tx-o")
	cfg := f.config(t, "orders")
	e := startEngine(t, cfg, memstore.New())
	f.waitMirrored(t, e, "orders", 2)

	dir := t.TempDir()
	cfg.AdminAddress, cfg.AdminTokenFile = "127.0.0.1:0", filepath.Join(dir, "token")
	if err := os.WriteFile(cfg.AdminTokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := admin.New(admin.Options{Controller: e, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+srv.Addr()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		method, path, body string
		status             int
		code, names        string
	}{
		{"POST", "/v1/mirrors/test/pause", `{"topics":["ordres"]}`, 422, admin.CodeNoMatchingTopics, `\"ordres\"`},
		{"POST", "/v1/mirrors/test/stop", `{"topics":["ordres"],"dry_run":true}`, 422, admin.CodeNoMatchingTopics, `\"ordres\"`},
		{"POST", "/v1/mirrors/nope/pause", `{}`, 404, admin.CodeNoSuchMirror, `\"nope\"`},
		{"POST", "/v1/mirrors/nope/failback", `{"dry_run":true}`, 404, admin.CodeNoSuchMirror, `\"nope\"`},
		{"DELETE", "/v1/mirrors/nope", ``, 404, admin.CodeNoSuchMirror, `\"nope\"`},
		{"POST", "/v1/mirrors/test/failback", `{}`, 409, admin.CodeConflict, "no failed-over topic"},
	} {
		status, body := call(tc.method, tc.path, tc.body)
		if status != tc.status || !strings.Contains(body, `"code": "`+tc.code+`"`) || !strings.Contains(body, tc.names) || !strings.Contains(body, `"hint"`) {
			t.Errorf("%s %s %s: %d %s; want %d %s naming %s", tc.method, tc.path, tc.body, status, body, tc.status, tc.code, tc.names)
		}
	}
	status, body := call("POST", "/v1/mirrors/test/stop", `{"topics":["orders"],"dry_run":true}`)
	if status != 200 || !strings.Contains(body, `"dry_run": true`) || strings.Count(body, `"action": "stop"`) != 2 {
		t.Fatalf("stop dry run: %d %s", status, body)
	}
	kfaketest.WaitFor(t, "the lag route reports the mirror caught up", func() (bool, string) {
		status, body := call("GET", "/v1/mirrors/test/lag", "")
		return status == 200 && strings.Contains(body, `"caught_up": true`) && strings.Contains(body, `"total_lag": 0`), body
	})
	if s := states(e, "orders"); s != "0:MIRRORING 1:MIRRORING" {
		t.Fatalf("states after the API calls: %s", s)
	}
}

// TestPlannedFailoverWhoseLastSyncFailsChangesNothingAndSaysWhy: the
// source refuses the last group offset sync; the planned failover does not
// start (ErrLastSyncFailed, the admin API's 503, with the cause and what to
// do), records nothing, and the topic keeps mirroring.
func TestPlannedFailoverWhoseLastSyncFailsChangesNothingAndSaysWhy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "calm", 1)
	f.produce(t, "calm", 5, "tx-c")
	store := memstore.New()
	e := startEngine(t, f.config(t, "calm", "    mirror.groups.include: \"app-.*\""), store)
	f.waitMirrored(t, e, "calm", 1)
	ctx := kfaketest.Context(t)
	f.src.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListGroups}, TopLevel: true, Err: kerr.GroupAuthorizationFailed, Count: -1})

	_, err := e.Failover(ctx, admin.FailoverOrder{Mirror: "test", WaitForCatchUp: 30 * time.Second})
	if !errors.Is(err, admin.ErrLastSyncFailed) || !strings.Contains(err.Error(), "GROUP_AUTHORIZATION_FAILED") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("planned failover with a failing group sync: %v; want ErrLastSyncFailed with the cause", err)
	}
	if _, err := store.Get(ctx, statestore.ControlKey("test")); !errors.Is(err, statestore.ErrNotFound) {
		t.Fatalf("operator record after the refused failover: %v; want none", err)
	}
	if s := states(e, "calm"); s != "0:MIRRORING" {
		t.Fatalf("calm after the refused failover: %s", s)
	}
}
