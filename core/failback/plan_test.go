package failback

import (
	"context"
	"errors"
	"testing"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/control"
	"github.com/kmirror/kmirror/core/partition"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// The reverse mirror reads the daemon's destination, mirrors back exactly
// the failed-over topics (their names quoted, not patterns) and keeps the
// forward mirror's group and ACL scope.
func TestReverseConfigMirrorsBackExactlyTheFailedOverTopics(t *testing.T) {
	groups, err := config.CompileRegexList([]string{"app-.*"})
	if err != nil {
		t.Fatal(err)
	}
	dcfg := &config.Config{Destination: config.Cluster{ClientID: "dst"}}
	mc, err := ReverseConfig(dcfg, config.Mirror{Name: "dc1", GroupsInclude: groups}, Name("dc1"), []string{"orders.v1"})
	if err != nil {
		t.Fatal(err)
	}
	if mc.Name != "dc1-failback" || mc.Source.ClientID != "dst" {
		t.Fatalf("name %q, source %+v", mc.Name, mc.Source)
	}
	if !mc.TopicsInclude.Match("orders.v1") || mc.TopicsInclude.Match("ordersXv1") || !mc.GroupsInclude.Match("app-1") {
		t.Fatalf("include %v, groups %v", mc.TopicsInclude, mc.GroupsInclude)
	}
}

// FailedOver lists the stopped topics' partitions, and refuses while one
// is not STOPPED yet or when nothing was failed over.
func TestFailedOverListsStoppedTopicsAndRefusesAnIncompleteFailover(t *testing.T) {
	ctx := context.Background()
	m, err := partition.NewMachine(memstore.New())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.LoadOrCreate(ctx, "dc1", "orders", 0, "test"); err != nil {
		t.Fatal(err)
	}
	none := func(context.Context, string) (bool, error) { return false, nil }
	if _, _, err := FailedOver(ctx, m, none, "dc1"); !errors.Is(err, control.ErrConflict) {
		t.Fatalf("nothing failed over: err %v, want ErrConflict", err)
	}
	all := func(context.Context, string) (bool, error) { return true, nil }
	if _, _, err := FailedOver(ctx, m, all, "dc1"); !errors.Is(err, control.ErrConflict) {
		t.Fatalf("a partition not STOPPED: err %v, want ErrConflict", err)
	}
}
