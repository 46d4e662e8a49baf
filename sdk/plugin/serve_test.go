package plugin

import (
	"context"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

func TestServeConfigServesExactlyOneKind(t *testing.T) {
	t.Parallel()
	if _, err := (ServeConfig{}).Kind(); err == nil || !strings.Contains(err.Error(), "sets no implementation") {
		t.Fatalf("empty ServeConfig: %v", err)
	}
	two := ServeConfig{StateStore: memstore.New(), Filter: filter.Funcs{Name: "f"}}
	if _, err := two.Kind(); err == nil || !strings.Contains(err.Error(), "serves exactly one kind") {
		t.Fatalf("two kinds: %v", err)
	}
	if k, err := (ServeConfig{Filter: filter.Funcs{Name: "f"}}).Kind(); err != nil || k != KindFilter {
		t.Fatalf("filter: %v %v", k, err)
	}
}

func TestClientPluginsOfferEachKindUnderItsMajor(t *testing.T) {
	t.Parallel()
	for _, k := range Kinds() {
		sets, err := ClientPlugins(k)
		if err != nil {
			t.Fatal(err)
		}
		major, _ := ProtocolMajor(k)
		if _, ok := sets[int(major)][string(k)]; !ok || len(sets) != 1 {
			t.Fatalf("%s: sets %v, want one set of major %d holding %q", k, sets, major, k)
		}
	}
	if _, err := ClientPlugins("metrics"); err == nil {
		t.Fatal("unknown kind accepted")
	}
}

func TestServeConfigRefusesAnImplementationAndAConstructorOfOneKind(t *testing.T) {
	t.Parallel()
	both := ServeConfig{Filter: filter.Funcs{Name: "f"}, NewFilter: func(context.Context, string, Config) (filter.Filter, error) { return nil, nil }}
	if _, err := both.Kind(); err == nil || !strings.Contains(err.Error(), "both an implementation and a constructor") {
		t.Fatalf("both: %v", err)
	}
	schemaOnly := ServeConfig{Filter: filter.Funcs{Name: "f"}, Schema: Schema{{Name: "a", Type: FieldString}}}
	if _, err := schemaOnly.Kind(); err == nil || !strings.Contains(err.Error(), "no constructor") {
		t.Fatalf("schema without constructor: %v", err)
	}
}
