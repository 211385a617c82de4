package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// The guard's refusals of a MachineSet and a Machine, as the API server
// prefixes them.
const (
	msCreatePrefix      = `admission webhook "validate-create.machineset.rollout-guard.io" denied the request: `
	msUpdatePrefix      = `admission webhook "validate.machineset.rollout-guard.io" denied the request: `
	machineCreatePrefix = `admission webhook "validate-create.machine.rollout-guard.io" denied the request: `
	machineUpdatePrefix = `admission webhook "validate.machine.rollout-guard.io" denied the request: `
	mdCreatePrefix      = `admission webhook "validate-create.machinedeployment.rollout-guard.io" denied the request: `
)

// standaloneMachineSet is MachineSet name of the world's Cluster at
// version, of no MachineDeployment unless owners says otherwise.
func standaloneMachineSet(w *framework.World, name, version string, owners ...metav1.OwnerReference) *clusterv1.MachineSet {
	return builder.MachineSet(w.Namespace, name).WithClusterName(framework.WorldClusterName).WithReplicas(1).
		WithVersion(version).WithBootstrapTemplate(name).WithInfrastructureTemplate(name).
		WithSelector(map[string]string{clusterv1.MachineSetNameLabel: name}).WithOwnerReferences(owners...).Build()
}

// standaloneMachine is worker Machine name of the world's Cluster at
// version, of no MachineSet unless owners says otherwise.
func standaloneMachine(w *framework.World, name, version string, owners ...metav1.OwnerReference) *clusterv1.Machine {
	m := builder.Machine(w.Namespace, name).WithClusterName(framework.WorldClusterName).WithVersion(version).
		WithBootstrapDataSecret("bootstrap").WithInfrastructureRef("DevMachine", name).Build()
	m.OwnerReferences = owners
	return m
}

// controllerRef is the controller owner reference Cluster API's
// controllers put on what obj (of kind) makes.
func controllerRef(obj client.Object, kind string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: kind, Name: obj.GetName(), UID: obj.GetUID(), Controller: ptr.To(true)}
}

// TestMachineSetsAndMachinesOutsideAPool: a MachineSet or a Machine made
// by hand — of no MachineDeployment, MachinePool or control plane — is
// judged as a worker pool is, through the API server: ahead of the control
// plane refused on create and on update, with the guard's words naming it,
// its field and the way out; within the skew admitted. One naming an owner
// that is not real (another UID) is judged the same. What a real owner
// makes at the owner's version is admitted without being judged again,
// even at a version the guard let the owner have only by an override.
func TestMachineSetsAndMachinesOutsideAPool(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.35.2", Running: []string{"v1.35.2"}, WorkerVersion: "v1.35.2"})
	const newerMS = `MachineSet.cluster.x-k8s.io "c1-ms" is invalid: spec.template.spec.version: Forbidden: MachineSet c1-ms: v1.36.0 is newer than v1.35.2, the oldest version of control plane KubeadmControlPlane c1-control-plane (its spec.version); a kubelet must not be newer than the API server [rule WorkerNewerThanControlPlane]; keep spec.template.spec.version at v1.35.x or older until every machine of control plane KubeadmControlPlane c1-control-plane runs v1.36 or newer`
	const newerMachine = `Machine.cluster.x-k8s.io "c1-m" is invalid: spec.version: Forbidden: Machine c1-m: v1.36.0 is newer than v1.35.2, the oldest version of control plane KubeadmControlPlane c1-control-plane (its spec.version); a kubelet must not be newer than the API server [rule WorkerNewerThanControlPlane]; keep spec.version at v1.35.x or older until every machine of control plane KubeadmControlPlane c1-control-plane runs v1.36 or newer`

	// Made by hand, ahead of the control plane: refused.
	err := env.Client.Create(ctx, standaloneMachineSet(w, "c1-ms", "v1.36.0"))
	require.Error(t, err)
	assert.Equal(t, msCreatePrefix+newerMS, err.Error())
	err = env.Client.Create(ctx, standaloneMachine(w, "c1-m", "v1.36.0"))
	require.Error(t, err)
	assert.Equal(t, machineCreatePrefix+newerMachine, err.Error())

	// Within the skew: admitted; moved ahead afterwards: refused.
	ms := standaloneMachineSet(w, "c1-ms", "v1.32.4")
	require.NoError(t, env.Client.Create(ctx, ms))
	m := standaloneMachine(w, "c1-m", "v1.35.2")
	require.NoError(t, env.Client.Create(ctx, m))
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			err := edit(t, mode, ms, "v1.36.0", "spec", "template", "spec", "version")
			require.Error(t, err)
			assert.Equal(t, msUpdatePrefix+newerMS, err.Error())
			err = edit(t, mode, m, "v1.36.0", "spec", "version")
			require.Error(t, err)
			assert.Equal(t, machineUpdatePrefix+newerMachine, err.Error())
		})
	}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(m), m))
	assert.Equal(t, "v1.35.2", m.Spec.Version, "no refused edit was stored")
	// Churn of what the controllers write (labels, annotations, status)
	// never calls the guard: no match condition holds.
	m.Labels = map[string]string{"touched": "yes"}
	require.NoError(t, env.Client.Update(ctx, m))

	// A MachineDeployment let ahead of the control plane by an override: the
	// MachineSet and Machine its controllers make at its version are not
	// judged again.
	oncall := framework.UserClient(t, env, "oncall", overrideGroup)
	ahead := w.Pool("c1-md-ahead", "v1.36.0").WithAnnotations(map[string]string{revisions.AnnotationOverride: "INC-9: canary kubelet"}).Build()
	require.NoError(t, oncall.Create(ctx, ahead))
	owned := standaloneMachineSet(w, "c1-md-ahead-abcde", "v1.36.0", controllerRef(ahead, "MachineDeployment"))
	require.NoError(t, env.Client.Create(ctx, owned), "a MachineSet of its MachineDeployment, at its version")
	require.NoError(t, env.Client.Create(ctx, standaloneMachine(w, "c1-md-ahead-abcde-x", "v1.36.0", controllerRef(owned, "MachineSet"))),
		"a Machine of its MachineSet, at its version")

	// The same owners claimed with another UID: judged, refused.
	forged := controllerRef(ahead, "MachineDeployment")
	forged.UID = types.UID("00000000-0000-0000-0000-000000000000")
	err = env.Client.Create(ctx, standaloneMachineSet(w, "c1-ms", "v1.36.0", forged))
	require.Error(t, err)
	assert.Equal(t, msCreatePrefix+newerMS, err.Error())
	forged = controllerRef(owned, "MachineSet")
	forged.UID = types.UID("00000000-0000-0000-0000-000000000000")
	err = env.Client.Create(ctx, standaloneMachine(w, "c1-m", "v1.36.0", forged))
	require.Error(t, err)
	assert.Equal(t, machineCreatePrefix+newerMachine, err.Error())
	// A real owner, but a version of its own: judged, refused.
	err = env.Client.Create(ctx, standaloneMachine(w, "c1-m", "v1.36.0", controllerRef(w.MD, "MachineDeployment")))
	require.Error(t, err)
	assert.Equal(t, machineCreatePrefix+newerMachine, err.Error(), "a MachineDeployment makes no Machines itself")
}

// TestPreflightSkipNeedsTheOverride: the annotation that skips Cluster
// API's MachineSet preflight checks of version skew, set on a
// MachineDeployment or a MachineSet, is refused for a user outside the
// override groups (naming the checks and the way out) and admitted for a
// member with the override annotation; skipping only ControlPlaneIsStable
// skips no skew check and is admitted for anyone.
func TestPreflightSkipNeedsTheOverride(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.35.2", Running: []string{"v1.35.2"}, WorkerVersion: "v1.35.2"})
	skip := func(c client.Client, obj client.Object, value, override string) error {
		patch := map[string]any{clusterv1.MachineSetSkipPreflightChecksAnnotation: value}
		if override != "" {
			patch[revisions.AnnotationOverride] = override
		}
		data, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": patch}})
		require.NoError(t, err)
		return c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, data))
	}
	mallory := framework.UserClient(t, env, "mallory")
	err := skip(mallory, w.MD, "ControlPlaneIsStable,KubernetesVersionSkew", "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `admission webhook "validate.machinedeployment.rollout-guard.io" denied the request: MachineDeployment.cluster.x-k8s.io "c1-md-0" is invalid: metadata.annotations: Forbidden: MachineDeployment c1-md-0: annotation machineset.cluster.x-k8s.io/skip-preflight-checks="ControlPlaneIsStable,KubernetesVersionSkew" skips Cluster API's preflight check(s) KubernetesVersionSkew, which keep its MachineSets from creating Machines out of version skew with the control plane [rule PreflightSkewChecksSkipped]; leave those checks out of the annotation (ControlPlaneIsStable alone skips no skew check), or have a member of an override group set rollout-guard.io/override with the reason`)
	err = skip(mallory, w.MD, "All", "INC-10: join the old pool")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "override not honoured: user mallory is not in an override group (platform-admins)")
	require.NoError(t, skip(mallory, w.MD, "ControlPlaneIsStable", ""), "skips no skew check")

	oncall := framework.UserClient(t, env, "oncall", overrideGroup)
	require.NoError(t, skip(oncall, w.MD, "All", "INC-10: join the old pool"))
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(w.MD), w.MD))
	assert.Equal(t, "All", w.MD.Annotations[clusterv1.MachineSetSkipPreflightChecksAnnotation])

	// A MachineSet of that MachineDeployment carries it as the
	// MachineDeployment controller copies it: admitted; one made by hand:
	// refused.
	ms := standaloneMachineSet(w, "c1-md-0-abcde", "v1.35.2", controllerRef(w.MD, "MachineDeployment"))
	ms.Annotations = map[string]string{clusterv1.MachineSetSkipPreflightChecksAnnotation: "All"}
	require.NoError(t, env.Client.Create(ctx, ms))
	byHand := standaloneMachineSet(w, "c1-ms", "v1.35.2")
	byHand.Annotations = map[string]string{clusterv1.MachineSetSkipPreflightChecksAnnotation: "KubeadmVersionSkew"}
	err = mallory.Create(ctx, byHand)
	require.Error(t, err)
	assert.Contains(t, err.Error(), msCreatePrefix+`MachineSet.cluster.x-k8s.io "c1-ms" is invalid: metadata.annotations: Forbidden: MachineSet c1-ms: annotation machineset.cluster.x-k8s.io/skip-preflight-checks="KubeadmVersionSkew" skips`)
	byHand.Annotations[revisions.AnnotationOverride] = "INC-10: join the old pool"
	require.NoError(t, oncall.Create(ctx, byHand))
}

// TestEmptyVersionsRefused: a worker pool, MachineSet or Machine set to
// run no version — whatever its machine image holds, which neither the
// guard nor Cluster API's preflight checks can compare — in a Cluster
// whose control plane has a version is refused with the way out; the
// override lets it through; a create in a paused Cluster (as `clusterctl
// move` creates objects) is admitted with a warning.
func TestEmptyVersionsRefused(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.35.2", Running: []string{"v1.35.2"}, WorkerVersion: "v1.35.2"})
	const unset = `spec.template.spec.version: Forbidden: MachineDeployment c1-md-1: spec.template.spec.version is empty, so its kubelets would run whatever version their machine image holds, checked neither against control plane KubeadmControlPlane c1-control-plane (spec.version v1.35.2) by rollout-guard nor by Cluster API's MachineSet preflight checks [rule WorkerVersionUnset]; set spec.template.spec.version to the version the machines run, within the kubelet skew of v1.35.2 (e.g. v1.35.2), or have a member of an override group set rollout-guard.io/override with the reason`

	err := env.Client.Create(ctx, w.Pool("c1-md-1", "").Build())
	require.Error(t, err)
	assert.Equal(t, mdCreatePrefix+`MachineDeployment.cluster.x-k8s.io "c1-md-1" is invalid: `+unset, err.Error())

	// Taken away from a pool (Cluster API's schema refuses "" itself, so
	// the field is removed): refused the same, by an update or a merge
	// patch.
	err = edit(t, typedV1beta2, w.MD, "", "spec", "template", "spec", "version")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `admission webhook "validate.machinedeployment.rollout-guard.io" denied the request: `)
	assert.Contains(t, err.Error(), "[rule WorkerVersionUnset]")
	err = env.Client.Patch(ctx, w.MD.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"template":{"spec":{"version":null}}}}`)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "[rule WorkerVersionUnset]")
	err = env.Client.Create(ctx, w.MachinePool("c1-mp-0", "").WithBootstrapConfig("c1-mp-0").Build())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MachinePool c1-mp-0: spec.template.spec.version is empty")
	err = env.Client.Create(ctx, standaloneMachine(w, "c1-m", ""))
	require.Error(t, err)
	assert.Contains(t, err.Error(), machineCreatePrefix+`Machine.cluster.x-k8s.io "c1-m" is invalid: spec.version: Forbidden: Machine c1-m: spec.version is empty`)

	// The override lets it through.
	oncall := framework.UserClient(t, env, "oncall", overrideGroup)
	require.NoError(t, oncall.Create(ctx, w.Pool("c1-md-1", "").WithAnnotations(map[string]string{revisions.AnnotationOverride: "INC-11: image pins the kubelet"}).Build()))

	// A paused Cluster, as `clusterctl move` makes it on its target: a
	// create is admitted, with a warning.
	w.Refresh(t)
	w.Cluster.Spec.Paused = ptr.To(true)
	require.NoError(t, env.Client.Update(ctx, w.Cluster))
	warned, warnings := warningClient(t, "")
	require.Eventually(t, func() bool {
		return warned.Create(ctx, w.Pool("c1-md-2", "").Build(), client.DryRunAll) == nil
	}, 20*time.Second, 100*time.Millisecond, "the guard never saw the Cluster paused")
	require.NoError(t, warned.Create(ctx, w.Pool("c1-md-2", "").Build()))
	assert.Contains(t, warnings.all(), "[rule WorkerVersionUnset]")
	assert.Contains(t, warnings.all(), "created in paused Cluster "+w.Namespace+"/c1, as `clusterctl move` creates it")
	// What is out of skew is refused all the same.
	err = warned.Create(ctx, w.Pool("c1-md-3", "v1.36.0").Build())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "[rule WorkerNewerThanControlPlane]")
}

// all returns every warning kept, one a line.
func (w *warningRecorder) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.texts, "\n")
}
