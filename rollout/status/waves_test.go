package status

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
)

func TestRenderWaves(t *testing.T) {
	c := func(name, wave, state, reason, heldBy string) FleetCluster {
		return FleetCluster{Namespace: "default", Name: name, Wave: wave, State: state, Reason: reason, HeldBy: heldBy}
	}
	for _, tc := range []struct {
		name     string
		clusters []FleetCluster
		want     string
	}{
		{"no wave: grouped by state", []FleetCluster{c("a", "", v1alpha1.ClusterUpToDate, "", "")},
			"cluster -l env=prod: 1 cluster: 1 up to date\nup to date (1)\n  a"},
		{"wave 0 rolling, wave 1 held and waiting", []FleetCluster{
			c("c", "1", v1alpha1.ClusterUpToDate, "", ""),
			c("b", "1", v1alpha1.ClusterRolling, "held: hook says wait", "hook says wait"),
			c("a", "0", v1alpha1.ClusterRolling, "control plane a-cp: 1/3 machines up to date", ""),
		}, `cluster -l env=prod: 3 clusters: 2 rolling, 1 up to date
wave 0 (1 cluster): 1 rolling
  a  rolling: control plane a-cp: 1/3 machines up to date
wave 1 (2 clusters): 1 held, 1 waiting
  b  held: hook says wait
  c  waiting`},
		{"waves in number order, halted, then no wave", []FleetCluster{
			c("z", "", v1alpha1.ClusterUpToDate, "", ""),
			c("ten", "10", v1alpha1.ClusterUpToDate, "", ""),
			c("two", "2", v1alpha1.ClusterStalled, "no progress for 5m0s: workers", ""),
		}, `cluster -l env=prod: 3 clusters: 1 stalled, 2 up to date
wave 2 (1 cluster): 1 halted
  two  halted: no progress for 5m0s: workers
wave 10 (1 cluster): 1 waiting
  ten  waiting
no wave (1 cluster): 1 waiting
  z    waiting`},
		{"every wave done", []FleetCluster{c("a", "0", v1alpha1.ClusterUpToDate, "", ""), c("b", "1", v1alpha1.ClusterUpToDate, "", "")},
			"cluster -l env=prod: 2 clusters: 2 up to date\nwave 0 (1 cluster): 1 done\n  a  done\nwave 1 (1 cluster): 1 done\n  b  done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := GroupFleet("cluster -l env=prod", false, tc.clusters)
			got := strings.Join(RenderFleet(r, "", 0, 0), "\n")
			if got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestHookHold(t *testing.T) {
	cond := func(reason, msg string) *clusterv1.Cluster {
		c := &clusterv1.Cluster{}
		c.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterTopologyReconciledCondition, Status: metav1.ConditionFalse, Reason: reason, Message: msg}}
		return c
	}
	for _, tc := range []struct {
		name    string
		cluster *clusterv1.Cluster
		want    string
	}{
		{"an upgrade held, as Cluster API writes it", cond(clusterv1.ClusterTopologyReconciledClusterUpgradingReason,
			"Cluster is upgrading to v1.35.2\n  * Following hooks are blocking upgrade: BeforeClusterUpgrade: held by rollout-guard: wave 0 is not done\n  * KubeadmControlPlane pending upgrade to version v1.35.2"),
			"BeforeClusterUpgrade: held by rollout-guard: wave 0 is not done"},
		{"an upgrade not held", cond(clusterv1.ClusterTopologyReconciledClusterUpgradingReason, "Cluster is upgrading to v1.35.2\n  * KubeadmControlPlane upgrading to version v1.35.2"), ""},
		{"another hook blocking", cond(clusterv1.ClusterTopologyReconciledHookBlockingReason, "Following hooks are blocking delete: BeforeClusterDelete: wait"), "Following hooks are blocking delete: BeforeClusterDelete: wait"},
		{"a refusal", cond(clusterv1.ClusterTopologyReconciledFailedReason, "Following hooks are blocking upgrade: x"), ""},
		{"no condition", &clusterv1.Cluster{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HookHold(tc.cluster); got != tc.want {
				t.Fatalf("HookHold = %q, want %q", got, tc.want)
			}
		})
	}
}
