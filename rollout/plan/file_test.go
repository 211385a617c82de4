package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

const v1beta1Manifests = `apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata:
  name: md-0
  namespace: ns
spec:
  clusterName: c1
  replicas: 3
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 2
      maxUnavailable: 0
  selector:
    matchLabels:
      pool: a
  template:
    metadata:
      labels:
        pool: a
    spec:
      clusterName: c1
      version: v1.35.2
      bootstrap:
        configRef:
          apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
          kind: KubeadmConfigTemplate
          name: md-0
      infrastructureRef:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: DevMachineTemplate
        name: md-0-v2
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: unrelated
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta1
kind: KubeadmControlPlane
metadata:
  name: cp
  namespace: ns
spec:
  replicas: 3
  version: v1.35.2
  machineTemplate:
    infrastructureRef:
      apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
      kind: DevMachineTemplate
      name: cp
  kubeadmConfigSpec:
    clusterConfiguration:
      etcd:
        local:
          imageTag: 3.6.5-0
`

// TestReadManifests: -f reads every document of a file, lists included,
// as kubectl does; the kinds plan knows are recognised in any version.
func TestReadManifests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "edited.yaml")
	require.NoError(t, os.WriteFile(path, []byte(v1beta1Manifests), 0o600))
	o := &PlanOptions{Filenames: []string{path}}
	objs, err := o.readManifests()
	require.NoError(t, err)
	var kinds []string
	for _, u := range objs {
		k, ok := planKindOf(u.GroupVersionKind())
		if ok {
			kinds = append(kinds, k.GVK.Kind)
		} else {
			kinds = append(kinds, "skip "+u.GetKind())
		}
	}
	assert.Equal(t, []string{"MachineDeployment", "skip ConfigMap", "KubeadmControlPlane"}, kinds)

	_, err = (&PlanOptions{Filenames: []string{filepath.Join(t.TempDir(), "missing.yaml")}}).readManifests()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.yaml")
}

// TestTypedOf: a manifest, or the dry run's answer, in v1beta2 as the CLI
// works with it; a v1beta1 one through Cluster API's generated conversion.
func TestTypedOf(t *testing.T) {
	docs := splitDocs(t, v1beta1Manifests)
	md, err := typedOf(core.MachineDeployment, docs[0])
	require.NoError(t, err)
	got := md.(*clusterv1.MachineDeployment)
	assert.Equal(t, "v1.35.2", got.Spec.Template.Spec.Version)
	assert.Equal(t, clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: "md-0-v2"}, got.Spec.Template.Spec.InfrastructureRef)
	assert.Equal(t, "md-0", got.Spec.Template.Spec.Bootstrap.ConfigRef.Name)
	assert.Equal(t, intstr.FromInt32(2), *got.Spec.Rollout.Strategy.RollingUpdate.MaxSurge)

	kcp, err := typedOf(core.KubeadmControlPlane, docs[2])
	require.NoError(t, err)
	assert.Equal(t, "3.6.5-0", etcdImageTagOf(kcp.(*controlplanev1.KubeadmControlPlane)))
	assert.Equal(t, "cp", kcp.(*controlplanev1.KubeadmControlPlane).Spec.MachineTemplate.Spec.InfrastructureRef.Name)

	v2 := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
		"metadata": map[string]any{"name": "md-0"}, "spec": map[string]any{"template": map[string]any{"spec": map[string]any{"version": "v1.36.1"}}}}}
	md, err = typedOf(core.MachineDeployment, v2)
	require.NoError(t, err)
	assert.Equal(t, "v1.36.1", md.(*clusterv1.MachineDeployment).Spec.Template.Spec.Version)

	v2.SetAPIVersion("cluster.x-k8s.io/v1alpha4")
	_, err = typedOf(core.MachineDeployment, v2)
	assert.EqualError(t, err, "MachineDeployment md-0 is cluster.x-k8s.io/v1alpha4: rollout plan -f reads v1beta2 and v1beta1 manifests")
}

func splitDocs(t *testing.T, s string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(s, "---\n") {
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
		out = append(out, u)
	}
	return out
}
