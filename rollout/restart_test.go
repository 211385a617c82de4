package rollout

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// getObj reads obj's current state from cl into obj.
func getObj(t *testing.T, cl client.Client, obj client.Object) {
	t.Helper()
	require.NoError(t, cl.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
}

// withServedKinds is a fake client over objs that also serves the kinds of
// extra, kinds of other providers (a control plane, templates), holding
// them.
func withServedKinds(t *testing.T, objs []client.Object, extra ...*unstructured.Unstructured) client.WithWatch {
	t.Helper()
	mapper := meta.NewDefaultRESTMapper(nil)
	for gvk := range core.Scheme().AllKnownTypes() {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	for _, u := range extra {
		mapper.Add(u.GroupVersionKind(), meta.RESTScopeNamespace)
	}
	cl := withNameIndexes(fake.NewClientBuilder().WithScheme(core.Scheme()).WithRESTMapper(mapper).WithObjects(objs...)).Build()
	for _, u := range extra {
		require.NoError(t, cl.Create(context.Background(), u))
	}
	return cl
}

// TestRestart: restart sets spec.rollout.after to now (or --at) with the
// change-cause, once: a second restart at the same time changes nothing; a
// paused object and a MachinePool are refused.
func TestRestart(t *testing.T) {
	cl, w := newWriteRecordingClient(gitOpsWorld(t, nil)...)
	out, errOut, code := runFake(t, cl, gitOpsNow, "restart", "md/c1-md-0")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 restarted\n", out)
	md := &clusterv1.MachineDeployment{}
	md.Namespace, md.Name = topoNS, "c1-md-0"
	getObj(t, cl, md)
	assert.True(t, md.Spec.Rollout.After.Equal(ptr.To(metav1Time(gitOpsNow))), "rollout.after %v", md.Spec.Rollout.After)
	assert.Equal(t, "rollout restart md/c1-md-0", md.Annotations[revisions.AnnotationChangeCause])
	assert.Len(t, w.all(), 1)

	out, errOut, code = runFake(t, cl, gitOpsNow, "restart", "md/c1-md-0")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 already restarted (spec.rollout.after is 2026-12-01T12:00:00Z)\n", out)
	assert.Len(t, w.all(), 1, "nothing sent")

	out, errOut, code = runFake(t, cl, gitOpsNow, "restart", "kcp/c1-control-plane", "--yes", "--at", "2030-01-02T03:00:00Z", "--change-cause", "INC-7")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane restart scheduled at 2030-01-02T03:00:00Z\n", out)
	kcp := &controlplanev1.KubeadmControlPlane{}
	kcp.Namespace, kcp.Name = topoNS, "c1-control-plane"
	getObj(t, cl, kcp)
	assert.Equal(t, "INC-7", kcp.Annotations[revisions.AnnotationChangeCause])

	md.Spec.Paused = ptr.To(true)
	require.NoError(t, cl.Update(context.Background(), md))
	_, errOut, code = runFake(t, cl, gitOpsNow, "restart", "md/c1-md-0", "--at", "2030-01-02T03:00:00Z")
	assert.Equal(t, core.ExitError, code)
	assert.Equal(t, "error: cannot restart MachineDeployment demo/c1-md-0: it is paused (spec.paused is true), so Cluster API would not roll it out; resume it first with: rollout resume machinedeployment/c1-md-0 -n demo\n", errOut)

	mp := &clusterv1.MachinePool{}
	mp.Namespace, mp.Name = topoNS, "c1-mp-0"
	require.NoError(t, cl.Create(context.Background(), mp))
	_, errOut, code = runFake(t, cl, gitOpsNow, "restart", "mp/c1-mp-0")
	assert.Equal(t, core.ExitError, code)
	assert.Contains(t, errOut, "error: cannot restart MachinePool demo/c1-mp-0: a MachinePool has no spec.rollout.after in Cluster API v1beta2")
}

// TestRestartCluster: cluster/NAME restarts the control plane, then every
// worker pool; -l restarts every object selected, reporting each failure.
func TestRestartCluster(t *testing.T) {
	cl, w := newWriteRecordingClient(gitOpsWorld(t, nil)...)
	out, errOut, code := runFake(t, cl, gitOpsNow, "restart", "cluster/c1", "--yes")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane restarted\nmachinedeployment.cluster.x-k8s.io/c1-md-0 restarted\n", out)
	assert.Equal(t, []string{"patch *v1beta2.KubeadmControlPlane c1-control-plane", "patch *v1beta2.MachineDeployment c1-md-0"}, w.all())

	out, errOut, code = runFake(t, cl, gitOpsNow.Add(time.Hour), "restart", "md", "-l", "pool=md-0", "-o", "name")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0\n", out)
}

// TestRestartThroughTopology: an object a Cluster's topology manages is
// restarted through the Cluster, at its place in spec.topology, whatever
// its kind: a worker pool, a KubeadmControlPlane, another provider's
// control plane.
func TestRestartThroughTopology(t *testing.T) {
	k3s := k3sControlPlane("c1-k3s")
	k3s.SetNamespace(topoNS)
	k3s.SetLabels(map[string]string{clusterv1.ClusterNameLabel: "c1", clusterv1.ClusterTopologyOwnedLabel: ""})
	for _, tc := range []struct {
		ref, out string
	}{
		{"md/c1-md-0", "machinedeployment.cluster.x-k8s.io/c1-md-0 restarted through Cluster demo/c1 (spec.topology.workers.machineDeployments[name=md-0].rollout.after)\n"},
		{"kcp/c1-control-plane", "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane restarted through Cluster demo/c1 (spec.topology.controlPlane.rollout.after)\n"},
		{"kthreescontrolplanes.controlplane.cluster.x-k8s.io/c1-k3s", "kthreescontrolplane.controlplane.cluster.x-k8s.io/c1-k3s restarted through Cluster demo/c1 (spec.topology.controlPlane.rollout.after)\n"},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			cl := withServedKinds(t, objectsOf(chainDone), k3s.DeepCopy())
			out, errOut, code := runFake(t, cl, gitOpsNow, "restart", tc.ref, "--yes")
			require.Equal(t, core.ExitOK, code, errOut)
			assert.Equal(t, tc.out, out)
			c := &clusterv1.Cluster{}
			c.Namespace, c.Name = topoNS, "c1"
			getObj(t, cl, c)
			after := c.Spec.Topology.ControlPlane.Rollout.After
			if tc.ref == "md/c1-md-0" {
				after = c.Spec.Topology.Workers.MachineDeployments[0].Rollout.After
			}
			assert.True(t, after.Equal(ptr.To(metav1Time(gitOpsNow))), "rollout.after %v", after)
			assert.Equal(t, "rollout restart "+tc.ref, c.Annotations[revisions.AnnotationChangeCause])
		})
	}
}

// TestRestartContract: another provider's control plane is restarted
// through its spec.rollout.after, once a server dry run shows its kind
// keeps the field.
func TestRestartContract(t *testing.T) {
	cp := k3sControlPlane("cp")
	cp.SetNamespace(topoNS)
	cl := withServedKinds(t, nil, cp)
	out, errOut, code := runFake(t, cl, gitOpsNow, "restart", "kthreescontrolplanes.controlplane.cluster.x-k8s.io/cp", "-y")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "kthreescontrolplane.controlplane.cluster.x-k8s.io/cp restarted\n", out)
	live := k3sControlPlane("cp")
	live.SetNamespace(topoNS)
	getObj(t, cl, live)
	after, _, _ := unstructured.NestedString(live.Object, "spec", "rollout", "after")
	assert.Equal(t, "2026-12-01T12:00:00Z", after)
}

// metav1Time is t as the API server stores it.
func metav1Time(t time.Time) metav1.Time { return metav1.NewTime(t) }
