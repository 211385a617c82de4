package upgradehold

import (
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/waves"
)

const (
	ns      = "fleet"
	from    = "v1.34.2"
	to      = "v1.35.2"
	soak20s = 20 * time.Second
)

var t0 = time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)

// clusterOf builds a topology Cluster of ns at version whose conditions
// say its rollout finished at doneAt, with the wave label set to wave
// unless wave is "" (no label); edits change it further.
func clusterOf(name, wave, version string, doneAt time.Time, edits ...func(*clusterv1.Cluster)) clusterv1.Cluster {
	c := clusterv1.Cluster{}
	c.Namespace, c.Name, c.Generation = ns, name, 3
	if wave != "" {
		c.Labels = map[string]string{waves.Label: wave}
	}
	c.Spec.Topology.ClassRef.Name = "quick-start"
	c.Spec.Topology.Version = version
	c.Status.Conditions = waves.DoneConditions(3, doneAt)
	for _, edit := range edits {
		edit(&c)
	}
	return c
}

// notUpToDate makes a Cluster's control-plane machines not up to date, as
// Cluster API says while it replaces them.
func notUpToDate(c *clusterv1.Cluster) {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == clusterv1.ClusterControlPlaneMachinesUpToDateCondition {
			c.Status.Conditions[i].Status = metav1.ConditionFalse
			c.Status.Conditions[i].Reason = "NotUpToDate"
			c.Status.Conditions[i].Message = "* Machine demo-cc-x7k2p: Version v1.34.2, v1.35.2 required"
		}
	}
}

func inNamespace(other string) func(*clusterv1.Cluster) {
	return func(c *clusterv1.Cluster) { c.Namespace = other }
}

func deleting(c *clusterv1.Cluster) {
	c.DeletionTimestamp = &metav1.Time{Time: t0}
	c.Finalizers = []string{"cluster.cluster.x-k8s.io"}
}

func TestDecide(t *testing.T) {
	now := t0.Add(time.Hour)
	long := now.Add(-time.Hour) // done an hour ago: soaked
	for _, tc := range []struct {
		name     string
		request  string // the requested Cluster's name
		clusters []clusterv1.Cluster
		soak     time.Duration
		want     Decision
	}{{
		name:    "held: wave 0 is not done upgrading to the version",
		request: "demo-cc-2",
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, long, notUpToDate),
			clusterOf("demo-cc-2", "1", to, long),
		},
		want: Decision{Hold: true, RetryAfter: 10 * time.Second, Outcome: OutcomeHeld,
			Message: "held by rollout-guard: wave 0 is not done upgrading to v1.35.2: cluster demo-cc: ControlPlaneMachinesUpToDate is False (NotUpToDate): * Machine demo-cc-x7k2p: Version v1.34.2, v1.35.2 required"},
	}, {
		name:    "held: wave 0 has not reconciled its new version yet",
		request: "demo-cc-2",
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, long, func(c *clusterv1.Cluster) { c.Generation = 4 }),
			clusterOf("demo-cc-2", "1", to, long),
		},
		want: Decision{Hold: true, RetryAfter: 10 * time.Second, Outcome: OutcomeHeld,
			Message: "held by rollout-guard: wave 0 is not done upgrading to v1.35.2: cluster demo-cc: Cluster API has not observed generation 4 yet (TopologyReconciled is of 3)"},
	}, {
		name:    "not held: wave 0 is done and soaked",
		request: "demo-cc-2",
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, long),
			clusterOf("demo-cc-2", "1", from, long),
		},
		want: Decision{Outcome: OutcomeReleased,
			Message: "not held by rollout-guard: no cluster of an earlier wave than 1 in namespace fleet is upgrading to v1.35.2 or soaking there"},
	}, {
		name:    "not held: wave 0 moves to another version",
		request: "demo-cc-2",
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", "v1.36.0", long, notUpToDate),
			clusterOf("demo-cc-2", "1", to, long),
		},
		want: Decision{Outcome: OutcomeReleased,
			Message: "not held by rollout-guard: no cluster of an earlier wave than 1 in namespace fleet is upgrading to v1.35.2 or soaking there"},
	}, {
		name:    "not held: wave 0 is not bumped yet",
		request: "demo-cc-2",
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", from, long),
			clusterOf("demo-cc-2", "1", to, long),
		},
		want: Decision{Outcome: OutcomeReleased,
			Message: "not held by rollout-guard: no cluster of an earlier wave than 1 in namespace fleet is upgrading to v1.35.2 or soaking there"},
	}, {
		name:    "not held: the requested cluster carries no wave label",
		request: "loner",
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, long, notUpToDate),
			clusterOf("loner", "", to, long),
		},
		want: Decision{Outcome: OutcomeNoWave, Message: "not held by rollout-guard: cluster fleet/loner carries no label rollout-guard.io/wave"},
	}, {
		name:     "not held: the requested cluster is not among those read (no label, or gone)",
		request:  "loner",
		clusters: []clusterv1.Cluster{clusterOf("demo-cc", "0", to, long, notUpToDate)},
		want:     Decision{Outcome: OutcomeNoWave, Message: "not held by rollout-guard: cluster fleet/loner carries no label rollout-guard.io/wave"},
	}, {
		name:    "not held, and said why: the requested cluster's label is not a wave",
		request: "demo-cc-2",
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, long, notUpToDate),
			clusterOf("demo-cc-2", "canary", to, long),
		},
		want: Decision{Outcome: OutcomeBadLabel,
			Message: `not held by rollout-guard: cluster fleet/demo-cc-2 is in no wave: label rollout-guard.io/wave="canary" is not a wave: set it to 0, 1, 2… (0 goes first)`},
	}, {
		name:    "not held: only a later wave is upgrading",
		request: "demo-cc",
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, long),
			clusterOf("demo-cc-2", "1", to, long, notUpToDate),
		},
		want: Decision{Outcome: OutcomeReleased, Message: "not held by rollout-guard: cluster fleet/demo-cc is in wave 0, which goes first"},
	}, {
		name:    "not held: only the same wave is upgrading",
		request: "demo-cc-3",
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc-2", "1", to, long, notUpToDate),
			clusterOf("demo-cc-3", "1", to, long),
		},
		want: Decision{Outcome: OutcomeReleased,
			Message: "not held by rollout-guard: no cluster of an earlier wave than 1 in namespace fleet is upgrading to v1.35.2 or soaking there"},
	}, {
		name:    "held: wave 0 is done but has not soaked",
		request: "demo-cc-2",
		soak:    soak20s,
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, now.Add(-12*time.Second)),
			clusterOf("demo-cc-2", "1", to, long),
		},
		want: Decision{Hold: true, RetryAfter: 8 * time.Second, Outcome: OutcomeHeld,
			Message: "held by rollout-guard: wave 0 has not soaked yet at v1.35.2: cluster demo-cc: done 12s ago, soak 20s"},
	}, {
		name:    "not held: wave 0 has soaked exactly",
		request: "demo-cc-2",
		soak:    soak20s,
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, now.Add(-soak20s)),
			clusterOf("demo-cc-2", "1", to, long),
		},
		want: Decision{Outcome: OutcomeReleased,
			Message: "not held by rollout-guard: no cluster of an earlier wave than 1 in namespace fleet is upgrading to v1.35.2 or soaking there"},
	}, {
		name:    "held: a long soak is asked again after 30s at most",
		request: "demo-cc-2",
		soak:    5 * time.Minute,
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, now.Add(-time.Minute)),
			clusterOf("demo-cc-2", "1", to, long),
		},
		want: Decision{Hold: true, RetryAfter: 30 * time.Second, Outcome: OutcomeHeld,
			Message: "held by rollout-guard: wave 0 has not soaked yet at v1.35.2: cluster demo-cc: done 1m0s ago, soak 5m0s"},
	}, {
		name:    "held: less than a second of soak left is asked again after 1s",
		request: "demo-cc-2",
		soak:    soak20s,
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, now.Add(-soak20s+300*time.Millisecond)),
			clusterOf("demo-cc-2", "1", to, long),
		},
		want: Decision{Hold: true, RetryAfter: time.Second, Outcome: OutcomeHeld,
			Message: "held by rollout-guard: wave 0 has not soaked yet at v1.35.2: cluster demo-cc: done 19s ago, soak 20s"},
	}, {
		name:    "not held: an upgrading wave 0 in another namespace is ignored",
		request: "demo-cc-2",
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, long, notUpToDate, inNamespace("other-fleet")),
			clusterOf("demo-cc-2", "1", to, long),
		},
		want: Decision{Outcome: OutcomeReleased,
			Message: "not held by rollout-guard: no cluster of an earlier wave than 1 in namespace fleet is upgrading to v1.35.2 or soaking there"},
	}, {
		name:    "not held: the requested name in another namespace is not the requested cluster",
		request: "demo-cc-2",
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, long, notUpToDate),
			clusterOf("demo-cc-2", "1", to, long, inNamespace("other-fleet")),
		},
		want: Decision{Outcome: OutcomeNoWave, Message: "not held by rollout-guard: cluster fleet/demo-cc-2 carries no label rollout-guard.io/wave"},
	}, {
		name:    "not held: a wave 0 cluster being deleted never finishes, and holds nothing",
		request: "demo-cc-2",
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, long, notUpToDate, deleting),
			clusterOf("demo-cc-2", "1", to, long),
		},
		want: Decision{Outcome: OutcomeReleased,
			Message: "not held by rollout-guard: no cluster of an earlier wave than 1 in namespace fleet is upgrading to v1.35.2 or soaking there"},
	}, {
		name:    "not held: an upgrading cluster whose label is not a wave is in no wave",
		request: "demo-cc-2",
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "first", to, long, notUpToDate),
			clusterOf("demo-cc-2", "1", to, long),
		},
		want: Decision{Outcome: OutcomeReleased,
			Message: "not held by rollout-guard: no cluster of an earlier wave than 1 in namespace fleet is upgrading to v1.35.2 or soaking there"},
	}, {
		name:    "held: an upgrading cluster is named before a soaking one, the earliest wave first",
		request: "demo-cc-4",
		soak:    soak20s,
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, now.Add(-time.Second)),
			clusterOf("demo-cc-3", "2", to, long, notUpToDate),
			clusterOf("demo-cc-2", "1", to, long, notUpToDate),
			clusterOf("demo-cc-4", "3", to, long),
		},
		want: Decision{Hold: true, RetryAfter: 10 * time.Second, Outcome: OutcomeHeld,
			Message: "held by rollout-guard: wave 1 is not done upgrading to v1.35.2: cluster demo-cc-2: ControlPlaneMachinesUpToDate is False (NotUpToDate): * Machine demo-cc-x7k2p: Version v1.34.2, v1.35.2 required (and 2 more clusters of earlier waves)"},
	}, {
		name:    "held: of soaking clusters, the one with most soak left is named",
		request: "demo-cc-3",
		soak:    soak20s,
		clusters: []clusterv1.Cluster{
			clusterOf("demo-cc", "0", to, now.Add(-15*time.Second)),
			clusterOf("demo-cc-2", "1", to, now.Add(-5*time.Second)),
			clusterOf("demo-cc-3", "2", to, long),
		},
		want: Decision{Hold: true, RetryAfter: 15 * time.Second, Outcome: OutcomeHeld,
			Message: "held by rollout-guard: wave 1 has not soaked yet at v1.35.2: cluster demo-cc-2: done 5s ago, soak 20s (and 1 more cluster of an earlier wave)"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(Input{Namespace: ns, Name: tc.request, ToVersion: to, Clusters: tc.clusters, Soak: tc.soak, Now: now})
			if got != tc.want {
				t.Errorf("Decide =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

// TestDecideNeverHoldsWithoutAnEarlierWave: whatever the Clusters of later
// or same waves do, wave 0 is never held, for any soak.
func TestDecideNeverHoldsWithoutAnEarlierWave(t *testing.T) {
	now := t0.Add(time.Hour)
	var clusters []clusterv1.Cluster
	for i := range 4 {
		clusters = append(clusters, clusterOf("c"+strconv.Itoa(i), strconv.Itoa(i), to, now, notUpToDate))
	}
	for _, soak := range []time.Duration{0, time.Second, time.Hour} {
		if d := Decide(Input{Namespace: ns, Name: "c0", ToVersion: to, Clusters: clusters, Soak: soak, Now: now}); d.Hold {
			t.Errorf("wave 0 held with soak %s: %+v", soak, d)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct{ left, want time.Duration }{
		{time.Millisecond, time.Second},
		{time.Second, time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{8 * time.Second, 8 * time.Second},
		{30 * time.Second, 30 * time.Second},
		{30*time.Second + time.Millisecond, 30 * time.Second},
		{time.Hour, 30 * time.Second},
	} {
		if got := retryAfter(tc.left); got != tc.want {
			t.Errorf("retryAfter(%s) = %s, want %s", tc.left, got, tc.want)
		}
	}
}
