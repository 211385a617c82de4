package stage

import (
	"fmt"
	"strings"
	"testing"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestParseWavesAndSplit(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		n     int
		waves string
		err   string
	}{
		{"1,100%", 3, "[0] [1 2]", ""},
		{"1,100%", 1, "[0]", ""},
		{"1,25%,100%", 50, "[0] [1 2 3 4 5 6 7 8 9 10 11 12] [13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49]", ""},
		{"1,25%,100%", 2, "[0] [1]", ""},
		{"1,2%,100%", 3, "[0] [1 2]", ""}, // 2% of 3 is one cluster, done already: no empty wave
		{"100%", 4, "[0 1 2 3]", ""},
		{"2,5", 5, "[0 1] [2 3 4]", ""},
		{"2,5", 7, "", "--waves 2,5 covers 5 of the 7 clusters"},
		{"1,50%", 4, "", "covers 2 of the 4 clusters"},
		{"0,100%", 3, "", `"0" is not a count of clusters`},
		{"1,101%", 3, "", `"101%" is not a count`},
		{"1,x", 3, "", `"x" is not a count`},
		{"5,2,100%", 3, "", `"2" does not come after "5"`},
		{"50%,25%", 3, "", `"25%" does not come after "50%"`},
	} {
		t.Run(tc.spec+fmt.Sprintf("/%d", tc.n), func(t *testing.T) {
			spec, err := ParseWaves(tc.spec)
			var waves [][]int
			if err == nil {
				waves, err = spec.Split(tc.n)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(strings.Fields(fmt.Sprint(waves)), " "); got != "["+tc.waves+"]" {
				t.Fatalf("waves %s, want [%s]", got, tc.waves)
			}
		})
	}
}

func TestOrder(t *testing.T) {
	c := func(name string, wave ...string) *clusterv1.Cluster {
		cl := &clusterv1.Cluster{}
		cl.Namespace, cl.Name = "ns", name
		if len(wave) > 0 {
			cl.Labels = map[string]string{"rollout-guard.io/wave": wave[0]}
		}
		return cl
	}
	for _, tc := range []struct {
		name     string
		label    string
		clusters []*clusterv1.Cluster
		want     string
	}{
		{"by name", "", []*clusterv1.Cluster{c("b", "0"), c("a", "1")}, "a b"},
		{"numbers as numbers", "rollout-guard.io/wave", []*clusterv1.Cluster{c("a", "10"), c("b", "2"), c("c", "0")}, "c b a"},
		{"unlabelled last, then by name", "rollout-guard.io/wave", []*clusterv1.Cluster{c("z"), c("y", "1"), c("a")}, "y a z"},
		{"numbers before words", "rollout-guard.io/wave", []*clusterv1.Cluster{c("a", "canary"), c("b", "3")}, "b a"},
		{"a label nobody has", "tier", []*clusterv1.Cluster{c("b", "0"), c("a", "1")}, "a b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Order(tc.clusters, tc.label)
			var names []string
			for _, cl := range tc.clusters {
				names = append(names, cl.Name)
			}
			if got := strings.Join(names, " "); got != tc.want {
				t.Fatalf("order %s, want %s", got, tc.want)
			}
		})
	}
}
