package rollout

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/status"
)

// objectsOf lists a topo's objects for a client.
func objectsOf(t topo) []client.Object {
	c, o := t.objects()
	objs := []client.Object{c}
	if o.ControlPlane != nil {
		objs = append(objs, o.ControlPlane)
	}
	for i := range o.MachineDeployments {
		objs = append(objs, &o.MachineDeployments[i])
	}
	for i := range o.MachinePools {
		objs = append(objs, &o.MachinePools[i])
	}
	for i := range o.Machines {
		objs = append(objs, &o.Machines[i])
	}
	for i := range o.MachineSets {
		objs = append(objs, &o.MachineSets[i])
	}
	return objs
}

// moveTo brings the objects of cl to their state in t, one request each:
// updates, creates the new machines, deletes the machines gone.
func moveTo(ctx context.Context, t *testing.T, cl client.Client, to topo) {
	t.Helper()
	keep := map[string]bool{}
	for _, obj := range objectsOf(to) {
		keep[obj.GetName()] = true
		cur := obj.DeepCopyObject().(client.Object)
		if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), cur); apierrors.IsNotFound(err) {
			require.NoError(t, cl.Create(ctx, obj))
			continue
		} else {
			require.NoError(t, err)
		}
		obj.SetResourceVersion(cur.GetResourceVersion())
		require.NoError(t, cl.Update(ctx, obj))
	}
	machines := &clusterv1.MachineList{}
	require.NoError(t, cl.List(ctx, machines, client.InNamespace(topoNS)))
	for i := range machines.Items {
		if !keep[machines.Items[i].Name] {
			require.NoError(t, cl.Delete(ctx, &machines.Items[i]))
		}
	}
}

// TestStatusClusterOnce: --watch=false on a ClusterClass cluster exits 0
// only at the topology version, every object rolled out.
func TestStatusClusterOnce(t *testing.T) {
	now := time.Now()
	out, errOut, code := runFake(t, newFakeClient(objectsOf(chainStep1Done)...), now, "status", "cluster/c1", "--watch=false")
	assert.Equal(t, ExitNotRolledOut, code)
	assert.Equal(t, `cluster/c1: upgrading to v1.35.0: waiting for the topology controller to start control plane v1.35.0; then workers v1.35.0
kubeadmcontrolplane/c1-control-plane: 3 of 3 machines up to date, 3 available
machinedeployment/c1-md-0: 2 of 2 machines up to date, 2 available
`, out)
	assert.Equal(t, "cluster/c1 is not rolled out: upgrading to v1.35.0: waiting for the topology controller to start control plane v1.35.0; then workers v1.35.0\n", errOut)

	out, errOut, code = runFake(t, newFakeClient(objectsOf(chainDone)...), now, "status", "cluster/c1", "--watch=false")
	assert.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, `cluster/c1: at v1.35.0 on the control plane and 1 worker pool
kubeadmcontrolplane/c1-control-plane: 3 of 3 machines up to date, 3 available
machinedeployment/c1-md-0: 2 of 2 machines up to date, 2 available
`, out)

	out, _, code = runFake(t, newFakeClient(objectsOf(chainDone)...), now, "status", "cluster/c1", "--watch=false", "-o", "json")
	assert.Equal(t, core.ExitOK, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	assert.Contains(t, lines[0], `"object":"cluster/c1","phase":"RolledOut"`)
	assert.Contains(t, lines[0], `"done":true,"upgrade":{"version":"v1.35.0","reached":true`)
	assert.Contains(t, lines[1], `"object":"kubeadmcontrolplane/c1-control-plane","phase":"RolledOut"`)
}

// TestStatusClusterWaitsForTheLastStep: watching a chained upgrade whose
// first step is rolled out does not end there; it ends when the topology
// version is rolled out everywhere.
func TestStatusClusterWaitsForTheLastStep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newFakeClient(objectsOf(chainStep1Done)...)
	r := startFake(ctx, cl, topoNS, time.Now(), "status", "cluster/c1", "--timeout", "25s")
	waitFor(t, r, "cluster/c1: upgrading to v1.35.0: waiting for the topology controller to start control plane v1.35.0; then workers v1.35.0")
	select {
	case code := <-r.done:
		t.Fatalf("status ended (exit %d) at an intermediate step:\n%s%s", code, r.out, r.errOut)
	case <-time.After(300 * time.Millisecond):
	}
	moveTo(ctx, t, cl, chainStep2Rolling)
	waitFor(t, r, "cluster/c1: upgrading to v1.35.0: control plane v1.35.0 rolling out; then workers v1.35.0")
	moveTo(ctx, t, cl, chainWorkersRolling)
	waitFor(t, r, "cluster/c1: upgrading to v1.35.0: workers v1.35.0 rolling out, 0 of 1 pool done")
	moveTo(ctx, t, cl, chainDone)
	assert.Equal(t, core.ExitOK, exitOf(t, ctx, r), "stderr: %s", r.errOut)
	assert.True(t, strings.HasSuffix(r.out.String(), `kubeadmcontrolplane/c1-control-plane successfully rolled out (revision 3)
machinedeployment/c1-md-0 successfully rolled out (revision 2)
cluster/c1 successfully rolled out: at v1.35.0 on the control plane and 1 worker pool
`), r.out.String())
}

// TestStatusClusterStalledAndTimedOut: the verdicts other than done name
// the topology controller's condition and the machines that hold it.
func TestStatusClusterStalledAndTimedOut(t *testing.T) {
	now := time.Now()
	_, errOut, code := runFake(t, newFakeClient(objectsOf(chainStep1Rolling)...), now, "status", "cluster/c1", "--progress-deadline", "200ms")
	assert.Equal(t, status.ExitStalled, code)
	assert.Equal(t, `error: cluster/c1 made no progress for 200ms (--progress-deadline): upgrading to v1.35.0: control plane v1.34.2 rolling out; then control plane v1.35.0, workers v1.35.0; blocked by:
  TopologyReconciled: ClusterUpgrading: Cluster is upgrading to v1.35.0; * KubeadmControlPlane upgrading to version v1.34.2 (v1.35.0 pending); * MachineDeployment c1-md-0 pending upgrade to version v1.35.0
  kubeadmcontrolplane/c1-control-plane:
    machine c1-control-plane-0: Running, not up to date: NotUpToDate: * Version v1.33.4, a newer one required
`, errOut)

	out, errOut, code := runFake(t, newFakeClient(objectsOf(chainStep1Done)...), now, "status", "cluster/c1", "--timeout", "200ms", "-o", "json")
	assert.Equal(t, status.ExitTimeout, code)
	assert.Equal(t, "error: timed out waiting for cluster/c1 to roll out (--timeout 200ms); last state: upgrading to v1.35.0: waiting for the topology controller to start control plane v1.35.0; then workers v1.35.0; blocked by:\n"+
		"  TopologyReconciled: ClusterUpgrading: Cluster is upgrading to v1.35.0; * KubeadmControlPlane pending upgrade to version v1.35.0; * MachineDeployment c1-md-0 pending upgrade to version v1.35.0\n", errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6, out)
	assert.Contains(t, lines[3], `"object":"cluster/c1","phase":"TimedOut"`)

	paused := chainDone
	paused.pools = []topoPool{chainDone.pools[0]}
	paused.pools[0].paused = true
	objs := objectsOf(paused)
	_, errOut, code = runFake(t, newFakeClient(objs...), now, "status", "cluster/c1")
	assert.Equal(t, status.ExitPaused, code)
	assert.Equal(t, "error: cluster/c1 is paused (machinedeployment/c1-md-0: spec.paused is true): it will not roll out until resumed\n", errOut)
}

// waitFor waits until the command printed line.
func waitFor(t *testing.T, r *fakeRun, line string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.out.String(), line+"\n") {
		select {
		case code := <-r.done:
			t.Fatalf("status ended (exit %d) before printing %q:\n%s%s", code, line, r.out, r.errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("status did not print %q:\n%s%s", line, r.out, r.errOut)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStatusClusterForbidden: a ClusterClass cluster needs list and watch
// on its Machines (and the other kinds); a refusal names the permission.
func TestStatusClusterForbidden(t *testing.T) {
	cl := fake.NewClientBuilder().WithScheme(core.Scheme()).WithObjects(objectsOf(chainDone)...).
		WithIndex(&clusterv1.Cluster{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*clusterv1.MachineList); ok {
				return apierrors.NewForbidden(clusterv1.GroupVersion.WithResource("machines").GroupResource(), "", errors.New(`User "viewer" cannot list resource "machines" in API group "cluster.x-k8s.io" in the namespace "demo"`))
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	for _, watchFlag := range []string{"--watch=true", "--watch=false"} {
		_, errOut, code := runFake(t, cl, time.Now(), "status", "cluster/c1", watchFlag)
		assert.Equal(t, core.ExitError, code, watchFlag)
		assert.Equal(t, `error: cannot status Cluster demo/c1: user "viewer" may not list machines.cluster.x-k8s.io in namespace "demo" (Forbidden); ask your cluster administrator for a Role granting "list" on "machines" in API group "cluster.x-k8s.io": machines.cluster.x-k8s.io is forbidden: User "viewer" cannot list resource "machines" in API group "cluster.x-k8s.io" in the namespace "demo"`+"\n", errOut, watchFlag)
	}
}

// TestStatusClusterMachinePools: status of a ClusterClass cluster watches
// its MachinePools too, and ends only when they are upgraded; a management
// cluster that serves no MachinePools is watched without them (and never
// asked for a list of them).
func TestStatusClusterMachinePools(t *testing.T) {
	pending, done := chainDone, chainDone
	pending.machinePools = []topoMachinePool{{name: "mp-0", version: "v1.34.2", replicas: 3, upToDate: 3}}
	done.machinePools = []topoMachinePool{{name: "mp-0", version: "v1.35.0", replicas: 3, upToDate: 3}}
	now := time.Now()

	out, errOut, code := runFake(t, newFakeClient(objectsOf(pending)...), now, "status", "cluster/c1", "--watch=false")
	assert.Equal(t, ExitNotRolledOut, code)
	assert.Equal(t, `cluster/c1: upgrading to v1.35.0: workers v1.35.0 rolling out, 1 of 2 pools done
kubeadmcontrolplane/c1-control-plane: 3 of 3 machines up to date, 3 available
machinedeployment/c1-md-0: 2 of 2 machines up to date, 2 available
machinepool/c1-mp-0: 3 of 3 instances up to date, 3 available
`, out)
	assert.Equal(t, "cluster/c1 is not rolled out: upgrading to v1.35.0: workers v1.35.0 rolling out, 1 of 2 pools done\n", errOut)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newFakeClient(objectsOf(pending)...)
	r := startFake(ctx, cl, topoNS, now, "status", "cluster/c1", "--timeout", "25s")
	waitFor(t, r, "cluster/c1: upgrading to v1.35.0: workers v1.35.0 rolling out, 1 of 2 pools done")
	moveTo(ctx, t, cl, done)
	assert.Equal(t, core.ExitOK, exitOf(t, ctx, r), "stderr: %s", r.errOut)
	assert.True(t, strings.HasSuffix(r.out.String(), `machinepool/c1-mp-0 successfully rolled out (revision 2)
cluster/c1 successfully rolled out: at v1.35.0 on the control plane and 2 worker pools
`), r.out.String())

	// No MachinePools served: the kinds of the scheme but MachinePool.
	mapper := meta.NewDefaultRESTMapper(nil)
	for gvk := range core.Scheme().AllKnownTypes() {
		if gvk.Kind != "MachinePool" && gvk.Kind != "MachinePoolList" {
			mapper.Add(gvk, meta.RESTScopeNamespace)
		}
	}
	noPools := withNameIndexes(fake.NewClientBuilder().WithScheme(core.Scheme()).WithRESTMapper(mapper).WithObjects(objectsOf(chainDone)...)).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*clusterv1.MachinePoolList); ok {
				return &meta.NoKindMatchError{GroupKind: core.MachinePool.GVK.GroupKind(), SearchedVersions: []string{core.MachinePool.GVK.Version}}
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	for _, watchFlag := range []string{"--watch=true", "--watch=false"} {
		out, errOut, code := runFake(t, noPools, now, "status", "cluster/c1", watchFlag)
		assert.Equal(t, core.ExitOK, code, "%s: %s", watchFlag, errOut)
		assert.Contains(t, out, "at v1.35.0 on the control plane and 1 worker pool", watchFlag)
	}
}
