package mirror

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/internal/kfaketest"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

func mirrorNames(e *Engine) string {
	var out []string
	for _, m := range e.Status().Mirrors {
		out = append(out, m.Name)
	}
	return strings.Join(out, ",")
}

// TestRunTimeMirrorsSurviveRestartsAndAreDeletedOnlyWhenStopped: a mirror
// created through the API mirrors, is started again after a restart, is
// refused deletion while mirroring, and once its topics are stopped is
// deleted with its state; configuration mirrors cannot be created over or
// deleted, and inline secrets are refused.
func TestRunTimeMirrorsSurviveRestartsAndAreDeletedOnlyWhenStopped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "live", 1)
	f.produce(t, "live", 30, "tx-l")
	store := memstore.New()
	cfg := f.config(t, "nothing-matches-this")
	e := startEngine(t, cfg, store)
	ctx := kfaketest.Context(t)
	settings := []byte(fmt.Sprintf("bootstrap.servers: %s\nmirror.topics.include: \"live\"\n", strings.Join(f.src.ListenAddrs(), ",")))

	if _, err := e.CreateMirror(ctx, "test", settings); !errors.Is(err, admin.ErrConflict) {
		t.Fatalf("creating over a configuration mirror: %v", err)
	}
	secret := append([]byte("security.protocol: SASL_PLAINTEXT\nsasl.mechanism: PLAIN\nsasl.username: u\nsasl.password: hunter2\n"), settings...)
	if _, err := e.CreateMirror(ctx, "dc2", secret); !errors.Is(err, admin.ErrInvalidRequest) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("inline secret: %v", err)
	}
	if _, err := e.CreateMirror(ctx, "dc2", settings); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateMirror(ctx, "dc2", settings); err != nil {
		t.Fatalf("creating the same mirror again: %v", err)
	}
	if _, err := e.CreateMirror(ctx, "dc2", append(settings, []byte("mirror.groups.include: \"x\"\n")...)); !errors.Is(err, admin.ErrConflict) {
		t.Fatalf("creating dc2 with other settings: %v", err)
	}
	waitMirrorCopied(t, e, "dc2", "live", endOffset(t, f.srcCl, "live", 0))

	stopEngine(t, e)
	e2 := startEngine(t, cfg, store)
	if names := mirrorNames(e2); names != "dc2,test" {
		t.Fatalf("mirrors after a restart: %s", names)
	}
	f.produce(t, "live", 10, "tx-l2")
	waitMirrorCopied(t, e2, "dc2", "live", endOffset(t, f.srcCl, "live", 0))
	f.verify(t, "live", 1)

	if _, err := e2.DeleteMirror(ctx, "dc2"); !errors.Is(err, admin.ErrConflict) || !strings.Contains(err.Error(), "stop its topics first") {
		t.Fatalf("deleting a mirroring mirror: %v", err)
	}
	if _, err := e2.DeleteMirror(ctx, "test"); !errors.Is(err, admin.ErrConflict) {
		t.Fatalf("deleting a configuration mirror: %v", err)
	}
	if _, err := e2.StopTopics(ctx, "dc2", []string{".*"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e2.DeleteMirror(ctx, "dc2"); err != nil {
		t.Fatal(err)
	}
	if names := mirrorNames(e2); names != "test" {
		t.Fatalf("mirrors after the delete: %s", names)
	}
	left, err := store.List(ctx, statestore.MirrorPrefix("dc2"))
	if err != nil || len(left) != 0 {
		t.Fatalf("state left of the deleted mirror: %d keys (%v)", len(left), err)
	}
	stopEngine(t, e2)
	e3 := startEngine(t, cfg, store)
	if names := mirrorNames(e3); names != "test" {
		t.Fatalf("mirrors after a restart: %s", names)
	}
}

// TestDeleteMirrorRefusesANameThatIsNotAMirrorName: "test/partitions" (what
// DELETE /v1/mirrors/test%2Fpartitions unescapes to) is a prefix of mirror
// test's partition records; it is refused and nothing is deleted.
func TestDeleteMirrorRefusesANameThatIsNotAMirrorName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createTopic(t, "kept", 1)
	f.produce(t, "kept", 5, "tx-k")
	store := memstore.New()
	e := startEngine(t, f.config(t, "kept"), store)
	f.waitMirrored(t, e, "kept", 1)
	ctx := kfaketest.Context(t)
	before, err := store.List(ctx, statestore.MirrorPrefix("test"))
	if err != nil || len(before) == 0 {
		t.Fatalf("state of mirror test: %d keys (%v)", len(before), err)
	}
	for _, name := range []string{"test/partitions", "test/", "", "../test", "te st"} {
		if _, err := e.DeleteMirror(ctx, name); !errors.Is(err, admin.ErrInvalidRequest) {
			t.Errorf("DeleteMirror(%q): %v, want admin.ErrInvalidRequest", name, err)
		}
	}
	after, err := store.List(ctx, statestore.MirrorPrefix("test"))
	if err != nil || len(after) < len(before) {
		t.Fatalf("state of mirror test after the refused deletes: %d keys, %d before (%v)", len(after), len(before), err)
	}
	if _, err := store.Get(ctx, statestore.PartitionKey("test", "kept", 0)); err != nil {
		t.Fatalf("partition record of test/kept/0: %v", err)
	}
}
