package groupsync

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// historySyncer is a Syncer with only what loadHistory and saveHistory use.
func historySyncer(store statestore.Store) *Syncer {
	return &Syncer{
		opts:     Options{Mirror: "dc1", Store: store},
		log:      hclog.NewNullLogger(),
		last:     map[offsetKey]int64{},
		activity: map[statusKey]activity{},
	}
}

// FuzzHistory stores an arbitrary group history (format 1 or 2) and loads
// it the way a Syncer does at its first cycle. It never panics; a history
// that does not load is never overwritten; one that loads is stored again
// (format 2) and a new Syncer loads the same offsets and activity from it.
func FuzzHistory(f *testing.F) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123, time.UTC)
	h := history{
		Offsets: []historyEntry{{Kind: "consumer", Group: "app-1", Topic: "orders", Partition: 3, Offset: 42}, {Kind: "share", Group: "s", Topic: "t", Offset: 0}},
		Groups:  []activityEntry{{Kind: "consumer", Group: "app-1", Sum: 1 << 63, LastCommit: at}, {Kind: "share", Group: "s"}},
	}
	b, err := json.Marshal(h)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	if b, err = json.Marshal(h.Offsets); err != nil { // format 1
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(` [{"kind":"consumer","group":"g","topic":"t","partition":-1,"offset":-5}]`))
	f.Add([]byte(`{"groups":[{"kind":"consumer","group":"g","last_commit":"2026-03-01T13:00:00+01:00"}]}`))
	f.Add([]byte(`{"offsets":null,"groups":null}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		ctx := context.Background()
		store := memstore.New()
		key := statestore.GroupHistoryKey("dc1")
		if _, err := store.Put(ctx, key, value, statestore.Absent); err != nil {
			return // not a value a store holds
		}
		s := historySyncer(store)
		s.loadHistory(ctx)
		s.histDirty = true
		s.saveHistory(ctx)
		ent, err := store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if !s.histLoaded {
			if !bytes.Equal(ent.Value, value) {
				t.Fatalf("a history that did not load (%s) was overwritten with %s", value, ent.Value)
			}
			return
		}
		if ent.Version == 1 {
			t.Fatalf("the history loaded from %s was not stored again", value)
		}
		s2 := historySyncer(store)
		s2.loadHistory(ctx)
		if !s2.histLoaded {
			t.Fatalf("the history stored from %s (%s) does not load", value, ent.Value)
		}
		if len(s2.last) != len(s.last) || len(s2.activity) != len(s.activity) {
			t.Fatalf("loaded %d offsets and %d groups, then %d and %d from %s", len(s.last), len(s.activity), len(s2.last), len(s2.activity), ent.Value)
		}
		for k, off := range s.last {
			if got, ok := s2.last[k]; !ok || got != off {
				t.Fatalf("offset of %+v: %d, then %d (%v)", k, off, got, ok)
			}
		}
		for k, a := range s.activity {
			if got, ok := s2.activity[k]; !ok || got.sum != a.sum || !got.at.Equal(a.at) {
				t.Fatalf("activity of %+v: %+v, then %+v (%v)", k, a, got, ok)
			}
		}
	})
}
