package membership

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// itemsN returns n items named like the engine's partitions.
func itemsN(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m/t%d/%d", i%7, i)
	}
	slices.Sort(out)
	return out
}

// candidates returns members ids with every item and the owned items of prev.
func candidates(ids []string, items []string, prev map[string][]string) []Candidate {
	out := make([]Candidate, len(ids))
	for i, id := range ids {
		out[i] = Candidate{ID: id, Items: items, Owned: prev[id], OwnedGeneration: 1}
	}
	return out
}

func TestAssignTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		members []Candidate
		weights map[string]float64
		want    map[string][]string
	}{
		{name: "no members", want: map[string][]string{}},
		{name: "no items", members: []Candidate{{ID: "a"}}, want: map[string][]string{"a": {}}},
		{
			name:    "even split, lowest ids take the extra",
			members: candidates([]string{"b", "a"}, []string{"1", "2", "3"}, nil),
			want:    map[string][]string{"a": {"1", "3"}, "b": {"2"}},
		},
		{
			name:    "owners keep their items",
			members: candidates([]string{"a", "b"}, []string{"1", "2", "3", "4"}, map[string][]string{"a": {"3", "4"}, "b": {"1", "2"}}),
			want:    map[string][]string{"a": {"3", "4"}, "b": {"1", "2"}},
		},
		{
			name:    "an owner over its quota keeps the first of its items",
			members: candidates([]string{"a", "b"}, []string{"1", "2", "3", "4"}, map[string][]string{"a": {"1", "2", "3", "4"}}),
			want:    map[string][]string{"a": {"1", "2"}, "b": {"3", "4"}},
		},
		{
			name:    "the extra slot goes to the member that owns more",
			members: candidates([]string{"a", "b"}, []string{"1", "2", "3"}, map[string][]string{"b": {"1", "2", "3"}}),
			want:    map[string][]string{"a": {"3"}, "b": {"1", "2"}},
		},
		{
			name: "an item goes only to a member that can run it",
			members: []Candidate{
				{ID: "a", Items: []string{"1", "2", "3"}},
				{ID: "b", Items: []string{"1"}},
			},
			want: map[string][]string{"a": {"2", "3"}, "b": {"1"}},
		},
		{
			name: "an owned item the owner can no longer run moves",
			members: []Candidate{
				{ID: "a", Items: []string{"2"}, Owned: []string{"1", "2"}},
				{ID: "b", Items: []string{"1", "2"}},
			},
			want: map[string][]string{"a": {"2"}, "b": {"1"}},
		},
		{
			name: "a double claim goes to the later generation",
			members: []Candidate{
				{ID: "a", Items: []string{"1", "2"}, Owned: []string{"1"}, OwnedGeneration: 3},
				{ID: "b", Items: []string{"1", "2"}, Owned: []string{"1"}, OwnedGeneration: 5},
			},
			want: map[string][]string{"a": {"2"}, "b": {"1"}},
		},
		{
			name:    "weights: heaviest first to the least loaded",
			members: candidates([]string{"a", "b"}, []string{"1", "2", "3", "4"}, nil),
			weights: map[string]float64{"1": 10, "2": 1, "3": 1, "4": 8},
			want:    map[string][]string{"a": {"1"}, "b": {"2", "3", "4"}},
		},
		{
			name:    "weights: an unknown weight costs the mean of the known",
			members: candidates([]string{"a", "b"}, []string{"1", "2", "3"}, nil),
			weights: map[string]float64{"1": 4, "2": 2},
			want:    map[string][]string{"a": {"1"}, "b": {"2", "3"}},
		},
		{
			name:    "weights: an owner keeps what fits in the mean",
			members: candidates([]string{"a", "b"}, []string{"1", "2", "3", "4"}, map[string][]string{"a": {"1", "2", "3", "4"}}),
			weights: map[string]float64{"1": 3, "2": 3, "3": 1, "4": 1},
			want:    map[string][]string{"a": {"1", "3"}, "b": {"2", "4"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Assign(tt.members, tt.weights)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Assign = %v, want %v", got, tt.want)
			}
		})
	}
}

// checkAssignment checks the invariants of every assignment: each item of
// items exactly once, to a member that can run it, and nothing else.
func checkAssignment(t *testing.T, members []Candidate, got map[string][]string) {
	t.Helper()
	can := map[string]map[string]bool{}
	all := map[string]bool{}
	for _, m := range members {
		can[m.ID] = map[string]bool{}
		for _, it := range m.Items {
			can[m.ID][it] = true
			all[it] = true
		}
	}
	if len(got) != len(members) {
		t.Fatalf("%d members in the assignment, want %d", len(got), len(members))
	}
	seen := map[string]string{}
	for id, items := range got {
		if !slices.IsSorted(items) {
			t.Errorf("member %s's items are not sorted", id)
		}
		for _, it := range items {
			if prev, ok := seen[it]; ok {
				t.Fatalf("item %s assigned to %s and %s", it, prev, id)
			}
			seen[it] = id
			if !can[id][it] {
				t.Fatalf("item %s assigned to %s, which cannot run it", it, id)
			}
		}
	}
	if len(seen) != len(all) {
		t.Fatalf("%d items assigned, want %d", len(seen), len(all))
	}
}

// spread returns the smallest and largest number of items of a member.
func spread(got map[string][]string) (lo, hi int) {
	lo = math.MaxInt
	for _, items := range got {
		lo, hi = min(lo, len(items)), max(hi, len(items))
	}
	return lo, hi
}

// owners inverts an assignment.
func owners(a map[string][]string) map[string]string {
	out := map[string]string{}
	for id, items := range a {
		for _, it := range items {
			out[it] = id
		}
	}
	return out
}

// checkScenario runs the properties for one shape: n items over m members
// (m >= 1), then one member joining, then one leaving.
func checkScenario(t *testing.T, n, m int, leaver int) {
	t.Helper()
	items := itemsN(n)
	ids := make([]string, m)
	for i := range ids {
		ids[i] = fmt.Sprintf("member-%03d", i)
	}
	first := Assign(candidates(ids, items, nil), nil)
	checkAssignment(t, candidates(ids, items, nil), first)
	if lo, hi := spread(first); hi-lo > 1 {
		t.Fatalf("n=%d m=%d: spread %d..%d", n, m, lo, hi)
	}
	// Deterministic, whatever the order of the members.
	rev := candidates(ids, items, nil)
	slices.Reverse(rev)
	if again := Assign(rev, nil); !reflect.DeepEqual(again, first) {
		t.Fatalf("n=%d m=%d: the order of the members changed the assignment", n, m)
	}
	// A stable group moves nothing.
	if same := Assign(candidates(ids, items, first), nil); !reflect.DeepEqual(same, first) {
		t.Fatalf("n=%d m=%d: a rebalance without change moved items", n, m)
	}

	// One joins: only the newcomer's items move, about n/(m+1).
	joined := append(slices.Clone(ids), "member-new")
	afterJoin := Assign(candidates(joined, items, first), nil)
	checkAssignment(t, candidates(joined, items, first), afterJoin)
	if lo, hi := spread(afterJoin); hi-lo > 1 {
		t.Fatalf("n=%d m=%d join: spread %d..%d", n, m, lo, hi)
	}
	was, now := owners(first), owners(afterJoin)
	moved := 0
	for it, o := range now {
		if was[it] != o {
			moved++
			if o != "member-new" {
				t.Fatalf("n=%d m=%d join: item %s moved from %s to %s, not to the newcomer", n, m, it, was[it], o)
			}
		}
	}
	if want := (n + m) / (m + 1); moved > want {
		t.Fatalf("n=%d m=%d join: %d items moved, want at most ceil(n/(m+1)) = %d", n, m, moved, want)
	}

	// One leaves: only its items move.
	if m < 2 {
		return
	}
	gone := ids[leaver%m]
	left := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == gone })
	afterLeave := Assign(candidates(left, items, first), nil)
	checkAssignment(t, candidates(left, items, first), afterLeave)
	if lo, hi := spread(afterLeave); hi-lo > 1 {
		t.Fatalf("n=%d m=%d leave: spread %d..%d", n, m, lo, hi)
	}
	for it, o := range owners(afterLeave) {
		if was[it] != gone && was[it] != o {
			t.Fatalf("n=%d m=%d leave of %s: item %s moved from %s to %s", n, m, gone, it, was[it], o)
		}
	}
}

func TestAssignProperties(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 150 {
		n, m := r.IntN(200), 1+r.IntN(12)
		checkScenario(t, n, m, r.IntN(m))
	}
	checkScenario(t, 30, 3, 1)
	checkScenario(t, 10000, 3, 2)
}

// TestAssignWeightsBound: with weights, every member's load ends within the
// largest item's weight of the mean, from scratch and after a join.
func TestAssignWeightsBound(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for range 150 {
		n, m := 1+r.IntN(150), 1+r.IntN(8)
		items := itemsN(n)
		w := map[string]float64{}
		var maxW, total float64
		for _, it := range items {
			w[it] = 1 + r.Float64()*r.Float64()*1000
			maxW = max(maxW, w[it])
			total += w[it]
		}
		ids := make([]string, m)
		for i := range ids {
			ids[i] = fmt.Sprintf("m%d", i)
		}
		first := Assign(candidates(ids, items, nil), w)
		checkAssignment(t, candidates(ids, items, nil), first)
		check := func(what string, a map[string][]string, members int) {
			mean := total / float64(members)
			for id, its := range a {
				var load float64
				for _, it := range its {
					load += w[it]
				}
				if math.Abs(load-mean) > maxW+1e-6 {
					t.Fatalf("%s n=%d m=%d: %s's load %.1f is more than the largest weight %.1f from the mean %.1f", what, n, m, id, load, maxW, mean)
				}
			}
		}
		check("first", first, m)
		joined := append(slices.Clone(ids), "new")
		after := Assign(candidates(joined, items, first), w)
		checkAssignment(t, candidates(joined, items, first), after)
		check("join", after, m+1)
		if again := Assign(candidates(joined, items, first), w); !reflect.DeepEqual(again, after) {
			t.Fatal("weighted Assign is not deterministic")
		}
	}
}

// FuzzAssign: whatever the members, their capabilities and their claims,
// every item someone can run goes to exactly one member that can run it.
func FuzzAssign(f *testing.F) {
	f.Add([]byte{3, 30, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 1, 255})
	f.Add([]byte{7, 100, 9, 9, 9, 1, 200, 3, 17})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		m, n := 1+int(data[0]%9), int(data[1])
		data = data[2:]
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		items := itemsN(n)
		members := make([]Candidate, m)
		for i := range members {
			members[i].ID = fmt.Sprintf("m%d", i)
			members[i].OwnedGeneration = int32(next() % 4)
			for j, it := range items {
				b := next()
				if b%5 != 0 || i == j%m { // most members can run most items
					members[i].Items = append(members[i].Items, it)
				}
				if b%3 == 0 {
					members[i].Owned = append(members[i].Owned, it)
				}
			}
		}
		var weights map[string]float64
		if next()%2 == 1 {
			weights = map[string]float64{}
			for _, it := range items {
				weights[it] = float64(next())
			}
		}
		got := Assign(members, weights)
		checkAssignment(t, members, got)
		if again := Assign(members, weights); !reflect.DeepEqual(again, got) {
			t.Fatal("Assign is not deterministic")
		}
	})
}

// BenchmarkAssign10000: a rebalance of 10,000 items when a fourth member
// joins three (the leader's work in one generation).
func BenchmarkAssign10000(b *testing.B) {
	items := itemsN(10000)
	ids := []string{"a", "b", "c"}
	first := Assign(candidates(ids, items, nil), nil)
	joined := candidates(append(ids, "d"), items, first)
	b.ReportAllocs()
	for b.Loop() {
		Assign(joined, nil)
	}
}
