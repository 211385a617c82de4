package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// k3s is a control plane of another provider as the API server serves it.
var k3sGVK = schema.GroupVersionKind{Group: core.ContractGroup, Version: "v1beta2", Kind: "KThreesControlPlane"}

func k3sControlPlane(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"replicas": int64(3), "version": "v1.35.2", "rollout": map[string]any{"after": "2030-01-02T03:04:05Z"},
		"machineTemplate": map[string]any{"spec": map[string]any{"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachineTemplate", "name": "cp"}}},
	}}}
	u.SetGroupVersionKind(k3sGVK)
	u.SetNamespace("ns")
	u.SetName(name)
	return u
}

// TestRegistryKindOf: every object finds its entry, and the entry makes
// objects and lists of its own type; an unstructured object is another
// provider's control plane.
func TestRegistryKindOf(t *testing.T) {
	for _, obj := range []client.Object{&clusterv1.MachineDeployment{}, &clusterv1.MachinePool{}, &controlplanev1.KubeadmControlPlane{}, &clusterv1.Cluster{}} {
		k := core.KindOf(obj)
		require.NotEmpty(t, k.Resource, "%T", obj)
		assert.IsType(t, obj, k.New())
		assert.NotNil(t, k.NewList())
	}
	k := core.KindOf(k3sControlPlane("cp"))
	assert.True(t, k.Contract)
	assert.Equal(t, "kthreescontrolplane.controlplane.cluster.x-k8s.io", k.Singular())
	require.True(t, k.Guard.HasRevisions())
	assert.Equal(t, k3sGVK, k.New().GetObjectKind().GroupVersionKind())
	assert.Equal(t, k3sGVK.GroupVersion().WithKind("KThreesControlPlaneList"), k.NewList().GetObjectKind().GroupVersionKind())
}

// TestRegistryFieldReads: the fields every command reads, per kind.
func TestRegistryFieldReads(t *testing.T) {
	after := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md-0", Labels: map[string]string{clusterv1.ClusterTopologyMachineDeploymentNameLabel: "pool"}}}
	md.Spec.ClusterName, md.Spec.Paused, md.Spec.Rollout.After = "c1", ptr.To(true), after
	md.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: "md"}
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "cp", Annotations: map[string]string{clusterv1.PausedAnnotation: ""},
		Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}}}
	kcp.Spec.Rollout.After = after
	mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "mp", Labels: map[string]string{clusterv1.ClusterTopologyMachinePoolNameLabel: "gpu"}}}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1"}}
	cluster.Spec.Paused = ptr.To(true)
	k3s := k3sControlPlane("k3s")

	for _, tc := range []struct {
		obj          client.Object
		paused       string
		after        time.Time
		cluster      string
		topologyPath string
		templates    int
	}{
		{md, "spec.paused is true", after.Time, "c1", "spec.topology.workers.machineDeployments[name=pool]", 1},
		{kcp, "annotation cluster.x-k8s.io/paused", after.Time, "c1", "spec.topology.controlPlane", 0},
		{mp, "", time.Time{}, "", "spec.topology.workers.machinePools[name=gpu]", 0},
		{k3s, "", after.Time, "", "spec.topology.controlPlane", 1},
		{cluster, "spec.paused is true", time.Time{}, "c1", "", 0},
	} {
		k := core.KindOf(tc.obj)
		assert.Equal(t, tc.paused, core.PausedBy(tc.obj), "%s paused", k.GVK.Kind)
		assert.True(t, tc.after.Equal(core.RolloutAfter(tc.obj)), "%s rollout.after: %v", k.GVK.Kind, core.RolloutAfter(tc.obj))
		assert.Equal(t, tc.cluster, core.ClusterNameOf(tc.obj), "%s cluster", k.GVK.Kind)
		if tc.topologyPath != "" {
			assert.Equal(t, tc.topologyPath, core.TopologyPath(tc.obj), "%s topology", k.GVK.Kind)
		}
		assert.Len(t, core.TemplateRefsOf(tc.obj), tc.templates, "%s templates", k.GVK.Kind)
	}
	assert.Equal(t, client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: "k3s"}, core.MachineLabels(k3s))
	assert.Equal(t, client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "md-0"}, core.MachineSetLabels(md))
	assert.Nil(t, core.MachineSetLabels(kcp))
	c := core.KindOf(k3s).Counts(k3s)
	assert.Equal(t, int32(3), *c.Desired)
	assert.Nil(t, c.Current, "absent status counts are nil")
}

// TestRegistryRefusals: what a kind cannot do is refused with its reason,
// before anything is read.
func TestRegistryRefusals(t *testing.T) {
	k3s, err := core.ParseKind("kthreescontrolplanes.controlplane.cluster.x-k8s.io")
	require.NoError(t, err)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mp/mp-0", "--version", "v1.35.0"}, "not machinepool/mp-0: a MachinePool references its own infrastructure machine pool"},
		{[]string{"kcp/cp", "--bootstrap-template", "kubeadmconfigtemplate/x"}, "--bootstrap-template works on machinedeployments only: a KubeadmControlPlane's bootstrap config is inline, in spec.kubeadmConfigSpec"},
		{[]string{"plan", "mp/mp-0", "--restart"}, "plan does not work on machinepool objects"},
		{[]string{"plan", core.Ref{Kind: k3s, Name: "cp"}.String(), "--restart"}, "plan does not work on kthreescontrolplanes.controlplane.cluster.x-k8s.io/cp: another provider's control plane"},
		{[]string{"plan", "kcp/cp", "--bootstrap-template", "kubeadmconfigtemplate/x"}, "--bootstrap-template works on machinedeployments only"},
	} {
		_, errOut, code := runFake(t, newFakeClient(), time.Now(), tc.args...)
		assert.Equal(t, core.ExitError, code, "%v", tc.args)
		assert.Contains(t, errOut, tc.want, "%v", tc.args)
	}
}
