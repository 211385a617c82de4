package revisions

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// contractCP is a control plane of another provider at version, its
// machines' infrastructure template infra, with fields of its own.
func contractCP(version, infra string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
		"kind":       "KthreesControlPlane",
		"metadata":   map[string]any{"namespace": "ns", "name": "cp", "uid": "uid-cp", "resourceVersion": "9"},
		"spec": map[string]any{
			"version":           version,
			"replicas":          int64(3),
			"kthreesConfigSpec": map[string]any{"agentConfig": map[string]any{"nodeName": "x"}},
			"machineTemplate": map[string]any{
				"metadata": map[string]any{"annotations": map[string]any{AnnotationRevision: "2", "team": "a"}},
				"spec": map[string]any{"infrastructureRef": map[string]any{
					"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachineTemplate", "name": infra,
				}},
			},
		},
	}}
	return u
}

// TestContractControlPlaneRevisions: a control plane of another provider
// is recorded by the contract's fields only (spec.version,
// spec.machineTemplate), round-trips through a RolloutRevision labelled
// with the contract kind and owned by the provider's kind, diffs, and rolls
// back through those fields alone.
func TestContractControlPlaneRevisions(t *testing.T) {
	snap, err := ForContractControlPlane(contractCP("v1.35.2", "cp-a"))
	require.NoError(t, err)
	assert.Equal(t, KindContractControlPlane, snap.Kind)
	assert.JSONEq(t, `{"version":"v1.35.2","machineTemplate":{"metadata":{"annotations":{"team":"a"}},"spec":{"infrastructureRef":{"apiGroup":"infrastructure.cluster.x-k8s.io","kind":"DevMachineTemplate","name":"cp-a"}}}}`, string(snap.Data))

	sum, err := snap.Summary()
	require.NoError(t, err)
	assert.Equal(t, Summary{Version: "v1.35.2", Infrastructure: "DevMachineTemplate/cp-a"}, sum)
	run, err := RunOf(snap)
	require.NoError(t, err)
	assert.Equal(t, "v1.35.2", run.Kubernetes.Text())
	assert.Empty(t, run.Etcd.Text(), "no etcd is known of another provider")

	gvk := schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KthreesControlPlane"}
	cr := RolloutRevision(contractCP("v1.35.2", "cp-a"), gvk, snap, Record{Revision: 2, History: []int64{2}})
	assert.Equal(t, KindContractControlPlane, cr.Labels[LabelOwnerKind])
	assert.Equal(t, "KthreesControlPlane", cr.OwnerReferences[0].Kind)
	got, err := FromRolloutRevision(cr)
	require.NoError(t, err)
	assert.Equal(t, snap.Hash, got.Snapshot.Hash)

	newer, err := ForContractControlPlane(contractCP("v1.36.1", "cp-b"))
	require.NoError(t, err)
	cause, err := ChangeCause(snap, newer)
	require.NoError(t, err)
	assert.Equal(t, "version v1.35.2 → v1.36.1; infrastructureRef cp-a → cp-b", cause)

	patch, err := RollbackPatch(contractCP("v1.36.1", "cp-b"), snap)
	require.NoError(t, err)
	var p map[string]any
	require.NoError(t, json.Unmarshal(patch, &p))
	assert.Equal(t, map[string]any{
		"metadata": map[string]any{"resourceVersion": "9"},
		"spec": map[string]any{
			"version":         "v1.35.2",
			"machineTemplate": map[string]any{"spec": map[string]any{"infrastructureRef": map[string]any{"name": "cp-a"}}},
		},
	}, p)
}
