package sandbox

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
)

func TestClusterObjects(t *testing.T) {
	spec := ClusterSpec{
		Name: "demo", Namespace: "default", ControlPlaneMachines: 3, WorkerMachines: 2,
		KubernetesVersion: "v1.35.2", MachineStartup: 2 * time.Second, Port: 20001,
	}
	byName := map[string]int{}
	var (
		md         *clusterv1.MachineDeployment
		kcp        *controlplanev1.KubeadmControlPlane
		devCluster *infrav1.DevCluster
		templates  []*infrav1.DevMachineTemplate
	)
	for i, obj := range ClusterObjects(spec) {
		assert.Equal(t, "default", obj.GetNamespace())
		assert.Equal(t, "demo", obj.GetLabels()[clusterv1.ClusterNameLabel], "%T %s", obj, obj.GetName())
		byName[obj.GetName()] = i
		switch o := obj.(type) {
		case *clusterv1.MachineDeployment:
			md = o
		case *controlplanev1.KubeadmControlPlane:
			kcp = o
		case *infrav1.DevCluster:
			devCluster = o
		case *infrav1.DevMachineTemplate:
			templates = append(templates, o)
		}
	}
	require.NotNil(t, md)
	require.NotNil(t, kcp)
	require.NotNil(t, devCluster)

	// The MachineDeployment is created last, after the control plane it is judged against.
	assert.Greater(t, byName["demo-md-0"], byName["demo-control-plane"])
	assert.True(t, labels.SelectorFromSet(md.Spec.Selector.MatchLabels).Matches(labels.Set(md.Spec.Template.Labels)),
		"the selector must match the machines' labels")
	assert.Equal(t, int32(2), *md.Spec.Replicas)
	assert.Equal(t, int32(3), *kcp.Spec.Replicas)
	assert.Equal(t, "v1.35.2", md.Spec.Template.Spec.Version)
	assert.Equal(t, "v1.35.2", kcp.Spec.Version)

	assert.NotEmpty(t, devCluster.Annotations, "the in-memory backend writes to the annotations map")
	assert.Equal(t, int32(20001), devCluster.Spec.ControlPlaneEndpoint.Port)

	var names []string
	for _, tmpl := range templates {
		names = append(names, tmpl.Name)
		inMemory := tmpl.Spec.Template.Spec.Backend.InMemory
		require.NotNil(t, inMemory)
		for _, d := range []time.Duration{
			inMemory.VM.Provisioning.StartupDuration.Duration, inMemory.Node.Provisioning.StartupDuration.Duration,
			inMemory.APIServer.Provisioning.StartupDuration.Duration, inMemory.Etcd.Provisioning.StartupDuration.Duration,
		} {
			assert.Equal(t, 2*time.Second, d)
		}
	}
	assert.ElementsMatch(t, []string{"demo-control-plane", spec.SpareControlPlaneTemplate(), "demo-md-0", spec.SpareWorkerTemplate()}, names)
	assert.Equal(t, "demo-md-0-v2", spec.SpareWorkerTemplate())
}

func TestClusterStateReady(t *testing.T) {
	complete := func(name string, n int32) RolloutState {
		return RolloutState{Name: name, Desired: n, Replicas: n, Ready: n, Available: n, UpToDate: n, Observed: true}
	}
	state := ClusterState{
		Name: "demo", ControlPlane: complete("demo-control-plane", 3),
		Workers:  []RolloutState{complete("demo-md-0", 3)},
		Machines: 6, ReadyMachines: 6,
	}
	assert.True(t, state.Ready())
	assert.Equal(t, "control plane 3/3 ready, 3/3 up to date; demo-md-0 3/3 ready, 3/3 up to date; machines 6/6 ready", state.Summary())

	surplus := state
	surplus.Machines = 7 // an old machine not deleted yet
	assert.False(t, surplus.Ready())

	rolling := state
	rolling.Workers = []RolloutState{complete("demo-md-0", 3)}
	rolling.Workers[0].Observed = false
	assert.False(t, rolling.Ready(), "a new generation not observed yet is not ready")

	surging := state
	surging.ControlPlane.Replicas = 4
	assert.False(t, surging.Ready())
	assert.Contains(t, surging.Summary(), "(4 machines)")
}

func TestFreeWorkloadPort(t *testing.T) {
	a, err := freeWorkloadPort()
	require.NoError(t, err)
	b, err := freeWorkloadPort()
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	for _, p := range []int32{a, b} {
		assert.GreaterOrEqual(t, p, int32(portRangeMin))
		assert.Less(t, p, int32(portRangeMax))
	}
}

func TestClassObjects(t *testing.T) {
	spec := DefaultClass("default")
	spec.MachineStartup = 2 * time.Second
	var (
		class     *clusterv1.ClusterClass
		templates []string
	)
	for _, obj := range ClassObjects(spec) {
		assert.Equal(t, "default", obj.GetNamespace())
		if c, ok := obj.(*clusterv1.ClusterClass); ok {
			class = c
			continue
		}
		require.Nil(t, class, "the class comes after its templates")
		templates = append(templates, fmt.Sprintf("%T %s", obj, obj.GetName()))
	}
	require.NotNil(t, class)
	assert.ElementsMatch(t, []string{
		"*v1beta2.DevClusterTemplate demo-class-cluster",
		"*v1beta2.KubeadmControlPlaneTemplate demo-class-control-plane",
		"*v1beta2.DevMachineTemplate demo-class-control-plane",
		"*v1beta2.KubeadmConfigTemplate demo-class-default-worker",
		"*v1beta2.DevMachineTemplate demo-class-default-worker",
	}, templates)
	assert.Equal(t, ClassKubernetesVersions, class.Spec.KubernetesVersions)
	assert.Equal(t, "{{ .cluster.name }}-control-plane", class.Spec.ControlPlane.Naming.Template)
	require.Len(t, class.Spec.Workers.MachineDeployments, 1)
	assert.Equal(t, "default-worker", class.Spec.Workers.MachineDeployments[0].Class)
	assert.Equal(t, "{{ .cluster.name }}-{{ .machineDeployment.topologyName }}", class.Spec.Workers.MachineDeployments[0].Naming.Template)
	require.Len(t, class.Spec.Patches, 2)
	assert.Equal(t, "host: 127.0.0.1\nport: {{ .controlPlanePort }}", class.Spec.Patches[0].Definitions[0].JSONPatches[0].ValueFrom.Template)

	// The worker image: optional with a default, written into the worker
	// DevMachineTemplate only (a spec change of it rolls the workers).
	require.Len(t, class.Spec.Variables, 2)
	image := class.Spec.Variables[1]
	assert.Equal(t, "workerImage", image.Name)
	assert.False(t, *image.Required)
	assert.JSONEq(t, `"sandbox-worker:v1"`, string(image.Schema.OpenAPIV3Schema.Default.Raw))
	workerPatch := class.Spec.Patches[1].Definitions[0]
	assert.Equal(t, "DevMachineTemplate", workerPatch.Selector.Kind)
	assert.Nil(t, workerPatch.Selector.MatchResources.ControlPlane, "the control plane's machines keep their template")
	assert.Equal(t, []string{"default-worker"}, workerPatch.Selector.MatchResources.MachineDeploymentClass.Names)
	assert.Equal(t, "/spec/template/metadata", workerPatch.JSONPatches[0].Path)
	assert.Equal(t, "annotations:\n  sandbox.rollout-guard.io/worker-image: {{ .workerImage | quote }}", workerPatch.JSONPatches[0].ValueFrom.Template)

	plain := ClassObjects(PlainClass("default"))
	plainClass, ok := plain[len(plain)-1].(*clusterv1.ClusterClass)
	require.True(t, ok)
	assert.Equal(t, "demo-class-plain", plainClass.Name)
	assert.Empty(t, plainClass.Spec.KubernetesVersions)

	spec.KubernetesVersions[0] = "v0.0.0"
	assert.Equal(t, "v1.32.4", ClassKubernetesVersions[0], "a spec does not share the package's list")
}

func TestClassClusterObjects(t *testing.T) {
	spec := ClassClusterSpec{Namespace: "default", Port: 20002}.withDefaults()
	assert.Equal(t, "demo-cc", spec.Name)
	assert.Equal(t, "demo-class", spec.Class.Name)
	assert.Equal(t, "demo-cc-control-plane", spec.ControlPlaneName())
	assert.Equal(t, "demo-cc-md-0", spec.MachineDeploymentName())
	objs, err := ClassClusterObjects(spec)
	require.NoError(t, err)
	require.Len(t, objs, 1)
	cluster, ok := objs[0].(*clusterv1.Cluster)
	require.True(t, ok)
	topology := cluster.Spec.Topology
	assert.Equal(t, "demo-class", topology.ClassRef.Name)
	assert.Equal(t, "v1.33.5", topology.Version)
	assert.Equal(t, int32(1), *topology.ControlPlane.Replicas)
	require.Len(t, topology.Workers.MachineDeployments, 1)
	assert.Equal(t, "md-0", topology.Workers.MachineDeployments[0].Name)
	assert.Equal(t, int32(1), *topology.Workers.MachineDeployments[0].Replicas)
	require.Len(t, topology.Variables, 1)
	assert.Equal(t, "controlPlanePort", topology.Variables[0].Name)
	assert.JSONEq(t, "20002", string(topology.Variables[0].Value.Raw))
}

func TestClassClusterNames(t *testing.T) {
	var names []string
	for i := range 3 {
		names = append(names, ClassClusterName(i))
	}
	assert.Equal(t, []string{"demo-cc", "demo-cc-2", "demo-cc-3"}, names)

	// ClassCluster is the one class cluster of the suites written before the fleet.
	assert.Equal(t, 1, Options{ClassCluster: true}.withDefaults().ClassClusters)
	assert.Equal(t, 3, Options{ClassCluster: true, ClassClusters: 3}.withDefaults().ClassClusters)
	assert.Equal(t, 0, Options{}.withDefaults().ClassClusters)
}

func TestClusterStateReadyWithTopology(t *testing.T) {
	complete := func(name, version string) RolloutState {
		return RolloutState{Name: name, Version: version, Desired: 1, Replicas: 1, Ready: 1, Available: 1, UpToDate: 1, Observed: true}
	}
	state := ClusterState{
		Name: "demo-cc", ControlPlane: complete("demo-cc-control-plane", "v1.35.2"),
		Workers:  []RolloutState{complete("demo-cc-md-0", "v1.35.2")},
		Machines: 2, ReadyMachines: 2,
		Topology: &TopologyState{Class: "demo-class", Version: "v1.35.2", MachineDeployments: 1, Reconciled: true},
	}
	assert.True(t, state.Ready())

	midChain := state
	midChain.Topology = &TopologyState{Class: "demo-class", Version: "v1.36.1", MachineDeployments: 1, Reconciled: false}
	assert.False(t, midChain.Ready(), "an intermediate step of a chained upgrade is not the topology's version")
	assert.Contains(t, midChain.Summary(), "topology v1.36.1 not reconciled yet")

	noWorkersYet := state
	noWorkersYet.Workers = nil
	noWorkersYet.Machines, noWorkersYet.ReadyMachines = 1, 1
	assert.False(t, noWorkersYet.Ready(), "a MachineDeployment topology without its MachineDeployment is not ready")
}
