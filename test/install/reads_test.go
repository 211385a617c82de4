package install

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// objectResources are the resources the guard keeps trimmed in its cache
// and records the revisions of: what it would read back from the API
// server to record one.
var objectResources = []string{"machinedeployments", "kubeadmcontrolplanes"}

// TestRecordingReadsNoObjectBack: the guard caches worker pools and
// control planes without most of their templates, yet records every
// revision whole. It takes the whole content from what its cache saw of
// each change (history.Pending), so recording a template edit reads
// nothing back from the API server; and restarted over a recorded
// history, it knows each object's content is recorded by the hash its
// cache noted, and reads none of them either. The API server's own count
// of GETs of those resources is the witness (nothing else in this package
// reads them meanwhile: the edits are patches, the history is listed).
func TestRecordingReadsNoObjectBack(t *testing.T) {
	ctx := t.Context()
	ns := fmt.Sprintf("install-reads-%d", pruneNamespaces.Add(1))
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	objs := []client.Object{pruneMachineDeployment(ns), pruneKubeadmControlPlane(ns)}
	patch := []string{
		`{"spec":{"template":{"metadata":{"labels":{"step":"%d"}}}}}`,
		`{"spec":{"machineTemplate":{"metadata":{"labels":{"step":"%d"}}}}}`,
	}
	const edits = 15
	before := objectGets(t)
	for _, obj := range objs {
		require.NoError(t, env.Client.Create(ctx, obj))
	}
	for i := 2; i <= edits+1; i++ {
		for k, obj := range objs {
			require.NoError(t, env.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, patch[k], i))))
		}
	}
	// Back to the template of revision 2: recorded already, numbered anew.
	for k, obj := range objs {
		require.NoError(t, env.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, patch[k], 2))))
	}
	last := int64(edits + 2)
	waitRecorded(t, ns, objs, last)
	gets := since(objectGets(t), before)
	t.Logf("GETs of the edited objects while %d revisions of each were recorded (the last back at revision 2's template): %v", last, gets)
	for _, resource := range objectResources {
		// Exactly none but for a race: the reconciler reads a cached copy
		// while the cache has already seen (not yet stored) the next
		// change; it then reads that copy's content whole. Reading every
		// object back, the guard would send one per revision.
		assert.LessOrEqual(t, gets[resource], 2.0, "GETs of %s while recording %d revisions of one", resource, last)
	}

	// A restart over the recorded history reads none of them.
	require.NoError(t, env.StopGuard())
	before = objectGets(t)
	require.NoError(t, env.StartGuard(ctx))
	// The start reconciles every object once its revision index has
	// filled, a moment after it is ready: wait until the guard's own
	// metrics say it has reconciled them all.
	waitStartReconciled(t, ns)
	gets = since(objectGets(t), before)
	t.Logf("GETs of the objects by the guard's start: %v", gets)
	for _, resource := range objectResources {
		assert.Zero(t, gets[resource], "GETs of %s by the guard's start", resource)
	}
	// One more edit, recorded by the restarted guard: its reconciler runs,
	// and reads nothing either.
	before = objectGets(t)
	for k, obj := range objs {
		require.NoError(t, env.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, patch[k], last+1))))
	}
	waitRecorded(t, ns, objs, last+1)
	gets = since(objectGets(t), before)
	t.Logf("GETs of the objects while the restarted guard recorded an edit of each: %v", gets)
	for _, resource := range objectResources {
		assert.LessOrEqual(t, gets[resource], 1.0, "GETs of %s while the restarted guard recorded one edit", resource)
	}
}

// waitRecorded waits until the history of each of objs holds revision
// want, the live one.
func waitRecorded(t *testing.T, ns string, objs []client.Object, want int64) {
	t.Helper()
	for _, obj := range objs {
		assert.Eventually(t, func() bool {
			list, _, err := history.List(context.Background(), env.Client, ns, string(obj.GetUID()))
			return err == nil && slices.ContainsFunc(list, func(r revisions.Revision) bool { return r.Record.Revision == want })
		}, pruneTimeout, 100*time.Millisecond, "%T %s/%s: revision %d never recorded", obj, ns, obj.GetName(), want)
	}
}

// waitStartReconciled waits until the guard's history reconcilers have
// reconciled every MachineDeployment, MachinePool and KubeadmControlPlane
// of the API server and have nothing queued, as its own metrics say (read
// with a token of the shipped metrics-reader role, made in namespace
// ns+"-metrics").
func waitStartReconciled(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	var objects float64
	for _, list := range []client.ObjectList{&clusterv1.MachineDeploymentList{}, &clusterv1.MachinePoolList{}, &controlplanev1.KubeadmControlPlaneList{}} {
		require.NoError(t, env.Client.List(ctx, list))
		objects += float64(apimeta.LenList(list))
	}
	token, err := framework.MetricsReaderToken(ctx, env.Client, ns+"-metrics", time.Hour)
	require.NoError(t, err)
	var last framework.HistoryReconciles
	ok := assert.Eventually(t, func() bool {
		h, err := framework.ScrapeHistoryReconciles(ctx, env.GuardMetricsURL(), token)
		if err != nil {
			return false // the binding takes a moment to take effect
		}
		last = h
		return h.Done >= objects && h.Queued == 0
	}, pruneTimeout, 200*time.Millisecond)
	require.True(t, ok, "the restarted guard reconciled %v of %v objects (%v queued)", last.Done, objects, last.Queued)
}

// objectGets returns the API server's count of GETs of objectResources
// (apiserver_request_total), by resource.
func objectGets(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, resource := range objectResources {
		out[resource] = apiRequests(t, resource)["GET"]
	}
	return out
}

// since returns now less before, key by key.
func since(now, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range now {
		out[k] = v - before[k]
	}
	return out
}
