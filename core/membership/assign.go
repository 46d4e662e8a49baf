package membership

import (
	"cmp"
	"slices"
)

// Candidate is one member of a generation as the assignor sees it.
type Candidate struct {
	// ID is the member's id in the group (the broker's member id).
	ID string
	// Items are the work items the member can run. An item no candidate
	// lists is assigned to nobody.
	Items []string
	// Owned are the items the member holds when it joins: what it was
	// given before and has not revoked.
	Owned []string
	// OwnedGeneration is the generation in which the member was last given
	// Owned. When two candidates claim one item (a member that lost its
	// session and has not noticed yet), the later generation keeps it.
	OwnedGeneration int32
}

// Assign spreads the items the candidates can run over them and returns each
// candidate's items (sorted; every candidate has an entry, maybe empty).
//
// It is a pure function: the same candidates (in any order) and weights give
// the same result. Every item some candidate lists goes to exactly one
// candidate that lists it.
//
// Without weights (weights empty) the count of items per candidate differs by
// at most one when every candidate lists every item. With weights (an item's
// cost, say bytes/s; an item missing from weights costs the mean of the
// known ones), each candidate's load ends within the largest item's weight
// of the mean load.
//
// It is sticky: an item stays with its current owner (from Owned) as long as
// the owner lists it and keeping it respects the bound above; so a candidate
// joining takes about items/N of them from the others, and a candidate
// leaving moves only its own items. The rest go to the candidates with the
// least load, heaviest items first.
func Assign(members []Candidate, weights map[string]float64) map[string][]string {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b Candidate) int { return cmp.Compare(a.ID, b.ID) })
	out := make(map[string][]string, len(ms))
	for _, m := range ms {
		out[m.ID] = []string{}
	}
	if len(ms) == 0 {
		return out
	}

	// Who can run what, and the items in a fixed order.
	can := make([]map[string]bool, len(ms))
	var items []string
	seen := make(map[string]bool)
	for i, m := range ms {
		can[i] = make(map[string]bool, len(m.Items))
		for _, it := range m.Items {
			can[i][it] = true
			if !seen[it] {
				seen[it] = true
				items = append(items, it)
			}
		}
	}
	slices.Sort(items)
	if len(items) == 0 {
		return out
	}

	// The current owner of each item: a claimant that can still run it;
	// on a double claim the later generation, then the lower member id.
	owner := make(map[string]int, len(items))
	for i, m := range ms {
		for _, it := range m.Owned {
			if !can[i][it] {
				continue
			}
			if j, ok := owner[it]; !ok || m.OwnedGeneration > ms[j].OwnedGeneration {
				owner[it] = i
			}
		}
	}
	owned := make([][]string, len(ms))
	for _, it := range items {
		if i, ok := owner[it]; ok {
			owned[i] = append(owned[i], it)
		}
	}

	w := itemWeights(items, weights)
	var assigned []map[string]bool
	if w == nil {
		assigned = assignCounts(ms, can, items, owned)
	} else {
		assigned = assignWeights(ms, can, items, owned, w)
	}
	for i, m := range ms {
		for _, it := range items {
			if assigned[i][it] {
				out[m.ID] = append(out[m.ID], it)
			}
		}
	}
	return out
}

// itemWeights returns every item's weight, or nil without weights: a
// missing or non-positive weight costs the mean of the known ones.
func itemWeights(items []string, weights map[string]float64) map[string]float64 {
	var sum float64
	var n int
	for _, it := range items {
		if v, ok := weights[it]; ok && v > 0 {
			sum += v
			n++
		}
	}
	if n == 0 {
		return nil
	}
	mean := sum / float64(n)
	w := make(map[string]float64, len(items))
	for _, it := range items {
		if v, ok := weights[it]; ok && v > 0 {
			w[it] = v
		} else {
			w[it] = mean
		}
	}
	return w
}

// assignCounts gives each member floor(n/m) items, and one more to n%m of
// them: those that own the most (then the lowest ids), so that the extra
// slots go where items already are. Owners keep their items up to their
// quota; the rest go to the members with the fewest, the items fewest
// members can run first.
func assignCounts(ms []Candidate, can []map[string]bool, items []string, owned [][]string) []map[string]bool {
	n, m := len(items), len(ms)
	quota := make([]int, m)
	order := make([]int, m)
	for i := range order {
		order[i] = i
		quota[i] = n / m
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(owned[b]), len(owned[a])) })
	for _, i := range order[:n%m] {
		quota[i]++
	}

	assigned := make([]map[string]bool, m)
	count := make([]int, m)
	taken := make(map[string]bool, n)
	for i := range ms {
		assigned[i] = make(map[string]bool, quota[i])
		for _, it := range owned[i] {
			if count[i] == quota[i] {
				break
			}
			assigned[i][it] = true
			taken[it] = true
			count[i]++
		}
	}
	// The items with the fewest possible members first, so that an item
	// only some can run finds room with them.
	eligible := func(it string) int {
		k := 0
		for i := range ms {
			if can[i][it] {
				k++
			}
		}
		return k
	}
	rest := make([]string, 0, n-len(taken))
	ways := make(map[string]int, n-len(taken))
	for _, it := range items {
		if !taken[it] {
			rest = append(rest, it)
			ways[it] = eligible(it)
		}
	}
	slices.SortStableFunc(rest, func(a, b string) int { return cmp.Compare(ways[a], ways[b]) })
	for _, it := range rest {
		// The eligible member with the fewest items, preferring one
		// under its quota; the lowest index on ties (ms is sorted).
		best := -1
		for i := range ms {
			if !can[i][it] {
				continue
			}
			if best < 0 || better(count[i] < quota[i], count[best] < quota[best], count[i], count[best]) {
				best = i
			}
		}
		assigned[best][it] = true
		count[best]++
	}
	return assigned
}

// better reports whether a candidate (under quota aUnder, count a) beats
// the best so far (bUnder, b): under quota first, then fewer items.
func better(aUnder, bUnder bool, a, b int) bool {
	if aUnder != bUnder {
		return aUnder
	}
	return a < b
}

// assignWeights keeps each owner's items, heaviest first, while its load
// stays within the mean (an owner always keeps its heaviest item), then
// gives the rest, heaviest first, to the eligible member with the least
// load (then the fewest items, then the lowest id).
func assignWeights(ms []Candidate, can []map[string]bool, items []string, owned [][]string, w map[string]float64) []map[string]bool {
	var total float64
	for _, it := range items {
		total += w[it]
	}
	mean := total / float64(len(ms))
	heavyFirst := func(a, b string) int {
		if c := cmp.Compare(w[b], w[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	}

	assigned := make([]map[string]bool, len(ms))
	load := make([]float64, len(ms))
	count := make([]int, len(ms))
	taken := make(map[string]bool, len(items))
	for i := range ms {
		assigned[i] = make(map[string]bool)
		mine := slices.Clone(owned[i])
		slices.SortFunc(mine, heavyFirst)
		for _, it := range mine {
			if count[i] > 0 && load[i]+w[it] > mean {
				continue
			}
			assigned[i][it] = true
			taken[it] = true
			load[i] += w[it]
			count[i]++
		}
	}
	rest := make([]string, 0, len(items)-len(taken))
	for _, it := range items {
		if !taken[it] {
			rest = append(rest, it)
		}
	}
	slices.SortFunc(rest, heavyFirst)
	for _, it := range rest {
		best := -1
		for i := range ms {
			if !can[i][it] {
				continue
			}
			if best < 0 || load[i] < load[best] || load[i] == load[best] && count[i] < count[best] {
				best = i
			}
		}
		assigned[best][it] = true
		load[best] += w[it]
		count[best]++
	}
	return assigned
}
