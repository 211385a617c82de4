package revisions_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
)

func newClass() *clusterv1.ClusterClass {
	return &clusterv1.ClusterClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo-class"},
		Spec: clusterv1.ClusterClassSpec{
			Infrastructure: clusterv1.InfrastructureClass{TemplateRef: clusterv1.ClusterClassTemplateReference{
				APIVersion: "infrastructure.cluster.x-k8s.io/v1beta2", Kind: "DevClusterTemplate", Name: "demo-cluster"}},
			ControlPlane: clusterv1.ControlPlaneClass{TemplateRef: clusterv1.ClusterClassTemplateReference{
				APIVersion: "controlplane.cluster.x-k8s.io/v1beta2", Kind: "KubeadmControlPlaneTemplate", Name: "demo-cp"}},
			Workers: clusterv1.WorkersClass{MachineDeployments: []clusterv1.MachineDeploymentClass{{
				Class: "default-worker",
				Bootstrap: clusterv1.MachineDeploymentClassBootstrapTemplate{TemplateRef: clusterv1.ClusterClassTemplateReference{
					APIVersion: "bootstrap.cluster.x-k8s.io/v1beta2", Kind: "KubeadmConfigTemplate", Name: "demo-md"}},
				Infrastructure: clusterv1.MachineDeploymentClassInfrastructureTemplate{TemplateRef: clusterv1.ClusterClassTemplateReference{
					APIVersion: "infrastructure.cluster.x-k8s.io/v1beta2", Kind: "DevMachineTemplate", Name: "demo-md"}},
			}}},
			KubernetesVersions: []string{"v1.34.2", "v1.35.2"},
		},
	}
}

func newTopologyCluster() *clusterv1.Cluster {
	return &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo-cc"},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "demo-cc-cp"},
			Topology: clusterv1.Topology{
				ClassRef:     clusterv1.ClusterClassRef{Name: "demo-class"},
				Version:      "v1.35.2",
				ControlPlane: clusterv1.ControlPlaneTopology{Replicas: new(int32(3))},
				Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{
					{Class: "default-worker", Name: "md-0", Replicas: new(int32(3))},
				}},
				Variables: []clusterv1.ClusterVariable{{Name: "workerImage", Value: apiextensionsv1.JSON{Raw: []byte(`"kindest/node:v1"`)}}},
			},
		},
	}
}

func classSnap(t *testing.T, cc *clusterv1.ClusterClass) revisions.Snapshot {
	t.Helper()
	s, err := revisions.ForClusterClass(cc)
	require.NoError(t, err)
	return s
}

func topologySnap(t *testing.T, c *clusterv1.Cluster) revisions.Snapshot {
	t.Helper()
	s, err := revisions.ForClusterTopology(c)
	require.NoError(t, err)
	return s
}

// The hashes name RolloutRevisions: a change of the canonical form orphans
// every recorded history of the two kinds.
func TestGoldenHashOfClassesAndTopologies(t *testing.T) {
	cc := classSnap(t, newClass())
	assert.Equal(t, revisions.KindClusterClass, cc.Kind)
	assert.Equal(t, `{"controlPlane":{"templateRef":{"apiVersion":"controlplane.cluster.x-k8s.io/v1beta2","kind":"KubeadmControlPlaneTemplate","name":"demo-cp"}},`+
		`"infrastructure":{"templateRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"DevClusterTemplate","name":"demo-cluster"}},`+
		`"kubernetesVersions":["v1.34.2","v1.35.2"],`+
		`"workers":{"machineDeployments":[{"bootstrap":{"templateRef":{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta2","kind":"KubeadmConfigTemplate","name":"demo-md"}},"class":"default-worker",`+
		`"infrastructure":{"templateRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"DevMachineTemplate","name":"demo-md"}}}]}}`, string(cc.Data))
	assert.Equal(t, "3f6fa962df", revisions.ShortHash(cc.Hash))

	top := topologySnap(t, newTopologyCluster())
	assert.Equal(t, revisions.KindCluster, top.Kind)
	assert.Equal(t, `{"classRef":{"name":"demo-class"},"controlPlane":{"replicas":3},"variables":[{"name":"workerImage","value":"kindest/node:v1"}],`+
		`"version":"v1.35.2","workers":{"machineDeployments":[{"class":"default-worker","name":"md-0","replicas":3}]}}`, string(top.Data))
	assert.Equal(t, "0bd98a4054", revisions.ShortHash(top.Hash))
}

// A Cluster's revision is its topology only: what Cluster API's controllers
// write of it (refs, paused, status, labels, annotations) leaves the hash
// as it is; a class or a topology of the same JSON in another form too.
func TestTopologyContentIsTheTopologyOnly(t *testing.T) {
	base := topologySnap(t, newTopologyCluster())

	c := newTopologyCluster()
	c.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevCluster", Name: "demo-cc-x"}
	c.Spec.ControlPlaneRef.Name = "demo-cc-other"
	c.Spec.Paused = new(true)
	c.Labels = map[string]string{"topology.cluster.x-k8s.io/owned": ""}
	c.Annotations = map[string]string{"rollout-guard.io/revision": "7"}
	c.Status.Phase = "Provisioned"
	c.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{Replicas: new(int32(3))}
	assert.Equal(t, base.Hash, topologySnap(t, c).Hash)

	for name, edit := range map[string]func(*clusterv1.Cluster){
		"version":  func(c *clusterv1.Cluster) { c.Spec.Topology.Version = "v1.36.1" },
		"class":    func(c *clusterv1.Cluster) { c.Spec.Topology.ClassRef.Name = "other-class" },
		"variable": func(c *clusterv1.Cluster) { c.Spec.Topology.Variables[0].Value.Raw = []byte(`"kindest/node:v2"`) },
		"pool": func(c *clusterv1.Cluster) {
			c.Spec.Topology.Workers.MachineDeployments = append(c.Spec.Topology.Workers.MachineDeployments, clusterv1.MachineDeploymentTopology{Class: "default-worker", Name: "md-1"})
		},
	} {
		c := newTopologyCluster()
		edit(c)
		assert.NotEqual(t, base.Hash, topologySnap(t, c).Hash, name)
	}

	var viaJSON clusterv1.ClusterClass
	raw, err := json.Marshal(newClass())
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &viaJSON))
	assert.Equal(t, classSnap(t, newClass()).Hash, classSnap(t, &viaJSON).Hash)

	none := topologySnap(t, &clusterv1.Cluster{})
	assert.Equal(t, "{}", string(none.Data))
}

// What the history says of a topology edit: the generated change-cause
// names the fields, replicas and metadata alone are in place, the rest
// may roll machines; a class's metadata is in place, its templates not.
func TestChangesOfTopologiesAndClasses(t *testing.T) {
	base := topologySnap(t, newTopologyCluster())
	c := newTopologyCluster()
	c.Spec.Topology.Variables[0].Value.Raw = []byte(`"kindest/node:v2"`)
	c.Spec.Topology.Version = "v1.36.1"
	changed := topologySnap(t, c)
	cause, err := revisions.ChangeCause(base, changed)
	require.NoError(t, err)
	assert.Equal(t, "version v1.35.2 → v1.36.1; variables[workerImage].value kindest/node:v1 → kindest/node:v2", cause)
	inPlace, err := revisions.IsInPlace(base, changed)
	require.NoError(t, err)
	assert.False(t, inPlace)

	// A variable added whole: its name is in the path, not a change of
	// its own.
	c = newTopologyCluster()
	c.Spec.Topology.Variables = append(c.Spec.Topology.Variables, clusterv1.ClusterVariable{Name: "region", Value: apiextensionsv1.JSON{Raw: []byte(`"eu"`)}})
	cause, err = revisions.ChangeCause(base, topologySnap(t, c))
	require.NoError(t, err)
	assert.Equal(t, "variables[region].value (none) → eu", cause)

	c = newTopologyCluster()
	c.Spec.Topology.Workers.MachineDeployments[0].Replicas = new(int32(5))
	c.Spec.Topology.ControlPlane.Metadata.Labels = map[string]string{"team": "a"}
	inPlace, err = revisions.IsInPlace(base, topologySnap(t, c))
	require.NoError(t, err)
	assert.True(t, inPlace, "replicas and metadata are carried out in place")

	cc := newClass()
	cc.Spec.Workers.MachineDeployments[0].Infrastructure.TemplateRef.Name = "demo-md-v2"
	cause, err = revisions.ChangeCause(classSnap(t, newClass()), classSnap(t, cc))
	require.NoError(t, err)
	assert.Equal(t, "workers.machineDeployments[default-worker].infrastructure.templateRef.name demo-md → demo-md-v2", cause)
	inPlace, err = revisions.IsInPlace(classSnap(t, newClass()), classSnap(t, cc))
	require.NoError(t, err)
	assert.False(t, inPlace)

	cc = newClass()
	cc.Spec.ControlPlane.Metadata.Labels = map[string]string{"team": "a"}
	inPlace, err = revisions.IsInPlace(classSnap(t, newClass()), classSnap(t, cc))
	require.NoError(t, err)
	assert.True(t, inPlace)

	sum, err := base.Summary()
	require.NoError(t, err)
	assert.Equal(t, revisions.Summary{Version: "v1.35.2", Class: "demo-class"}, sum)
	sum, err = classSnap(t, newClass()).Summary()
	require.NoError(t, err)
	assert.Equal(t, revisions.Summary{Version: "v1.35.2", Infrastructure: "DevClusterTemplate/demo-cluster"}, sum)
}

// A rollback of a topology patches spec.topology, of a class its spec,
// with the live resourceVersion as precondition.
func TestRollbackPatchOfTopologiesAndClasses(t *testing.T) {
	target := topologySnap(t, newTopologyCluster())
	live := newTopologyCluster()
	live.ResourceVersion = "42"
	live.Spec.Topology.Version = "v1.36.1"
	patch, err := revisions.RollbackPatch(live, target)
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"42"},"spec":{"topology":{"version":"v1.35.2"}}}`, string(patch))

	targetClass := classSnap(t, newClass())
	liveClass := newClass()
	liveClass.ResourceVersion = "7"
	liveClass.Spec.KubernetesVersions = append(liveClass.Spec.KubernetesVersions, "v1.36.1")
	patch, err = revisions.RollbackPatch(liveClass, targetClass)
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"7"},"spec":{"kubernetesVersions":["v1.34.2","v1.35.2"]}}`, string(patch))

	_, err = revisions.RollbackPatch(liveClass, target)
	assert.ErrorContains(t, err, "the target is a Cluster revision")
}
