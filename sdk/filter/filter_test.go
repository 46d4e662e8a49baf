package filter_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/sdk/filter"
	"github.com/kmirror/kmirror/sdk/filter/filtertest"
)

// keep is a topic-and-group filter that keeps names with a given prefix and
// records how it was called.
type keep struct {
	filter.Pass
	name, prefix string
	calls        *[]string
}

func (k keep) Info() filter.Info {
	return filter.Info{Name: k.name, ProtocolMajor: filter.ProtocolMajor, Kinds: []filter.Kind{filter.Topics, filter.Groups}}
}

func (k keep) FilterTopics(ctx context.Context, mirror string, in []filter.Topic) ([]filter.Topic, error) {
	*k.calls = append(*k.calls, fmt.Sprintf("%s:topics:%d", k.name, len(in)))
	var out []filter.Topic
	for _, t := range in {
		if strings.HasPrefix(t.Name, k.prefix) {
			out = append(out, t)
		}
	}
	return out, nil
}

func (k keep) FilterGroups(ctx context.Context, mirror string, in []filter.Group) ([]filter.Group, error) {
	*k.calls = append(*k.calls, fmt.Sprintf("%s:groups:%d", k.name, len(in)))
	var out []filter.Group
	for _, g := range in {
		if strings.HasPrefix(g.ID, k.prefix) {
			out = append(out, g)
		}
	}
	return out, nil
}

func TestChainEachSeesThePreviousOutput(t *testing.T) {
	var calls []string
	c := filter.Chain(keep{name: "a", prefix: "app", calls: &calls}, keep{name: "b", prefix: "app-1", calls: &calls})
	in := filtertest.Topics("app-1", "app-2", "app-10", "other")
	out, err := c.FilterTopics(t.Context(), "m", in)
	if err != nil {
		t.Fatal(err)
	}
	if got := filtertest.TopicNames(out); !slices.Equal(got, []string{"app-1", "app-10"}) {
		t.Fatalf("chain output %v", got)
	}
	if want := []string{"a:topics:4", "b:topics:3"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
}

func TestChainSkipsUnhandledKindsAndStopsWhenEmpty(t *testing.T) {
	var calls []string
	acls := filter.Funcs{Name: "acl-drop-all", ACLs: func(ctx context.Context, mirror string, in []filter.ACLBinding) ([]filter.ACLBinding, error) {
		calls = append(calls, fmt.Sprintf("acls:%d", len(in)))
		return nil, nil
	}}
	c := filter.Chain(acls, keep{name: "a", prefix: "nothing-matches", calls: &calls}, keep{name: "b", prefix: "", calls: &calls})
	if got := c.Info().Kinds; !slices.Equal(got, []filter.Kind{filter.Topics, filter.Groups, filter.ACLs}) {
		t.Fatalf("chain kinds %v", got)
	}
	out, err := c.FilterGroups(t.Context(), "m", filtertest.Groups("g1", "g2"))
	if err != nil || len(out) != 0 {
		t.Fatalf("FilterGroups = %v, %v; want nothing", out, err)
	}
	// The ACL filter is not asked about groups; b is not called with an
	// empty batch.
	if want := []string{"a:groups:2"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	calls = nil
	acl := filtertest.TopicACL("t", "User:x", "READ")
	out2, err := c.FilterACLs(t.Context(), "m", []filter.ACLBinding{acl})
	if err != nil || len(out2) != 0 {
		t.Fatalf("FilterACLs = %v, %v", out2, err)
	}
	if want := []string{"acls:1"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
}

func TestChainWithoutHandlerReturnsInput(t *testing.T) {
	in := filtertest.Groups("a", "b")
	for _, c := range []filter.Filter{filter.Chain(), filter.Chain(filter.Funcs{Name: "t", Topics: func(context.Context, string, []filter.Topic) ([]filter.Topic, error) { return nil, nil }})} {
		out, err := c.FilterGroups(t.Context(), "m", in)
		if err != nil || !slices.Equal(out, in) {
			t.Fatalf("%s: FilterGroups = %v, %v; want the input", c.Info().Name, out, err)
		}
	}
}

func TestChainFlattens(t *testing.T) {
	var calls []string
	a := keep{name: "a", prefix: "", calls: &calls}
	b := keep{name: "b", prefix: "", calls: &calls}
	c := keep{name: "c", prefix: "x", calls: &calls}
	_, err := filter.Chain(filter.Chain(a, b), c).FilterTopics(t.Context(), "m", filtertest.Topics("y"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a:topics:1", "b:topics:1", "c:topics:1"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	// bad is third in the flattened chain: the error names its position.
	bad := filter.Funcs{Name: "bad", Topics: func(context.Context, string, []filter.Topic) ([]filter.Topic, error) {
		return nil, errors.New("boom")
	}}
	_, err = filter.Chain(filter.Chain(a, b), bad).FilterTopics(t.Context(), "m", filtertest.Topics("y"))
	if err == nil || !strings.Contains(err.Error(), `filter "bad" (3 of 3 in the chain) on 1 topics of mirror "m": boom`) {
		t.Fatalf("error %v", err)
	}
}

func TestChainRejectsInventedOrChangedItems(t *testing.T) {
	cases := map[string]func([]filter.Topic) []filter.Topic{
		"invented": func(in []filter.Topic) []filter.Topic { return append(in, filtertest.Topics("new")...) },
		"twice":    func(in []filter.Topic) []filter.Topic { return append(in, in[0]) },
		"renamed": func(in []filter.Topic) []filter.Topic {
			out := slices.Clone(in)
			out[0].Name = "renamed"
			return out
		},
		"config changed": func(in []filter.Topic) []filter.Topic {
			out := slices.Clone(in)
			out[1].Configs = map[string]string{"cleanup.policy": "compact"}
			return out
		},
		"partitions changed": func(in []filter.Topic) []filter.Topic {
			out := slices.Clone(in)
			out[1].Partitions = 99
			return out
		},
	}
	for name, mangle := range cases {
		f := filter.Funcs{Name: "mangler", Topics: func(_ context.Context, _ string, in []filter.Topic) ([]filter.Topic, error) {
			return mangle(in), nil
		}}
		_, err := filter.Chain(f).FilterTopics(t.Context(), "m", filtertest.Topics("a", "b"))
		if !errors.Is(err, filter.ErrInvalidOutput) || !strings.Contains(err.Error(), `"mangler"`) {
			t.Errorf("%s: error %v, want ErrInvalidOutput naming the filter", name, err)
		}
	}
}

func TestChainPassesErrorsAndContext(t *testing.T) {
	unavailable := filter.Funcs{Name: "remote", Groups: func(context.Context, string, []filter.Group) ([]filter.Group, error) {
		return nil, fmt.Errorf("policy service down: %w", filter.ErrUnavailable)
	}}
	out, err := filter.Chain(unavailable).FilterGroups(t.Context(), "m", filtertest.Groups("g"))
	if !errors.Is(err, filter.ErrUnavailable) || out != nil {
		t.Fatalf("FilterGroups = %v, %v; want nil and ErrUnavailable", out, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, f := range []filter.Filter{filter.Chain(), filter.Chain(unavailable), filter.Funcs{Name: "x"}} {
		if _, err := f.FilterTopics(ctx, "m", filtertest.Topics("t")); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: FilterTopics with a canceled context: %v", f.Info().Name, err)
		}
	}
}

func TestChainNilPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "filter 2 of 2 is nil") {
			t.Fatalf("recovered %v", r)
		}
	}()
	filter.Chain(filter.Funcs{Name: "x"}, nil)
}

func TestVerifyOutput(t *testing.T) {
	in := filtertest.Groups("a", "b", "b")
	ok := [][]filter.Group{nil, {}, in, {in[2], in[0]}, {in[1], in[2]}}
	for _, out := range ok {
		if err := filter.VerifyOutput(in, out); err != nil {
			t.Errorf("VerifyOutput(%v): %v", filtertest.GroupIDs(out), err)
		}
	}
	changed := in[0]
	changed.State = "Stable"
	bad := [][]filter.Group{append(slices.Clone(in), in[0]), {in[0], in[0]}, {changed}, filtertest.Groups("c")}
	for _, out := range bad {
		if err := filter.VerifyOutput(in, out); !errors.Is(err, filter.ErrInvalidOutput) {
			t.Errorf("VerifyOutput(%v) = %v, want ErrInvalidOutput", out, err)
		}
	}
	acl := filtertest.TopicACL("t", "User:a", "READ")
	other := acl
	other.Host = "10.0.0.1"
	if err := filter.VerifyOutput([]filter.ACLBinding{acl}, []filter.ACLBinding{other}); !errors.Is(err, filter.ErrInvalidOutput) || !strings.Contains(err.Error(), "TOPIC:LITERAL:t User:a@10.0.0.1 READ ALLOW") {
		t.Errorf("ACL not in input: %v", err)
	}
}

// LastCommit is part of a group: another instant is a changed group; the
// same instant in another location, or without its monotonic reading (as
// after an RPC), is the same group.
func TestVerifyOutputComparesLastCommitAsAnInstant(t *testing.T) {
	t.Parallel()
	at := time.Now()
	in := []filter.Group{{ID: "g", Kind: filter.GroupConsumer, State: "Empty", LastCommit: at}}
	same := in[0]
	same.LastCommit = at.Round(0).In(time.FixedZone("X", -7*3600))
	if err := filter.VerifyOutput(in, []filter.Group{same}); err != nil {
		t.Errorf("the same instant elsewhere: %v", err)
	}
	other := in[0]
	other.LastCommit = at.Add(time.Nanosecond)
	if err := filter.VerifyOutput(in, []filter.Group{other}); !errors.Is(err, filter.ErrInvalidOutput) || !strings.Contains(err.Error(), `group "g" was changed`) {
		t.Errorf("another LastCommit: %v, want ErrInvalidOutput naming the changed group", err)
	}
	unknown := in[0]
	unknown.LastCommit = time.Time{}
	if err := filter.VerifyOutput(in, []filter.Group{unknown}); !errors.Is(err, filter.ErrInvalidOutput) {
		t.Errorf("LastCommit dropped: %v, want ErrInvalidOutput", err)
	}
}

func TestKeptMarksEachOutputItemOnce(t *testing.T) {
	in := filtertest.Topics("a", "b", "b", "c")
	in[2].Configs = map[string]string{"cleanup.policy": "compact"}
	cases := []struct {
		out  []filter.Topic
		want []bool
	}{
		{nil, []bool{false, false, false, false}},
		{[]filter.Topic{in[3], in[0]}, []bool{true, false, false, true}},
		{[]filter.Topic{in[2]}, []bool{false, false, true, false}}, // equal name, other configs: the second b
		{filtertest.Topics("b", "b")[:1], []bool{false, true, false, false}},
		{[]filter.Topic{in[2], in[1]}, []bool{false, true, true, false}},
	}
	for _, c := range cases {
		got, err := filter.Kept(in, c.out)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Kept(%v) = %v, %v; want %v", filtertest.TopicNames(c.out), got, err, c.want)
		}
	}
	twice := filtertest.Topics("a", "a")
	if _, err := filter.Kept(in, twice); !errors.Is(err, filter.ErrInvalidOutput) || !strings.Contains(err.Error(), `topic "a"`) {
		t.Errorf("an item returned twice: %v", err)
	}
	changed := filtertest.Topics("c")
	changed[0].Partitions = 9
	if _, err := filter.Kept(in, changed); !errors.Is(err, filter.ErrInvalidOutput) || !strings.Contains(err.Error(), `topic "c" was changed`) {
		t.Errorf("a changed item: %v", err)
	}
}

func TestIsInternal(t *testing.T) {
	cases := []struct {
		tp   filter.Topic
		want bool
	}{
		{filter.Topic{Name: "__consumer_offsets"}, true},
		{filter.Topic{Name: "__anything"}, true},
		{filter.Topic{Name: "flagged", Internal: true}, true},
		{filter.Topic{Name: "_one"}, false},
		{filter.Topic{Name: "orders__v2"}, false},
	}
	for _, c := range cases {
		if got := c.tp.IsInternal(); got != c.want {
			t.Errorf("%q internal=%v: IsInternal = %v", c.tp.Name, c.tp.Internal, got)
		}
	}
}

func TestInfoValidate(t *testing.T) {
	ok := filter.Info{Name: "regex", ProtocolMajor: filter.ProtocolMajor, Kinds: []filter.Kind{filter.Topics}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]filter.Info{
		"no name":        {ProtocolMajor: filter.ProtocolMajor, Kinds: []filter.Kind{filter.Topics}},
		"bad name":       {Name: "Regex", ProtocolMajor: filter.ProtocolMajor, Kinds: []filter.Kind{filter.Topics}},
		"major":          {Name: "r", ProtocolMajor: filter.ProtocolMajor + 1, Kinds: []filter.Kind{filter.Topics}},
		"negative minor": {Name: "r", ProtocolMajor: filter.ProtocolMajor, ProtocolMinor: -1, Kinds: []filter.Kind{filter.Topics}},
		"no kinds":       {Name: "r", ProtocolMajor: filter.ProtocolMajor},
		"unknown kind":   {Name: "r", ProtocolMajor: filter.ProtocolMajor, Kinds: []filter.Kind{"users"}},
		"duplicate kind": {Name: "r", ProtocolMajor: filter.ProtocolMajor, Kinds: []filter.Kind{filter.Groups, filter.Groups}},
	}
	for name, i := range bad {
		if err := i.Validate(); !errors.Is(err, filter.ErrIncompatible) {
			t.Errorf("%s: %v, want ErrIncompatible", name, err)
		}
	}
}

// The SDK's own filters meet the contract.
func TestConformanceFuncs(t *testing.T) {
	dropOdd := filter.Funcs{Name: "drop-odd", Topics: func(_ context.Context, _ string, in []filter.Topic) ([]filter.Topic, error) {
		var out []filter.Topic
		for i, tp := range in {
			if i%2 == 0 {
				out = append(out, tp)
			}
		}
		return out, nil
	}}
	filtertest.Run(t, dropOdd)
}

func TestConformanceChain(t *testing.T) {
	appOnly := filter.Funcs{Name: "app-only", Topics: func(_ context.Context, _ string, in []filter.Topic) ([]filter.Topic, error) {
		var out []filter.Topic
		for _, tp := range in {
			if strings.HasPrefix(tp.Name, "app-") {
				out = append(out, tp)
			}
		}
		return out, nil
	}}
	allGroups := filter.Funcs{Name: "all-groups", Groups: func(_ context.Context, _ string, in []filter.Group) ([]filter.Group, error) {
		return in, nil
	}}
	filtertest.Run(t, filter.Chain(appOnly, allGroups))
}
