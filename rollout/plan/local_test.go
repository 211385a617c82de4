package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPatchedForTheLocalVerdict: the object a local verdict judges is the
// live one with the plan's patch applied, a JSON merge patch or a JSON
// patch, typed whether the live object was read typed or unstructured.
func TestPatchedForTheLocalVerdict(t *testing.T) {
	live := &clusterv1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "c1"},
		Spec:       clusterv1.ClusterSpec{Topology: clusterv1.Topology{Version: "v1.34.2", ClassRef: clusterv1.ClusterClassRef{Name: "quick-start"}}},
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		live client.Object
		pt   types.PatchType
		data string
	}{
		{"merge patch, typed", live, types.MergePatchType, `{"spec":{"topology":{"version":"v1.35.0"}}}`},
		{"JSON patch, typed", live, types.JSONPatchType, `[{"op":"replace","path":"/spec/topology/version","value":"v1.35.0"}]`},
		{"JSON patch, unstructured", &unstructured.Unstructured{Object: raw}, types.JSONPatchType, `[{"op":"replace","path":"/spec/topology/version","value":"v1.35.0"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := typed(tc.live)
			require.NoError(t, err)
			got, err := patched(obj, tc.pt, []byte(tc.data))
			require.NoError(t, err)
			cluster, ok := got.(*clusterv1.Cluster)
			require.True(t, ok, "typed: %T", got)
			assert.Equal(t, "v1.35.0", cluster.Spec.Topology.Version)
			assert.Equal(t, "quick-start", cluster.Spec.Topology.ClassRef.Name)
			assert.Equal(t, "c1", cluster.Name)
		})
	}
	_, err = patched(live, types.StrategicMergePatchType, []byte(`{}`))
	assert.EqualError(t, err, "a application/strategic-merge-patch+json patch cannot be judged locally")
}
