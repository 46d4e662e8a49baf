package runtimemirror

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/sdk/statestore"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

// fuzzSecret is an inline password added to every fuzzed mirror's
// settings: ParseMirror refuses it, and no error may show it.
const fuzzSecret = "hunter2-fuzz-Secret"

// FuzzSpec stores an arbitrary run-time mirror record and reads it the way
// the engine does at start (List, then config.ParseMirror for a mirror an
// operator created). Nothing panics; List and Get agree on whether the
// record is readable; a readable record is written back and read
// unchanged; settings that parse describe the recorded mirror and no other;
// and with an inline password added, no error shows it.
func FuzzSpec(f *testing.F) {
	for _, s := range []Spec{
		{FailbackOf: "dc1", Topics: []string{"orders", "payments"}},
		{Config: "bootstrap.servers: a:9092,b:9092\nsecurity.protocol: SASL_PLAINTEXT\nsasl.mechanism: SCRAM-SHA-512\nsasl.username: kmirror\nsasl.password.file: /etc/kmirror/pw\nmirror.topics.include: \"orders.*\"\n"},
		{Config: "bootstrap.servers: a:9092\nmirror.topics.include: \"(\"\n"},
		{Config: "name: dc3\nbootstrap.servers: a:9092\n"},
		{Config: "bootstrap.servers: a:9092\r  - name: other\r    bootstrap.servers: b:9092\n"},
	} {
		b, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"config":7}`))
	f.Add([]byte(`{"topics":null,"failback_of":""}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		const name = "made"
		ctx := context.Background()
		store := memstore.New()
		if _, err := store.Put(ctx, Key(name), value, statestore.Absent); err != nil {
			return // not a value a store holds
		}
		recs, err := List(ctx, store)
		if err != nil || len(recs) != 1 || recs[0].Name != name {
			t.Fatalf("List = %+v, %v; want the one record of %s", recs, err, name)
		}
		spec, ok, err := Get(ctx, store, name)
		if err != nil || ok != (recs[0].Err == nil) {
			t.Fatalf("Get = %v, %v; List's error: %v", ok, err, recs[0].Err)
		}
		if !ok {
			return
		}
		if !reflect.DeepEqual(spec, recs[0].Spec) {
			t.Fatalf("Get read %+v, List %+v", spec, recs[0].Spec)
		}
		if err := Put(ctx, store, name, spec, statestore.AnyVersion); err != nil {
			t.Fatal(err)
		}
		back, ok, err := Get(ctx, store, name)
		if len(spec.Topics) == 0 {
			spec.Topics = nil
		}
		if err != nil || !ok || !reflect.DeepEqual(back, spec) {
			t.Fatalf("written back as %+v (%v, %v), read %+v", spec, ok, err, back)
		}
		if spec.FailbackOf != "" {
			return // settings come from the reversed mirror's configuration
		}
		if mc, err := config.ParseMirror([]byte(spec.Config), name); err == nil && mc.Name != name {
			t.Fatalf("settings %q parsed as mirror %q, recorded as %q", spec.Config, mc.Name, name)
		}
		if strings.Contains(spec.Config, fuzzSecret[:8]) || strings.ContainsAny(spec.Config, "\"'|>[{?\\\r") {
			// The secret is in the settings anyway, or the added line
			// may be read as part of another value (quoted, a block or
			// a flow collection), which errors may quote.
			return
		}
		withSecret := spec.Config + "\nsasl.password: " + fuzzSecret + "\n"
		if _, err := config.ParseMirror([]byte(withSecret), name); err != nil && strings.Contains(err.Error(), fuzzSecret[:8]) {
			t.Fatalf("settings %q: the error shows the password: %v", withSecret, err)
		}
	})
}
