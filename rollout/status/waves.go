package status

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/waves"
)

// A fleet whose clusters carry the label rollout-guard.io/wave is a staged
// rollout: its view groups the clusters by wave, in the waves' order, and
// says of each cluster where it stands in the rollout.

// The states of a cluster in a staged rollout.
const (
	waveDone    = "done"
	waveRolling = "rolling"
	waveHeld    = "held"
	waveWaiting = "waiting"
	waveHalted  = "halted"
	wavePaused  = "paused"
)

// Staged reports whether a cluster of the fleet carries a wave.
func (r FleetReport) Staged() bool {
	for _, c := range r.Clusters {
		if c.Wave != "" {
			return true
		}
	}
	return false
}

// waveGroup is the clusters of one wave ("" for those without a wave).
type waveGroup struct {
	wave     string
	clusters []FleetCluster
}

// groupWaves groups the fleet's clusters by wave: numbers in order, then
// words, then the clusters without a wave; by namespace and name within
// a wave.
func groupWaves(r FleetReport) []waveGroup {
	byWave := map[string][]FleetCluster{}
	for _, c := range r.Clusters {
		byWave[c.Wave] = append(byWave[c.Wave], c)
	}
	var groups []waveGroup
	for w, cs := range byWave {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Namespace+"/"+cs[i].Name < cs[j].Namespace+"/"+cs[j].Name })
		groups = append(groups, waveGroup{wave: w, clusters: cs})
	}
	sort.Slice(groups, func(i, j int) bool {
		a, b := groups[i].wave, groups[j].wave
		return waves.Compare(a, a != "", b, b != "") < 0
	})
	return groups
}

// waveState is where a cluster stands in a staged rollout: halted
// (refused or stalled), paused, held by a Runtime Extension, rolling,
// done; a rolled-out cluster of a wave after one that is not done yet is
// waiting for its turn.
func waveState(c FleetCluster, earlierBusy bool) string {
	switch {
	case c.State == v1alpha1.ClusterRefused || c.State == v1alpha1.ClusterStalled:
		return waveHalted
	case c.State == v1alpha1.ClusterPaused:
		return wavePaused
	case c.HeldBy != "":
		return waveHeld
	case c.State == v1alpha1.ClusterRolling:
		return waveRolling
	case earlierBusy:
		return waveWaiting
	}
	return waveDone
}

// renderWaves draws a staged fleet wave by wave: a head per wave with its
// counts, then a line per cluster: where it stands and why. room is the
// lines there are for it (0 or less: as many as it takes).
func renderWaves(r FleetReport, room int) []string {
	var body []string
	busy := false
	nameW := 0
	for _, c := range r.Clusters {
		nameW = max(nameW, len(r.DisplayName(c)))
	}
	for _, g := range groupWaves(r) {
		counts := map[string]int{}
		var lines []string
		for _, c := range g.clusters {
			st := waveState(c, busy)
			counts[st]++
			line := fmt.Sprintf("  %-*s  %s", nameW, r.DisplayName(c), st)
			if why := c.Reason; why != "" && st != waveDone && st != waveWaiting {
				if c.HeldBy != "" {
					why = c.HeldBy
				}
				line += ": " + why
			}
			lines = append(lines, line)
		}
		name := "wave " + g.wave
		if g.wave == "" {
			name = "no wave"
		}
		var parts []string
		for _, st := range []string{waveHalted, wavePaused, waveHeld, waveRolling, waveWaiting, waveDone} {
			if counts[st] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
			}
		}
		body = append(body, fmt.Sprintf("%s (%d %s): %s", name, len(g.clusters), core.Plural(len(g.clusters), "cluster", "clusters"), strings.Join(parts, ", ")))
		body = append(body, lines...)
		if counts[waveDone]+counts[waveWaiting] < len(g.clusters) {
			busy = true
		}
	}
	if room > 0 && len(body) > room {
		hidden := len(body) - max(room-1, 0)
		body = append(body[:max(room-1, 0)], fmt.Sprintf("  ... %d more %s", hidden, core.Plural(hidden, "line", "lines")))
	}
	return body
}
