package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// storedState is what the API server stores of an object and its history.
type storedState struct {
	ResourceVersion string
	Generation      int64
	Spec            string
	Annotations     map[string]string
	// History is the RolloutRevisions labelled with the object's UID:
	// each one's resourceVersion, by name.
	History map[string]string
}

// stored reads obj's state as the API server stores it, into a copy.
func stored(t *testing.T, obj client.Object) storedState {
	t.Helper()
	ctx := context.Background()
	fresh := obj.DeepCopyObject().(client.Object)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(obj), fresh))
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(fresh)
	require.NoError(t, err)
	spec, err := json.Marshal(u["spec"])
	require.NoError(t, err)
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, env.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()),
		client.MatchingLabels{revisions.LabelOwnerUID: string(fresh.GetUID())}))
	history := map[string]string{}
	for _, cr := range list.Items {
		history[cr.Name] = cr.ResourceVersion
	}
	return storedState{ResourceVersion: fresh.GetResourceVersion(), Generation: fresh.GetGeneration(),
		Spec: string(spec), Annotations: fresh.GetAnnotations(), History: history}
}

// TestServerDryRunStoresNothing: a change the guard admits, sent with
// --dry-run=server — a template switch of the control plane, an undo of
// the worker pool — is answered by the API server and the guard and
// stores nothing: the object's resourceVersion, generation, spec and
// annotations, and its history (its RolloutRevisions and their
// resourceVersions), are as they were. The same command without the flag
// changes each of them, so the comparison can tell.
func TestServerDryRunStoresNothing(t *testing.T) {
	w := newWorld(t, "cli-dry-run-server", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	kcp := "kcp/" + kcpName
	md := "machinedeployment/" + mdName
	rolloutCmd(t, md, "--template", "devmachinetemplate/c1-md-1", "-n", w.Namespace).ok(t)
	waitRecorded(t, w.MD)
	waitRecorded(t, w.KCP)

	for _, tc := range []struct {
		name string
		obj  client.Object
		args []string
		// said is what the dry run prints, sent is what the real run prints last.
		said, sent string
		// revisions is how many RolloutRevisions the object has once
		// the real run's change is recorded.
		revisions int
	}{
		{
			name: "template switch of the control plane", obj: w.KCP,
			args: []string{kcp, "--version", "v1.35.0", "--template", "devmachinetemplate/c1-control-plane-1"},
			said: "(server dry run)", sent: "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane rolling out: version v1.34.2 → v1.35.0; infrastructureRef c1-control-plane → c1-control-plane-1\n",
			revisions: 2,
		},
		{
			name: "undo of the worker pool", obj: w.MD,
			args: []string{"undo", md},
			said: "(server dry run)", sent: "machinedeployment.cluster.x-k8s.io/c1-md-0 rolled back to revision 1 (now revision 3)\n",
			revisions: 2, // 1 and 3 share a record
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := stored(t, tc.obj)
			out := rolloutCmd(t, append(tc.args, "-n", w.Namespace, "--dry-run=server")...).ok(t)
			assert.Contains(t, out, tc.said, "the dry run says it was one")
			assert.Equal(t, before, stored(t, tc.obj), "what the API server stores after --dry-run=server")

			out = rolloutCmd(t, append(tc.args, "-n", w.Namespace)...).ok(t)
			assert.Equal(t, tc.sent, lastLine(out))
			waitRecorded(t, tc.obj)
			after := stored(t, tc.obj)
			assert.NotEqual(t, before.ResourceVersion, after.ResourceVersion, "resourceVersion after the change")
			assert.Equal(t, before.Generation+1, after.Generation, "generation after the change")
			assert.NotEqual(t, before.Spec, after.Spec, "spec after the change")
			assert.NotEqual(t, before.Annotations[revisions.AnnotationRevision], after.Annotations[revisions.AnnotationRevision], "revision stamp after the change")
			assert.NotEqual(t, before.History, after.History, "history after the change")
			// The dry run left no record behind for the real run to meet.
			assert.Len(t, after.History, tc.revisions, "RolloutRevisions after the change: %v", after.History)
		})
	}
}
