package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// Field paths the guard polices, as path segments for edit.
var (
	kcpVersion      = []string{"spec", "version"}
	kcpEtcdImageTag = []string{"spec", "kubeadmConfigSpec", "clusterConfiguration", "etcd", "local", "imageTag"}
	mdVersion       = []string{"spec", "template", "spec", "version"}
	topologyVersion = []string{"spec", "topology", "version"}
)

// Prefixes of the API server's answer for each webhook of config/webhook/manifests.yaml.
const (
	kcpDenied     = `admission webhook "validate.kubeadmcontrolplane.rollout-guard.io" denied the request: KubeadmControlPlane.controlplane.cluster.x-k8s.io "c1-control-plane" is invalid: `
	mdDenied      = `admission webhook "validate.machinedeployment.rollout-guard.io" denied the request: MachineDeployment.cluster.x-k8s.io "c1-md-0" is invalid: `
	clusterDenied = `admission webhook "validate.cluster.rollout-guard.io" denied the request: Cluster.cluster.x-k8s.io "c1" is invalid: `
)

// target picks the object of a world that a case edits.
type target func(w *framework.World) client.Object

func onKCP(w *framework.World) client.Object     { return w.KCP }
func onMD(w *framework.World) client.Object      { return w.MD }
func onCluster(w *framework.World) client.Object { return w.Cluster }

// TestGuardRefusesEachRule edits a cluster in a way that breaks one rule,
// through each of the four ways a client can write, and checks the API
// server's exact answer. A refused edit changes nothing, so one world serves
// the four edits of a case.
func TestGuardRefusesEachRule(t *testing.T) {
	cases := []struct {
		name   string
		world  framework.WorldSpec
		setup  func(t *testing.T, w *framework.World)
		target target
		path   []string
		value  string
		want   string // the whole error text the API server returns
	}{
		{
			name:   "ControlPlaneDowngrade",
			world:  framework.WorldSpec{Version: "v1.35.2", Running: []string{"v1.35.2"}, WorkerVersion: "v1.34.3"},
			target: onKCP, path: kcpVersion, value: "v1.34.1",
			want: kcpDenied + `spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Kubernetes downgrade from v1.35.2 to v1.34.1 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)`,
		},
		{
			name:   "EtcdDowngrade by image tag",
			world:  framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			target: onKCP, path: kcpEtcdImageTag, value: "3.5.24-0",
			want: kcpDenied + `spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag: Forbidden: KubeadmControlPlane c1-control-plane: etcd downgrade from 3.6.5 (kubeadm's default for v1.34.2) to 3.5.24 (imageTag 3.5.24-0) is not supported; etcd cannot return to an older minor by replacing members [rule EtcdDowngrade]; keep etcd at 3.6: set spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag to a 3.6.x tag such as 3.6.5-0, or downgrade etcd with its own procedure (etcdctl downgrade enable) outside Cluster API first`,
		},
		{
			name:   "EtcdDowngrade and ControlPlaneDowngrade on a revert from v1.34 to v1.33",
			world:  framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.33.5"},
			target: onKCP, path: kcpVersion, value: "v1.33.5",
			want: kcpDenied + `[spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Kubernetes downgrade from v1.34.2 to v1.33.5 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.34.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup), spec.version: Forbidden: KubeadmControlPlane c1-control-plane: etcd downgrade from 3.6.5 (kubeadm's default for v1.34.2) to 3.5.24 (kubeadm's default for v1.33.5) is not supported; etcd cannot return to an older minor by replacing members [rule EtcdDowngrade]; keep etcd at 3.6: set spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag to a 3.6.x tag such as 3.6.5-0, or downgrade etcd with its own procedure (etcdctl downgrade enable) outside Cluster API first]`,
		},
		{
			name:   "ControlPlaneMinorSkip",
			world:  framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			target: onKCP, path: kcpVersion, value: "v1.36.0",
			want: kcpDenied + `spec.version: Forbidden: KubeadmControlPlane c1-control-plane: upgrade from v1.34.2 to v1.36.0 skips v1.35; kubeadm upgrades one minor at a time [rule ControlPlaneMinorSkip]; set spec.version to a v1.35.x release first and wait until every control-plane machine runs it, then upgrade to v1.36`,
		},
		{
			name:   "WorkerNewerThanControlPlane",
			world:  framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			target: onMD, path: mdVersion, value: "v1.35.0",
			want: mdDenied + `spec.template.spec.version: Forbidden: MachineDeployment c1-md-0: v1.35.0 is newer than v1.34.2, the oldest version of control plane KubeadmControlPlane c1-control-plane (its spec.version); a kubelet must not be newer than the API server [rule WorkerNewerThanControlPlane]; keep spec.template.spec.version at v1.34.x or older until every machine of control plane KubeadmControlPlane c1-control-plane runs v1.35 or newer`,
		},
		{
			name:   "WorkerNewerThanControlPlane mid control-plane rollout",
			world:  framework.WorldSpec{Version: "v1.35.0", Running: []string{"v1.34.2", "v1.35.0"}, WorkerVersion: "v1.34.2"},
			target: onMD, path: mdVersion, value: "v1.35.0",
			want: mdDenied + `spec.template.spec.version: Forbidden: MachineDeployment c1-md-0: v1.35.0 is newer than v1.34.2, the oldest version of control plane KubeadmControlPlane c1-control-plane (run by one of its machines); a kubelet must not be newer than the API server [rule WorkerNewerThanControlPlane]; keep spec.template.spec.version at v1.34.x or older until every machine of control plane KubeadmControlPlane c1-control-plane runs v1.35 or newer`,
		},
		{
			name:   "WorkerTooOld",
			world:  framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.34.2"},
			target: onMD, path: mdVersion, value: "v1.31.5",
			want: mdDenied + `spec.template.spec.version: Forbidden: MachineDeployment c1-md-0: v1.31.5 is 4 minors older than v1.35.2, the newest version of control plane KubeadmControlPlane c1-control-plane (its spec.version); a kubelet may be at most 3 minors older than the API server [rule WorkerTooOld]; set spec.template.spec.version to v1.32.x or newer`,
		},
		{
			name:   "ControlPlaneLeavesWorkerTooOld",
			world:  framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.31.4", Kubelets: []string{"v1.31.4"}},
			target: onKCP, path: kcpVersion, value: "v1.35.0",
			want: kcpDenied + `[spec.version: Forbidden: KubeadmControlPlane c1-control-plane: MachineDeployment c1-md-0 runs v1.31.4, 4 minors older than v1.35.0; a kubelet may be at most 3 minors older than the API server [rule ControlPlaneLeavesWorkerTooOld]; upgrade MachineDeployment c1-md-0 to v1.32.x or newer first, then set spec.version to v1.35.0, spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Machine c1-worker-0 runs v1.31.4, 4 minors older than v1.35.0; a kubelet may be at most 3 minors older than the API server [rule ControlPlaneLeavesWorkerTooOld]; upgrade Machine c1-worker-0 to v1.32.x or newer first, then set spec.version to v1.35.0]`,
		},
		{
			name:   "ControlPlaneLeavesWorkerNewer",
			world:  framework.WorldSpec{Version: "v1.35.1", WorkerVersion: "v1.35.1", Kubelets: []string{"v1.35.1"}},
			target: onKCP, path: kcpVersion, value: "v1.34.9",
			want: kcpDenied + `[spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Kubernetes downgrade from v1.35.1 to v1.34.9 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup), spec.version: Forbidden: KubeadmControlPlane c1-control-plane: MachineDeployment c1-md-0 runs v1.35.1, newer than v1.34.9; a kubelet must not be newer than the API server [rule ControlPlaneLeavesWorkerNewer]; keep spec.version at v1.35.x or later while MachineDeployment c1-md-0 runs v1.35, spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Machine c1-worker-0 runs v1.35.1, newer than v1.34.9; a kubelet must not be newer than the API server [rule ControlPlaneLeavesWorkerNewer]; keep spec.version at v1.35.x or later while Machine c1-worker-0 runs v1.35]`,
		},
		{
			name:  "Cluster topology downgrade despite Cluster API's bypass annotation",
			world: framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.34.1", Topology: true},
			setup: func(t *testing.T, w *framework.World) {
				patch := client.MergeFrom(w.Cluster.DeepCopy())
				w.Cluster.Annotations = map[string]string{"unsafe.topology.cluster.x-k8s.io/disable-update-version-check": ""}
				require.NoError(t, env.Client.Patch(context.Background(), w.Cluster, patch))
			},
			target: onCluster, path: topologyVersion, value: "v1.34.1",
			want: clusterDenied + `spec.topology.version: Forbidden: Cluster c1: Kubernetes downgrade from v1.35.2 to v1.34.1 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.topology.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)`,
		},
		{
			name:   "InvalidVersion",
			world:  framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			target: onMD, path: mdVersion, value: "v1.35.x",
			want: mdDenied + `spec.template.spec.version: Invalid value: "v1.35.x": MachineDeployment c1-md-0: spec.template.spec.version "v1.35.x" is not a valid Kubernetes version [rule InvalidVersion]; write a Kubernetes version such as v1.35.2`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.world)
			if tc.setup != nil {
				tc.setup(t, w)
			}
			before := tc.target(w).DeepCopyObject().(client.Object)
			require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(before), before))
			for _, mode := range allModes {
				t.Run(string(mode), func(t *testing.T) {
					err := edit(t, mode, tc.target(w), tc.value, tc.path...)
					require.Error(t, err, "the guard let the edit through")
					assert.True(t, apierrors.IsInvalid(err) || apierrors.IsForbidden(err), "want Invalid/Forbidden, got %v", err)
					assert.Equal(t, tc.want, err.Error())
				})
			}
			after := tc.target(w).DeepCopyObject().(client.Object)
			require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(after), after))
			assert.Equal(t, before.GetResourceVersion(), after.GetResourceVersion(), "a refused edit changed the object")
		})
	}
}

// TestGuardAllowsSafeChanges makes the changes an operator makes every day,
// through each way of writing; none may be refused.
func TestGuardAllowsSafeChanges(t *testing.T) {
	cases := []struct {
		name   string
		world  framework.WorldSpec
		target target
		path   []string
		value  string
	}{
		{"control-plane patch upgrade", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"}, onKCP, kcpVersion, "v1.34.5"},
		{"control-plane minor upgrade by one", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"}, onKCP, kcpVersion, "v1.35.0"},
		{"control-plane patch downgrade inside a minor", framework.WorldSpec{Version: "v1.34.5", WorkerVersion: "v1.34.2"}, onKCP, kcpVersion, "v1.34.3"},
		{"etcd patch upgrade by image tag", framework.WorldSpec{Version: "v1.34.2", EtcdTag: "3.6.5-0", WorkerVersion: "v1.34.2"}, onKCP, kcpEtcdImageTag, "3.6.8-0"},
		{"worker upgrade to the control plane's version", framework.WorldSpec{Version: "v1.35.2", Running: []string{"v1.35.2"}, WorkerVersion: "v1.34.2"}, onMD, mdVersion, "v1.35.2"},
		{"worker three minors behind", framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.34.2"}, onMD, mdVersion, "v1.32.0"},
		{"topology minor upgrade by one", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2", Topology: true}, onCluster, topologyVersion, "v1.35.0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range allModes {
				t.Run(string(mode), func(t *testing.T) {
					w := newWorld(t, tc.world)
					require.NoError(t, edit(t, mode, tc.target(w), tc.value, tc.path...))
					w.Refresh(t)
					got := getString(t, tc.target(w), tc.path...)
					assert.Equal(t, tc.value, got, "the edit did not land")
				})
			}
		})
	}
}

// TestGuardStoppedFailsClosedOnlyForPolicedEdits stops the guard: Cluster
// API's own bookkeeping (status, finalizers, labels) must go on, because
// matchConditions keep it from ever reaching the guard, while a version
// change must fail closed.
func TestGuardStoppedFailsClosedOnlyForPolicedEdits(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	require.NoError(t, env.StopGuard())
	t.Cleanup(func() {
		require.NoError(t, env.StartGuard(context.Background()))
	})

	w.Refresh(t)
	w.KCP.Status.Versions = nil
	w.KCP.Status.ObservedGeneration = w.KCP.Generation
	require.NoError(t, env.Client.Status().Update(ctx, w.KCP), "status update while the guard is down")

	w.Refresh(t)
	w.MD.Finalizers = append(w.MD.Finalizers, "cluster.x-k8s.io/machinedeployment")
	require.NoError(t, env.Client.Update(ctx, w.MD), "finalizer change while the guard is down")

	w.Refresh(t)
	patch := client.MergeFrom(w.KCP.DeepCopy())
	w.KCP.Labels["team"] = "platform"
	require.NoError(t, env.Client.Patch(ctx, w.KCP, patch), "label change while the guard is down")

	w.Refresh(t)
	patch = client.MergeFrom(w.Cluster.DeepCopy())
	w.Cluster.Labels = map[string]string{"team": "platform"}
	require.NoError(t, env.Client.Patch(ctx, w.Cluster, patch), "Cluster label change while the guard is down")

	for _, mode := range allModes {
		err := edit(t, mode, w.KCP, "v1.34.3", kcpVersion...)
		require.Error(t, err, "%s: a version change passed with the guard down", mode)
		assert.Regexp(t, `failed calling webhook "(stamp|validate)\.kubeadmcontrolplane\.rollout-guard\.io"`, err.Error(), "%s", mode)
	}
	err := edit(t, mergePatch, w.MD, "v1.34.3", mdVersion...)
	require.Error(t, err, "a MachineDeployment version change passed with the guard down")
	assert.Regexp(t, `failed calling webhook "(stamp|validate)\.machinedeployment\.rollout-guard\.io"`, err.Error())
}

// getString reads a string field of obj as stored.
func getString(t *testing.T, obj client.Object, path ...string) string {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err)
	v, _, err := unstructured.NestedString(u, path...)
	require.NoError(t, err)
	return v
}
