// Package spelling finds the word someone probably meant, for error
// messages that say "did you mean …?" (configuration variables, gantry.yaml
// keys).
package spelling

import "sort"

// Closest is the known word nearest to word by edit distance, when one is
// within three edits; ties go to the first in sorted order.
func Closest(word string, known []string) (string, bool) {
	sorted := append([]string(nil), known...)
	sort.Strings(sorted)
	best, bestDist := "", 4
	for _, k := range sorted {
		if d := distance(word, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best, best != ""
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
