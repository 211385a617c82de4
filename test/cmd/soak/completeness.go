package main

import (
	"fmt"
	"slices"
	"sort"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// Seen is one version of a soaked object as the API server persisted it
// (through the watch, or in a writer's response): its content hash and the
// revision number it was stamped with (0 if unstamped).
type Seen struct {
	Hash     string
	Revision int64
}

// Recorded is one RolloutRevision of a soaked object: its content hash
// and the revision numbers it was live under (the newest
// revisions.MaxNumbers of them).
type Recorded struct {
	Hash    string
	Numbers []int64
}

// Completeness is the comparison of what was persisted with what history holds.
type Completeness struct {
	// Contents is the number of distinct persisted contents; Recorded the
	// number of RolloutRevisions.
	Contents, Recorded int
	// Problems lists every mismatch; none means complete.
	Problems []string
}

// CheckHistory compares the persisted versions of one object with its
// history: every persisted content is recorded once, under every number
// it was stamped with; no number names two contents; history holds no
// content that was never persisted. With watchGaps > 0 the watch may have
// missed versions, so a recorded content never seen is reported as
// unverifiable rather than as a problem.
func CheckHistory(object string, seen []Seen, recorded []Recorded, watchGaps int) (Completeness, []string) {
	var notes []string
	c := Completeness{Recorded: len(recorded)}
	stamped := map[string]map[int64]bool{}
	for _, s := range seen {
		if stamped[s.Hash] == nil {
			stamped[s.Hash] = map[int64]bool{}
		}
		if s.Revision > 0 {
			stamped[s.Hash][s.Revision] = true
		}
	}
	c.Contents = len(stamped)
	byHash := map[string][]int64{}
	owner := map[int64]string{}
	for _, r := range recorded {
		if _, dup := byHash[r.Hash]; dup {
			c.Problems = append(c.Problems, fmt.Sprintf("%s: content %s recorded in two RolloutRevisions", object, r.Hash))
		}
		byHash[r.Hash] = r.Numbers
		for _, n := range r.Numbers {
			if other, taken := owner[n]; taken && other != r.Hash {
				c.Problems = append(c.Problems, fmt.Sprintf("%s: revision %d names both %s and %s", object, n, other, r.Hash))
			}
			owner[n] = r.Hash
		}
	}
	for _, h := range sortedKeys(stamped) {
		nums, ok := byHash[h]
		if !ok {
			c.Problems = append(c.Problems, fmt.Sprintf("%s: persisted content %s (stamped %v) is not in history", object, h, keys64(stamped[h])))
			continue
		}
		have := map[int64]bool{}
		for _, n := range nums {
			have[n] = true
		}
		older := 0
		for _, n := range keys64(stamped[h]) {
			switch {
			case have[n]:
			case len(nums) >= revisions.MaxNumbers && n < slices.Min(nums):
				// A record keeps its content's newest numbers only.
				older++
			default:
				c.Problems = append(c.Problems, fmt.Sprintf("%s: content %s was stamped revision %d, history records it as %v", object, h, n, nums))
			}
		}
		if older > 0 {
			notes = append(notes, fmt.Sprintf("%s: content %s keeps its newest %d numbers; %d older ones it was stamped with are dropped, as a record does", object, h, revisions.MaxNumbers, older))
		}
	}
	for _, r := range recorded {
		if _, ok := stamped[r.Hash]; ok {
			continue
		}
		msg := fmt.Sprintf("%s: history holds content %s (revisions %v) that was never seen persisted", object, r.Hash, r.Numbers)
		if watchGaps > 0 {
			notes = append(notes, msg+" (the watch had gaps: unverifiable)")
		} else {
			c.Problems = append(c.Problems, msg)
		}
	}
	return c, notes
}

func keys64(m map[int64]bool) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
