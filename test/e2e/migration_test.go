package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rollout-guard/rollout-guard/revisions"
	historyv1 "github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// earlierRelease is what the release before RolloutRevisions left in a
// sandbox after a restart and a template switch of a worker pool and a
// restart of a control plane: the objects, their ControllerRevisions
// (`kubectl get controllerrevisions -A -o yaml`) and `rollout history -o
// json` of each, as that release's CLI printed it.
const earlierRelease = "testdata/earlier-release"

// TestAnUpgradedGuardKeepsEarlierHistory: a guard started where an earlier
// release recorded history in ControllerRevisions moves it into
// RolloutRevisions: `rollout history -o json` prints what the earlier
// release's CLI printed, the guard's ControllerRevisions are gone (a
// StatefulSet's stays), and the next revision is numbered after the
// migrated ones.
func TestAnUpgradedGuardKeepsEarlierHistory(t *testing.T) {
	ctx := context.Background()
	ns := fmt.Sprintf("e2e-%d", nsCounter.Add(1))
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	// The earlier release's objects, created while no guard runs (creates
	// fail open), as they were: stamps and all.
	restartGuard := stopGuard(t)
	uids := map[string]types.UID{}
	for _, file := range []string{"machinedeployment.yaml", "kubeadmcontrolplane.yaml"} {
		obj := readEarlier(t, file, ns)
		require.NoError(t, env.Client.Create(ctx, obj), "creating the earlier release's %s", file)
		uids[obj.GetName()] = obj.GetUID()
	}
	list := &appsv1.ControllerRevisionList{}
	raw, err := os.ReadFile(filepath.Join(earlierRelease, "controllerrevisions.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, list))
	migrating := 0
	for _, cr := range list.Items {
		owner := metav1.GetControllerOf(&cr)
		require.NotNil(t, owner, "ControllerRevision %s of the fixture has no owner", cr.Name)
		uid, ok := uids[owner.Name]
		if !ok {
			continue // another demo object's
		}
		cr.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: cr.Name, Labels: cr.Labels, Annotations: cr.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: uid, Controller: owner.Controller}}}
		cr.Labels[revisions.LabelOwnerUID] = string(uid)
		require.NoError(t, env.Client.Create(ctx, &cr), "creating the earlier release's ControllerRevision %s", cr.Name)
		migrating++
	}
	require.Equal(t, 3, migrating, "the fixture's ControllerRevisions of the pool and the control plane")
	foreign := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-6d4b9", Labels: map[string]string{"app": "web"}},
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{"template":{}}}`)}, Revision: 4}
	require.NoError(t, env.Client.Create(ctx, foreign), "a StatefulSet's ControllerRevision")

	restartGuard()

	for ref, file := range map[string]string{"md/demo-md-0": "md-history.json", "kcp/demo-control-plane": "kcp-history.json"} {
		want := readEarlierHistory(t, file)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got, err := historyOf(ctx, ns, ref)
			require.NoError(c, err)
			assert.Equal(c, want, got, "rollout history %s -o json after the upgrade, as the earlier release printed it", ref)
		}, 30*time.Second, 200*time.Millisecond)
	}
	left := &appsv1.ControllerRevisionList{}
	require.NoError(t, env.Client.List(ctx, left, client.InNamespace(ns)))
	var names []string
	for _, cr := range left.Items {
		names = append(names, cr.Name)
	}
	assert.Equal(t, []string{foreign.Name}, names, "ControllerRevisions left after the migration")

	// The next revision comes after the migrated ones.
	md := &unstructured.Unstructured{}
	md.SetAPIVersion("cluster.x-k8s.io/v1beta2")
	md.SetKind("MachineDeployment")
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "demo-md-0"}, md))
	patch := client.MergeFromWithOptions(md.DeepCopy(), client.MergeFromWithOptimisticLock{})
	require.NoError(t, unstructured.SetNestedField(md.Object, "demo-md-0-v3", "spec", "template", "spec", "infrastructureRef", "name"))
	require.NoError(t, env.Client.Patch(ctx, md, patch), "a template switch after the upgrade")
	assert.Equal(t, "3", md.GetAnnotations()[revisions.AnnotationRevision], "the revision after the migrated 1 and 2")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := historyOf(ctx, ns, "md/demo-md-0")
		require.NoError(c, err)
		var numbers []int64
		for _, r := range got.Revisions {
			numbers = append(numbers, r.Revision)
		}
		assert.Equal(c, []int64{1, 2, 3}, numbers, "the pool's revisions after the switch")
	}, 30*time.Second, 200*time.Millisecond)
}

// readEarlier reads an object of the earlier release's fixture into
// namespace, as a create sends it: without what the API server sets
// (identity, owners, finalizers, status).
func readEarlier(t *testing.T, file, namespace string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(earlierRelease, file))
	require.NoError(t, err)
	obj := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(raw, &obj.Object))
	for _, field := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "ownerReferences", "finalizers"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", field)
	}
	unstructured.RemoveNestedField(obj.Object, "status")
	obj.SetNamespace(namespace)
	return obj
}

// readEarlierHistory reads a `rollout history -o json` of the earlier
// release, the object's namespace and UID left out.
func readEarlierHistory(t *testing.T, file string) historyv1.RolloutHistory {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(earlierRelease, file))
	require.NoError(t, err)
	var h historyv1.RolloutHistory
	require.NoError(t, json.Unmarshal(raw, &h))
	h.Object.Namespace, h.Object.UID = "", ""
	return h
}

// historyOf runs `rollout history REF -o json` in namespace, the object's
// namespace and UID left out.
func historyOf(ctx context.Context, namespace, ref string) (historyv1.RolloutHistory, error) {
	var stdout, stderr bytes.Buffer
	cache, err := os.MkdirTemp("", "rollout-cache-")
	if err != nil {
		return historyv1.RolloutHistory{}, err
	}
	defer os.RemoveAll(cache)
	if code := framework.RunRollout(ctx, env.Kubeconfig, cache, &stdout, &stderr, "history", ref, "-o", "json", "-n", namespace); code != 0 {
		return historyv1.RolloutHistory{}, fmt.Errorf("rollout history %s: exit %d: %s", ref, code, stderr.String())
	}
	var h historyv1.RolloutHistory
	if err := json.Unmarshal(stdout.Bytes(), &h); err != nil {
		return historyv1.RolloutHistory{}, fmt.Errorf("rollout history %s -o json: %w", ref, err)
	}
	h.Object.Namespace, h.Object.UID = "", ""
	return h, nil
}
