package sandbox

import (
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
