package revisions

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func testMachinePool(version, infra string) *clusterv1.MachinePool {
	mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mp-0", UID: "uid-mp-0", ResourceVersion: "7"}}
	mp.Spec.ClusterName = "c1"
	mp.Spec.Template.Spec.Version = version
	mp.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachinePool", Name: infra}
	mp.Spec.Template.ObjectMeta.Annotations = map[string]string{AnnotationRevision: "3", "team": "a"}
	return mp
}

// TestMachinePoolRevisions: a MachinePool's revision is its spec.template in
// the canonical form of a MachineDeployment's, under its own kind; it
// round-trips through a RolloutRevision, summarises, diffs and rolls back
// through spec.template.
func TestMachinePoolRevisions(t *testing.T) {
	mp := testMachinePool("v1.35.2", "mp-0-a")
	snap, err := ForMachinePool(mp)
	require.NoError(t, err)
	assert.Equal(t, KindMachinePool, snap.Kind)

	md := &clusterv1.MachineDeployment{}
	md.Spec.Template = mp.Spec.Template
	mdSnap, err := ForMachineDeployment(md)
	require.NoError(t, err)
	assert.JSONEq(t, string(mdSnap.Data), string(snap.Data), "same content as a MachineDeployment's template")
	assert.NotEqual(t, mdSnap.Hash, snap.Hash, "the kind is part of the hash")
	assert.NotContains(t, string(snap.Data), AnnotationRevision, "the project's template annotations are not content")

	sum, err := snap.Summary()
	require.NoError(t, err)
	assert.Equal(t, Summary{Version: "v1.35.2", Infrastructure: "DevMachinePool/mp-0-a"}, sum)

	cr := RolloutRevision(mp, clusterv1.GroupVersion.WithKind("MachinePool"), snap, Record{Revision: 3, History: []int64{3}, ChangedBy: "alice"})
	got, err := FromRolloutRevision(cr)
	require.NoError(t, err)
	assert.Equal(t, snap.Hash, got.Snapshot.Hash)
	assert.Equal(t, KindMachinePool, got.Snapshot.Kind)

	newer, err := ForMachinePool(testMachinePool("v1.36.0", "mp-0-b"))
	require.NoError(t, err)
	cause, err := ChangeCause(snap, newer)
	require.NoError(t, err)
	assert.Equal(t, "version v1.35.2 → v1.36.0; infrastructureRef mp-0-a → mp-0-b", cause)
	inPlace, err := IsInPlace(snap, newer)
	require.NoError(t, err)
	assert.False(t, inPlace, "a version change replaces the pool's machines")

	patch, err := RollbackPatch(testMachinePool("v1.36.0", "mp-0-b"), snap)
	require.NoError(t, err)
	var p map[string]any
	require.NoError(t, json.Unmarshal(patch, &p))
	assert.Equal(t, map[string]any{
		"metadata": map[string]any{"resourceVersion": "7"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"version":           "v1.35.2",
			"infrastructureRef": map[string]any{"name": "mp-0-a"},
		}}},
	}, p)

	_, err = RollbackPatch(testMachinePool("v1.36.0", "mp-0-b"), mdSnap)
	assert.ErrorContains(t, err, "the target is a MachineDeployment revision")
}
