package builder_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/test/builder"
)

// TestBuildersSetOnlyWhatTheyAreAskedTo: a builder's object holds what its
// With… methods set and nothing else, and each Build is a copy of its own.
func TestBuildersSetOnlyWhatTheyAreAskedTo(t *testing.T) {
	selector := map[string]string{"pool": "md-0"}
	b := builder.MachineDeployment("ns", "c1-md-0").WithClusterName("c1").WithReplicas(3).
		WithSelector(selector).WithTemplateLabels(map[string]string{"extra": "x"}).
		WithVersion("v1.35.2").WithBootstrapTemplate("kct").WithInfrastructureTemplate("dmt")
	md := b.Build()

	assert.Equal(t, "ns", md.Namespace)
	assert.Equal(t, "c1-md-0", md.Name)
	assert.Empty(t, md.Labels)
	assert.Equal(t, "c1", md.Spec.ClusterName)
	assert.Equal(t, "c1", md.Spec.Template.Spec.ClusterName)
	assert.Equal(t, int32(3), *md.Spec.Replicas)
	assert.Equal(t, map[string]string{"pool": "md-0"}, md.Spec.Selector.MatchLabels)
	assert.Equal(t, map[string]string{"pool": "md-0", "extra": "x"}, md.Spec.Template.Labels, "template labels add to the selector's")
	assert.Equal(t, map[string]string{"pool": "md-0"}, selector, "the caller's map is copied, not changed")
	assert.Equal(t, clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfigTemplate", Name: "kct"},
		md.Spec.Template.Spec.Bootstrap.ConfigRef)
	assert.Equal(t, clusterv1.ContractVersionedObjectReference{APIGroup: builder.InfrastructureGroup, Kind: builder.DevMachineTemplateKind, Name: "dmt"},
		md.Spec.Template.Spec.InfrastructureRef)
	assert.Nil(t, md.Spec.Template.Spec.Bootstrap.DataSecretName)
	assert.Empty(t, md.Spec.Rollout.Strategy.Type, "no strategy unless asked: Cluster API's defaulting sets one")

	md.Spec.Template.Spec.Version = "changed"
	assert.Equal(t, "v1.35.2", b.Build().Spec.Template.Spec.Version, "Build returns a copy")

	like := builder.MachineDeployment("ns", "c1-md-1").WithSpecOf(md).WithReplicas(0).Build()
	assert.Equal(t, int32(0), *like.Spec.Replicas)
	assert.Equal(t, int32(3), *md.Spec.Replicas, "WithSpecOf copies the spec")
	assert.Equal(t, md.Spec.Template.Spec.Bootstrap, like.Spec.Template.Spec.Bootstrap)
}

// TestKubeadmControlPlaneBuilder: the cluster name is a label, the etcd
// tag and status versions land where the guard reads them.
func TestKubeadmControlPlaneBuilder(t *testing.T) {
	kcp := builder.KubeadmControlPlane("ns", "cp").WithClusterName("c1").WithLabels(map[string]string{"team": "a"}).
		WithVersion("v1.34.2").WithEtcdImageTag("3.6.5-0").WithStatusVersion("v1.34.2", 3).Build()
	assert.Equal(t, map[string]string{clusterv1.ClusterNameLabel: "c1", "team": "a"}, kcp.Labels)
	assert.Equal(t, "3.6.5-0", kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag)
	assert.Equal(t, []clusterv1.StatusVersion{{Version: "v1.34.2", Replicas: 3}}, kcp.Status.Versions)
	assert.Nil(t, kcp.Spec.Replicas)
}

// TestUnstructuredDevObjects: the development provider's objects for a
// client without their types carry their kind and no status.
func TestUnstructuredDevObjects(t *testing.T) {
	for _, u := range []*unstructured.Unstructured{
		builder.DevMachineTemplate("ns", "t").Unstructured(),
		builder.DevMachinePool("ns", "p").Unstructured(),
	} {
		assert.Equal(t, "infrastructure.cluster.x-k8s.io/v1beta2", u.GetAPIVersion())
		assert.Equal(t, "ns", u.GetNamespace())
		_, hasStatus := u.Object["status"]
		assert.False(t, hasStatus, u.GetKind())
		_, hasCreated, err := unstructured.NestedFieldNoCopy(u.Object, "metadata", "creationTimestamp")
		require.NoError(t, err)
		assert.False(t, hasCreated, u.GetKind())
	}
	docker, found, err := unstructured.NestedMap(builder.DevMachineTemplate("ns", "t").Unstructured().Object, "spec", "template", "spec", "backend", "docker")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Empty(t, docker)
}
