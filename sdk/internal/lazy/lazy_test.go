package lazy

import (
	"context"
	"errors"
	"testing"

	"github.com/kmirror/kmirror/sdk/filter"
)

func TestCallsBeforeConfigureFailWithErrNotConfigured(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lf := &Filter{}
	if _, err := lf.FilterTopics(ctx, "m", nil); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("FilterTopics before configure = %v", err)
	}
	ls := &Store{}
	if _, err := ls.Get(ctx, "k"); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("Get before configure = %v", err)
	}
	la := &Auth{}
	if info := la.Info(); info.Name != "" {
		t.Fatalf("Info before configure = %+v", info)
	}
	lf.Set(filter.Funcs{Name: "f", Topics: func(_ context.Context, _ string, in []filter.Topic) ([]filter.Topic, error) { return in, nil }})
	out, err := lf.FilterTopics(ctx, "m", []filter.Topic{{Name: "a"}})
	if err != nil || len(out) != 1 || lf.Info().Name != "f" {
		t.Fatalf("after set: %v %v %+v", out, err, lf.Info())
	}
}
