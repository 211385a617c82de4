package policy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/skew"
)

// clusterC1 is Cluster c1 whose control plane is KubeadmControlPlane cp.
func clusterC1() *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"}}
	c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "cp"}
	return c
}

// runningKCP is KubeadmControlPlane cp of cluster c1 at spec version,
// its machines running the versions given.
func runningKCP(version string, running ...string) *controlplanev1.KubeadmControlPlane {
	kcp := clusterKCP(version)
	for _, v := range running {
		kcp.Status.Versions = append(kcp.Status.Versions, clusterv1.StatusVersion{Version: v})
	}
	return kcp
}

// TestWorkerPoolKindsJudgedAlike holds that a MachinePool's version change
// is judged by the worker rules exactly as a MachineDeployment's: each unsafe
// change refused with the same rule and the same words (but for the kind),
// each safe neighbour allowed.
func TestWorkerPoolKindsJudgedAlike(t *testing.T) {
	cases := []struct {
		name     string
		kcp      *controlplanev1.KubeadmControlPlane
		old, new string // old "" is a create
		rule     skew.RuleID
		message  string // the violation's message after "KIND pool: "
	}{
		{
			name: "one minor newer than the control plane", kcp: runningKCP("v1.35.2", "v1.35.2"), old: "v1.35.2", new: "v1.36.0",
			rule:    skew.RuleWorkerNewerThanControlPlane,
			message: "v1.36.0 is newer than v1.35.2, the oldest version of control plane KubeadmControlPlane cp (its spec.version); a kubelet must not be newer than the API server",
		},
		{name: "a patch newer, same minor", kcp: runningKCP("v1.35.2", "v1.35.2"), old: "v1.35.2", new: "v1.35.9"},
		{
			name: "newer than the oldest machine of a control plane rolling out", kcp: runningKCP("v1.36.1", "v1.35.2", "v1.36.1"), old: "v1.35.2", new: "v1.36.1",
			rule:    skew.RuleWorkerNewerThanControlPlane,
			message: "v1.36.1 is newer than v1.35.2, the oldest version of control plane KubeadmControlPlane cp (run by one of its machines); a kubelet must not be newer than the API server",
		},
		{name: "up to the control plane once it has rolled out", kcp: runningKCP("v1.36.1", "v1.36.1"), old: "v1.35.2", new: "v1.36.1"},
		{
			name: "four minors below the control plane", kcp: runningKCP("v1.35.2", "v1.35.2"), old: "v1.35.2", new: "v1.31.4",
			rule:    skew.RuleWorkerTooOld,
			message: "v1.31.4 is 4 minors older than v1.35.2, the newest version of control plane KubeadmControlPlane cp (its spec.version); a kubelet may be at most 3 minors older than the API server",
		},
		{name: "three minors below the control plane", kcp: runningKCP("v1.35.2", "v1.35.2"), old: "v1.35.2", new: "v1.32.4"},
		{
			name: "created newer than the control plane", kcp: runningKCP("v1.35.2", "v1.35.2"), new: "v1.36.0",
			rule:    skew.RuleWorkerNewerThanControlPlane,
			message: "v1.36.0 is newer than v1.35.2, the oldest version of control plane KubeadmControlPlane cp (its spec.version); a kubelet must not be newer than the API server",
		},
		{name: "created at the control plane's version", kcp: runningKCP("v1.35.2", "v1.35.2"), new: "v1.35.2"},
		{
			name: "not a version", kcp: runningKCP("v1.35.2", "v1.35.2"), old: "v1.35.2", new: "latest",
			rule:    skew.RuleInvalidVersion,
			message: `spec.template.spec.version "latest" is not a valid Kubernetes version`,
		},
	}
	for _, tc := range cases {
		for _, kind := range []string{"MachineDeployment", "MachinePool"} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				var oldObj, newObj client.Object
				switch kind {
				case "MachineDeployment":
					newObj = poolMD("pool", tc.new)
					if tc.old != "" {
						oldObj = poolMD("pool", tc.old)
					}
				default:
					newObj = machinePool("pool", tc.new)
					if tc.old != "" {
						oldObj = machinePool("pool", tc.old)
					}
				}
				p := workerWorld(t, true, clusterC1(), tc.kcp)
				d, warnings, err := p.Decide(context.Background(), oldObj, newObj)
				require.NoError(t, err)
				assert.Empty(t, warnings)
				if tc.rule == "" {
					assert.True(t, d.Allowed(), "refused: %v", violationTexts(d))
					return
				}
				require.Len(t, d.Violations, 1, "violations: %v", violationTexts(d))
				v := d.Violations[0]
				assert.Equal(t, tc.rule, v.Rule)
				assert.Equal(t, "spec.template.spec.version", v.Field)
				assert.Equal(t, kind+" pool: "+tc.message, v.Message)
			})
		}
	}
}

// TestMachinePoolWithoutControlPlane: a MachinePool whose Cluster is not
// found is judged on its version alone, with a warning naming the pool and
// why its skew was not checked.
func TestMachinePoolWithoutControlPlane(t *testing.T) {
	p := workerWorld(t, true)
	d, warnings, err := p.Decide(context.Background(), machinePool("pool", "v1.35.2"), machinePool("pool", "v1.36.0"))
	require.NoError(t, err)
	assert.True(t, d.Allowed())
	assert.Equal(t, []string{"rollout-guard: version skew of MachinePool ns/pool not checked: Cluster ns/c1 not found"}, warnings)

	d, _, err = p.Decide(context.Background(), machinePool("pool", "v1.35.2"), machinePool("pool", "v1.36"))
	require.NoError(t, err)
	assert.Equal(t, []skew.RuleID{skew.RuleInvalidVersion}, rulesOf(d))
}

// TestTopologyOwnedMachinePools: a topology version change leaves the
// MachinePools the topology owns to the topology controller, as it does
// MachineDeployments, and judges the others against the new version.
func TestTopologyOwnedMachinePools(t *testing.T) {
	mp := func(owned bool) *clusterv1.MachinePool {
		m := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-mp-0", Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}}}
		if owned {
			m.Labels[clusterv1.ClusterTopologyOwnedLabel] = ""
		}
		m.Spec.ClusterName = "demo"
		m.Spec.Template.Spec.Version = "v1.32.4"
		return m
	}
	for _, tc := range []struct {
		name  string
		owned bool
		want  []skew.RuleID
	}{
		{name: "hand-made MachinePool left four minors behind", owned: false, want: []skew.RuleID{skew.RuleControlPlaneLeavesWorkerTooOld}},
		{name: "topology-owned MachinePool, upgraded along", owned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := topologyWorld{kcpVersion: "v1.35.2", running: []string{"v1.35.2"}, objects: []client.Object{mp(tc.owned)}}
			d, _, err := w.policy(t).Decide(context.Background(), topologyCluster("v1.35.2", nil), topologyCluster("v1.36.1", nil))
			require.NoError(t, err)
			assert.Equal(t, tc.want, rulesOf(d), "violations: %v", violationTexts(d))
			if tc.want != nil {
				assert.True(t, containsIn(violationTexts(d), "MachinePool demo-mp-0"), "violations: %v", violationTexts(d))
			}
		})
	}
}
