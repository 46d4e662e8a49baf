package raw

import "strings"

// Suggest returns the candidate closest to s (case aside), if it is close
// enough to be a typo: within an edit distance of 2, or of a fifth of s's
// length for long names; else "". It words the "did you mean" hints of
// unknown variables here and of unknown keys in core/config.
func Suggest(s string, candidates []string) string {
	limit := 2
	if l := len(s) / 5; l > limit {
		limit = l
	}
	ls := strings.ToLower(s)
	best, bestDist := "", limit+1
	for _, c := range candidates {
		// The difference in length bounds the distance from below: a
		// candidate that cannot beat the best so far is not measured.
		if diff := len(c) - len(s); diff >= bestDist || -diff >= bestDist {
			continue
		}
		if d := Distance(ls, strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
