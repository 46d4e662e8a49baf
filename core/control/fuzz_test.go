package control

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// FuzzRecord stores an arbitrary operator record under
// statestore.ControlKey and asks the holder about an arbitrary topic. It
// never panics; an unreadable record is an error naming the mirror; a
// readable one answers the same after it is written back and read by a new
// holder; and whatever was recorded before, pausing, resuming, stopping and
// starting exactly the topic decides it, and a new holder reads the same.
func FuzzRecord(f *testing.F) {
	for _, rec := range []Record{
		{Paused: []Rule{{Topics: []string{"orders.*"}, On: true}}},
		{Stopped: []Rule{{Topics: []string{".*"}, On: true}, {Topics: []string{"orders.*"}, Exclude: []string{"orders-tmp"}}}},
		{Paused: []Rule{{Topics: []string{"a", "b"}, Exclude: []string{"c"}, On: true}}, Stopped: []Rule{{Topics: []string{"x"}, On: true}}},
	} {
		b, err := json.Marshal(rec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "orders-eu")
	}
	f.Add([]byte(`{"paused":[{"topics":["("],"on":true}]}`), "orders")
	f.Add([]byte(`{"stopped":[{"topics":null,"exclude":["x{1001}"]}]}`), "x")
	f.Add([]byte(`[]`), "")
	f.Add([]byte(`{"paused":null,"stopped":[{"topics":[".*"],"on":true}]}`), "a.b")
	f.Fuzz(func(t *testing.T, value []byte, topic string) {
		ctx := context.Background()
		store := memstore.New()
		if _, err := store.Put(ctx, statestore.ControlKey("dc1"), value, statestore.Absent); err != nil {
			return // not a value a store holds
		}
		h := New(store, "dc1")
		paused, err := h.Paused(ctx, topic)
		if err != nil {
			if !strings.Contains(err.Error(), "mirror dc1") {
				t.Fatalf("error %q does not name the mirror", err)
			}
			return
		}
		stopped, err := h.Stopped(ctx, topic)
		if err != nil {
			t.Fatalf("Stopped failed after Paused read the record: %v", err)
		}
		// Written back as it was read, it reads the same.
		if err := h.Update(ctx, func(*Record) error { return nil }); err != nil {
			t.Fatalf("writing back a record read from the store: %v", err)
		}
		ent, err := store.Get(ctx, statestore.ControlKey("dc1"))
		if err != nil {
			t.Fatal(err)
		}
		var first, again Record
		_ = json.Unmarshal(value, &first)
		if err := json.Unmarshal(ent.Value, &again); err != nil || !reflect.DeepEqual(canonical(first), canonical(again)) {
			t.Fatalf("record %s written back as %s (%v)", value, ent.Value, err)
		}
		h2 := New(store, "dc1")
		if p, s := decision(t, h2, topic); p != paused || s != stopped {
			t.Fatalf("topic %q: paused %v stopped %v, and %v %v after the record was written back", topic, paused, stopped, p, s)
		}

		if !utf8.ValidString(topic) {
			return // not a topic name; no pattern can quote it
		}
		exact := []string{regexp.QuoteMeta(topic)}
		for _, step := range []struct {
			name            string
			do              func(*Holder) error
			paused, stopped bool
		}{
			{"pause", func(h *Holder) error { return h.Pause(ctx, exact, true) }, true, stopped},
			{"stop", func(h *Holder) error { return h.Stop(ctx, exact) }, true, true},
			{"resume", func(h *Holder) error { return h.Pause(ctx, exact, false) }, false, true},
			{"start", func(h *Holder) error { return h.Start(ctx, exact, nil) }, false, false},
		} {
			if err := step.do(h); err != nil {
				t.Fatalf("%s %q: %v", step.name, topic, err)
			}
			for _, holder := range []*Holder{h, New(store, "dc1")} {
				if p, s := decision(t, holder, topic); p != step.paused || s != step.stopped {
					t.Fatalf("after %s %q: paused %v stopped %v, want %v %v", step.name, topic, p, s, step.paused, step.stopped)
				}
			}
		}
	})
}

func decision(t *testing.T, h *Holder, topic string) (paused, stopped bool) {
	t.Helper()
	p, err := h.Paused(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.Stopped(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return p, s
}

// canonical makes equal what the encoding does not tell apart: nil and
// empty lists.
func canonical(r Record) Record {
	norm := func(rules []Rule) []Rule {
		if len(rules) == 0 {
			return nil
		}
		out := make([]Rule, len(rules))
		for i, x := range rules {
			if len(x.Topics) == 0 {
				x.Topics = nil
			}
			if len(x.Exclude) == 0 {
				x.Exclude = nil
			}
			out[i] = x
		}
		return out
	}
	return Record{Paused: norm(r.Paused), Stopped: norm(r.Stopped)}
}
