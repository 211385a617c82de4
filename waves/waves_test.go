package waves

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		wave   int
		ok     bool
		err    bool
	}{
		{"no label", nil, 0, false, false},
		{"wave 0", map[string]string{Label: "0"}, 0, true, false},
		{"wave 12", map[string]string{Label: "12"}, 12, true, false},
		{"negative", map[string]string{Label: "-1"}, 0, false, true},
		{"a word", map[string]string{Label: "canary"}, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wave, ok, err := Of(tc.labels)
			if wave != tc.wave || ok != tc.ok || (err != nil) != tc.err {
				t.Fatalf("Of(%v) = %d, %v, %v; want %d, %v, error %v", tc.labels, wave, ok, err, tc.wave, tc.ok, tc.err)
			}
		})
	}
}

func doneCluster(version string, at time.Time) *clusterv1.Cluster {
	c := &clusterv1.Cluster{}
	c.Generation = 4
	c.Spec.Topology.Version = version
	c.Status.Conditions = DoneConditions(4, at)
	return c
}

func TestAt(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	set := func(cond string, status metav1.ConditionStatus, at time.Time) func(*clusterv1.Cluster) {
		return func(c *clusterv1.Cluster) {
			for i := range c.Status.Conditions {
				if c.Status.Conditions[i].Type == cond {
					c.Status.Conditions[i].Status = status
					c.Status.Conditions[i].Reason = "SomeReason"
					c.Status.Conditions[i].LastTransitionTime = metav1.NewTime(at)
				}
			}
		}
	}
	drop := func(cond string) func(*clusterv1.Cluster) {
		return func(c *clusterv1.Cluster) {
			var kept []metav1.Condition
			for _, x := range c.Status.Conditions {
				if x.Type != cond {
					kept = append(kept, x)
				}
			}
			c.Status.Conditions = kept
		}
	}
	for _, tc := range []struct {
		name    string
		version string
		edit    func(*clusterv1.Cluster)
		done    bool
		since   time.Time
		waiting string
	}{
		{"done", "v1.35.2", nil, true, t0, ""},
		{"done, the latest transition is the start of the soak", "v1.35.2", set(clusterv1.ClusterWorkerMachinesReadyCondition, metav1.ConditionTrue, t0.Add(time.Minute)), true, t0.Add(time.Minute), ""},
		{"another version", "v1.36.1", nil, false, time.Time{}, "its topology is at v1.35.2, not v1.36.1"},
		{"rolling out", "v1.35.2", set(clusterv1.ClusterRollingOutCondition, metav1.ConditionTrue, t0), false, time.Time{}, "RollingOut is True (SomeReason)"},
		{"remediating", "v1.35.2", set(clusterv1.ClusterRemediatingCondition, metav1.ConditionTrue, t0), false, time.Time{}, "Remediating is True (SomeReason)"},
		{"a machine not ready", "v1.35.2", set(clusterv1.ClusterWorkerMachinesReadyCondition, metav1.ConditionFalse, t0), false, time.Time{}, "WorkerMachinesReady is False (SomeReason)"},
		{"no RollingOut condition yet: nothing rolls", "v1.35.2", drop(clusterv1.ClusterRollingOutCondition), true, t0, ""},
		{"no TopologyReconciled condition yet", "v1.35.2", drop(clusterv1.ClusterTopologyReconciledCondition), false, time.Time{}, "Cluster API has not reported TopologyReconciled yet"},
		{"a new generation not observed", "v1.35.2", func(c *clusterv1.Cluster) { c.Generation = 5 }, false, time.Time{}, "Cluster API has not observed generation 5 yet (TopologyReconciled is of 4)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := doneCluster("v1.35.2", t0)
			if tc.edit != nil {
				tc.edit(c)
			}
			p := At(c, tc.version)
			if p.Done != tc.done || !p.Since.Equal(tc.since) || p.Waiting != tc.waiting {
				t.Fatalf("At = %+v; want done %v since %s waiting %q", p, tc.done, tc.since, tc.waiting)
			}
		})
	}
}

func TestSoaked(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	p := Progress{Done: true, Since: t0}
	for _, tc := range []struct {
		now  time.Time
		want bool
	}{{t0.Add(19 * time.Second), false}, {t0.Add(20 * time.Second), true}, {t0.Add(time.Hour), true}} {
		if got := p.Soaked(20*time.Second, tc.now); got != tc.want {
			t.Errorf("Soaked(20s, +%s) = %v, want %v", tc.now.Sub(t0), got, tc.want)
		}
	}
	if (Progress{Waiting: "x"}).Soaked(0, t0) {
		t.Error("a rollout not done is soaked")
	}
}

func TestCompare(t *testing.T) {
	none := ""
	for _, tc := range []struct {
		a, b       string
		aHas, bHas bool
		want       int
	}{
		{"2", "10", true, true, -1}, // numbers as numbers
		{"10", "2", true, true, 1},
		{"3", "canary", true, true, -1}, // numbers before words
		{"canary", "beta", true, true, 1},
		{"0", none, true, false, -1}, // no value last
		{none, none, false, false, 0},
		{"1", "1", true, true, 0},
	} {
		if got := Compare(tc.a, tc.aHas, tc.b, tc.bHas); got != tc.want {
			t.Errorf("Compare(%q %v, %q %v) = %d, want %d", tc.a, tc.aHas, tc.b, tc.bHas, got, tc.want)
		}
	}
}
