package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/builder"
)

// The names of a world's objects.
const (
	// WorldClusterName is the world's Cluster.
	WorldClusterName = "c1"
	// WorldControlPlaneName is its KubeadmControlPlane, whose machines come
	// from the DevMachineTemplate of the same name.
	WorldControlPlaneName = "c1-control-plane"
	// WorldPoolName is its MachineDeployment, whose machines come from the
	// KubeadmConfigTemplate and DevMachineTemplate of the same name.
	WorldPoolName = "c1-md-0"
	// worldClass is the ClusterClass a world's topology names (it does not
	// exist: the environment runs no topology controller).
	worldClass = "quick-start"
)

// WorldSpec says how a new world starts.
type WorldSpec struct {
	// Version is the KubeadmControlPlane's spec.version, and the topology's
	// with Topology.
	Version string
	// Running is the KubeadmControlPlane's status.versions: the version of
	// each of its machines (none: nothing reported yet).
	Running []string
	// EtcdTag is the control plane's etcd image tag, "" for kubeadm's default.
	EtcdTag string
	// WorkerVersion is the MachineDeployment's version.
	WorkerVersion string
	// Topology gives the Cluster a topology (of ClusterClass quick-start) at Version.
	Topology bool
	// Kubelets are the versions of the worker Machines of no pool the world
	// has, c1-worker-0, c1-worker-1…, each node reported running its version.
	Kubelets []string
	// Labelled labels the objects as Cluster API's controllers do, which is
	// how the rollout CLI finds a Cluster's objects: the MachineDeployment
	// with its Cluster and its pool; with Topology, the control plane and the
	// MachineDeployment as owned by the topology, whose MachineDeployment
	// topologies name the pool (md-0) and another (md-other).
	Labelled bool
	// Templates creates the templates the world's objects may switch
	// between: DevMachineTemplates c1-control-plane, c1-control-plane-1,
	// c1-md-0 and c1-md-1, KubeadmConfigTemplates c1-md-0 and c1-md-1.
	Templates bool
}

// World is one Cluster API cluster as the guard sees it, in a namespace of
// its own: Cluster c1, KubeadmControlPlane c1-control-plane and
// MachineDeployment c1-md-0 (see WorldSpec), as this environment's admin
// created them.
type World struct {
	Namespace string
	Spec      WorldSpec
	Cluster   *clusterv1.Cluster
	KCP       *controlplanev1.KubeadmControlPlane
	MD        *clusterv1.MachineDeployment
	env       *Environment
}

// NewWorld creates namespace and a world in it as spec says, and waits
// until the guard judges it with every object in its cache (see
// WaitGuardSees).
func (e *Environment) NewWorld(t testing.TB, namespace string, spec WorldSpec) *World {
	t.Helper()
	ctx := context.Background()
	w := e.WorldIn(namespace)
	w.Spec = spec
	require.NoError(t, e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))
	if spec.Templates {
		for _, name := range []string{WorldControlPlaneName, WorldControlPlaneName + "-1", WorldPoolName, "c1-md-1"} {
			require.NoError(t, e.Client.Create(ctx, builder.DevMachineTemplate(namespace, name).Unstructured()))
		}
		for _, name := range []string{WorldPoolName, "c1-md-1"} {
			require.NoError(t, e.Client.Create(ctx, builder.KubeadmConfigTemplate(namespace, name).Build()))
		}
	}

	w.Cluster, w.KCP, w.MD = spec.objects(namespace)
	require.NoError(t, e.Client.Create(ctx, w.Cluster))
	require.NoError(t, e.Client.Create(ctx, w.KCP))
	if len(spec.Running) > 0 {
		for _, v := range spec.Running {
			w.KCP.Status.Versions = append(w.KCP.Status.Versions, clusterv1.StatusVersion{Version: v, Replicas: 1})
		}
		require.NoError(t, e.Client.Status().Update(ctx, w.KCP))
	}
	require.NoError(t, e.Client.Create(ctx, w.MD))
	var machines []string
	for i, v := range spec.Kubelets {
		name := fmt.Sprintf("c1-worker-%d", i)
		w.AddMachine(t, name, v, nil)
		machines = append(machines, name)
	}
	// The guard reads through its cache: wait until it has seen this world
	// (in an environment that never started the guard, nothing can see it).
	e.guardMu.Lock()
	started := e.guardKubeconfig != ""
	e.guardMu.Unlock()
	if started {
		require.NoError(t, e.WaitGuardSees(ctx, w.MD, w.KCP, machines...))
	}
	return w
}

// objects returns the world's Cluster, control plane and pool in namespace,
// as spec says.
func (spec WorldSpec) objects(namespace string) (*clusterv1.Cluster, *controlplanev1.KubeadmControlPlane, *clusterv1.MachineDeployment) {
	cluster := builder.Cluster(namespace, WorldClusterName).WithControlPlane(WorldControlPlaneName).WithInfrastructure(WorldClusterName)
	kcp := builder.KubeadmControlPlane(namespace, WorldControlPlaneName).WithClusterName(WorldClusterName).
		WithReplicas(3).WithVersion(spec.Version).WithInfrastructureTemplate(WorldControlPlaneName).WithEtcdImageTag(spec.EtcdTag)
	pool := worldPool(namespace, WorldPoolName, spec.WorkerVersion)
	if spec.Topology {
		cluster.WithTopology(worldClass, spec.Version)
	}
	if spec.Labelled {
		pool.WithLabels(map[string]string{clusterv1.ClusterNameLabel: WorldClusterName, "pool": "md-0"})
	}
	if spec.Labelled && spec.Topology {
		owned := map[string]string{clusterv1.ClusterTopologyOwnedLabel: ""}
		kcp.WithLabels(owned)
		pool.WithLabels(owned).WithLabels(map[string]string{clusterv1.ClusterTopologyMachineDeploymentNameLabel: "md-0"})
		cluster.WithTopologyMachineDeployments(
			clusterv1.MachineDeploymentTopology{Class: "default-worker", Name: "md-other"},
			clusterv1.MachineDeploymentTopology{Class: "default-worker", Name: "md-0", Rollout: clusterv1.MachineDeploymentTopologyRolloutSpec{
				Strategy: clusterv1.MachineDeploymentTopologyRolloutStrategy{Type: clusterv1.RollingUpdateMachineDeploymentStrategyType},
			}},
		)
	}
	return cluster.Build(), kcp.Build(), pool.Build()
}

// WorldIn returns the world of namespace without creating anything in it:
// for a test that makes its own control plane there, then adds pools.
func (e *Environment) WorldIn(namespace string) *World {
	return &World{Namespace: namespace, env: e}
}

// Pool returns the builder of MachineDeployment name of the world's
// Cluster at version: 3 machines, from the KubeadmConfigTemplate and
// DevMachineTemplate of its name, selected by label pool (its name without
// the Cluster's).
func (w *World) Pool(name, version string) *builder.MachineDeploymentBuilder {
	return worldPool(w.Namespace, name, version)
}

func worldPool(namespace, name, version string) *builder.MachineDeploymentBuilder {
	return builder.MachineDeployment(namespace, name).WithClusterName(WorldClusterName).WithReplicas(3).
		WithSelector(map[string]string{"pool": strings.TrimPrefix(name, WorldClusterName+"-")}).
		WithVersion(version).WithBootstrapTemplate(name).WithInfrastructureTemplate(name)
}

// AddPool creates MachineDeployment name of the world's Cluster at version
// (see Pool).
func (w *World) AddPool(t testing.TB, name, version string) *clusterv1.MachineDeployment {
	t.Helper()
	md := w.Pool(name, version).Build()
	require.NoError(t, w.env.Client.Create(context.Background(), md))
	return md
}

// AddPoolMachines creates n worker Machines of MachineDeployment md, named
// md-00, md-01… and labelled as its MachineSet labels them, whose nodes run
// version. It returns their names.
func (w *World) AddPoolMachines(t testing.TB, md *clusterv1.MachineDeployment, n int, version string) []string {
	t.Helper()
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-%02d", md.Name, i)
		w.AddMachine(t, name, version, map[string]string{clusterv1.MachineDeploymentNameLabel: md.Name, clusterv1.MachineSetNameLabel: md.Name + "-abcde"})
		names = append(names, name)
	}
	return names
}

// AddMachine creates worker Machine name of the world's Cluster with
// labels, whose node runs version.
func (w *World) AddMachine(t testing.TB, name, version string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	m := builder.Machine(w.Namespace, name).WithLabels(labels).WithClusterName(WorldClusterName).WithVersion(version).
		WithBootstrapDataSecret("bootstrap").WithInfrastructureRef("DevMachine", name).WithNodeVersion(version).Build()
	status := m.Status
	require.NoError(t, w.env.Client.Create(ctx, m))
	m.Status = status
	require.NoError(t, w.env.Client.Status().Update(ctx, m))
}

// MachinePool returns the builder of MachinePool name of the world's
// Cluster at version: 2 instances of DevMachinePool name. The environment
// runs no infrastructure provider: the pool never gets instances or Machines.
func (w *World) MachinePool(name, version string) *builder.MachinePoolBuilder {
	return builder.MachinePool(w.Namespace, name).WithClusterName(WorldClusterName).WithReplicas(2).
		WithVersion(version).WithInfrastructureRef("DevMachinePool", name)
}

// Refresh re-reads every object of the world.
func (w *World) Refresh(t testing.TB) {
	t.Helper()
	for _, obj := range []client.Object{w.Cluster, w.KCP, w.MD} {
		require.NoError(t, w.env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}
}
