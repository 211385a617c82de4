package stage

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/waves"
)

// DefaultWaves is --waves by default: one cluster first, then the rest.
const DefaultWaves = "1,100%"

// waveEnd is one entry of --waves: how many clusters have been changed
// once its wave is done, as a count or as a percentage of the clusters.
type waveEnd struct {
	n       int
	percent bool
}

// WaveSpec is --waves parsed: each wave's end, cumulative.
type WaveSpec []waveEnd

// ParseWaves reads --waves: a comma-separated list of cumulative counts or
// percentages ("1,25%,100%": one cluster, then up to a quarter, then the
// rest), increasing, the last 100% (or a count that covers every cluster).
func ParseWaves(s string) (WaveSpec, error) {
	var spec WaveSpec
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		e := waveEnd{}
		num := part
		if strings.HasSuffix(part, "%") {
			e.percent, num = true, strings.TrimSuffix(part, "%")
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 || (e.percent && n > 100) {
			return nil, fmt.Errorf("--waves %q: %q is not a count of clusters (1, 2…) or a percentage (1%%…100%%): write e.g. --waves 1,25%%,100%%", s, part)
		}
		e.n = n
		if len(spec) > 0 {
			prev := spec[len(spec)-1]
			if prev.percent == e.percent && e.n <= prev.n {
				return nil, fmt.Errorf("--waves %q: each wave ends after the one before it, and %q does not come after %q: the entries are cumulative (1,25%%,100%% is one cluster, then up to a quarter of them, then all)", s, part, prev.String())
			}
		}
		spec = append(spec, e)
	}
	return spec, nil
}

func (e waveEnd) String() string {
	if e.percent {
		return strconv.Itoa(e.n) + "%"
	}
	return strconv.Itoa(e.n)
}

// end is how many of n clusters are changed once the wave is done.
func (e waveEnd) end(n int) int {
	if e.percent {
		return int(math.Ceil(float64(n) * float64(e.n) / 100))
	}
	return min(e.n, n)
}

// Split cuts n ordered clusters into waves, as indexes: a wave that would
// add no cluster is left out. It is an error when the last wave leaves
// clusters out.
func (s WaveSpec) Split(n int) ([][]int, error) {
	var waves [][]int
	done := 0
	for _, e := range s {
		end := e.end(n)
		if end <= done {
			continue
		}
		w := make([]int, 0, end-done)
		for i := done; i < end; i++ {
			w = append(w, i)
		}
		waves, done = append(waves, w), end
	}
	if done < n {
		return nil, fmt.Errorf("--waves %s covers %d of the %d clusters: end it with 100%%, or select fewer clusters with -l", s, done, n)
	}
	return waves, nil
}

// String is the spec as written.
func (s WaveSpec) String() string {
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = e.String()
	}
	return strings.Join(parts, ",")
}

// Order sorts clusters by the value of the label (numbers as numbers,
// before words; clusters without it last; "" orders by name only), then
// by namespace and name.
func Order(clusters []*clusterv1.Cluster, label string) {
	slices.SortStableFunc(clusters, func(a, b *clusterv1.Cluster) int {
		if label != "" {
			av, aHas := a.Labels[label]
			bv, bHas := b.Labels[label]
			if c := waves.Compare(av, aHas, bv, bHas); c != 0 {
				return c
			}
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
}
