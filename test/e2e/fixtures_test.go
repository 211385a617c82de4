package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// world is one Cluster API cluster as the guard sees it: a Cluster, its
// KubeadmControlPlane and one MachineDeployment, in a namespace of its own.
type world struct {
	ns      string
	spec    worldSpec
	cluster *clusterv1.Cluster
	kcp     *controlplanev1.KubeadmControlPlane
	md      *clusterv1.MachineDeployment
}

// worldSpec says which versions a new world starts at.
type worldSpec struct {
	cpVersion    string   // KubeadmControlPlane spec.version
	cpRunning    []string // KubeadmControlPlane status.versions (what its machines run)
	etcdTag      string   // explicit etcd imageTag, "" for kubeadm's default
	mdVersion    string   // MachineDeployment version
	topology     bool     // the Cluster carries spec.topology.version = cpVersion
	workerKubelt []string // kubelet versions of worker Machines
}

var nsCounter atomic.Int64

// newWorld creates a namespace and a cluster in it, with the guard watching.
func newWorld(t *testing.T, spec worldSpec) *world {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	ns := fmt.Sprintf("e2e-%d", nsCounter.Add(1))
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	w := &world{ns: ns, spec: spec}
	w.cluster = &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "c1-control-plane",
			},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevCluster", Name: "c1",
			},
		},
	}
	if spec.topology {
		w.cluster.Spec.Topology = clusterv1.Topology{
			ClassRef: clusterv1.ClusterClassRef{Name: "quick-start"},
			Version:  spec.cpVersion,
		}
	}
	require.NoError(t, c.Create(ctx, w.cluster))

	w.kcp = &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-control-plane", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To[int32](3),
			Version:  spec.cpVersion,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
				Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: "c1-control-plane",
					},
				},
			},
		},
	}
	w.kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = spec.etcdTag
	require.NoError(t, c.Create(ctx, w.kcp))
	if len(spec.cpRunning) > 0 {
		for _, v := range spec.cpRunning {
			w.kcp.Status.Versions = append(w.kcp.Status.Versions, clusterv1.StatusVersion{Version: v, Replicas: 1})
		}
		require.NoError(t, c.Status().Update(ctx, w.kcp))
	}

	w.md = w.addPool(t, "c1-md-0", spec.mdVersion)

	for i, v := range spec.workerKubelt {
		w.addMachine(t, fmt.Sprintf("c1-worker-%d", i), v, nil)
	}
	// The guard reads through its cache: wait until it has seen this world.
	waitForGuardCache(t, w)
	return w
}

// addPool creates MachineDeployment name of the world's cluster at version.
func (w *world) addPool(t *testing.T, name, version string) *clusterv1.MachineDeployment {
	t.Helper()
	pool := strings.TrimPrefix(name, "c1-")
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: "c1",
			Replicas:    ptr.To[int32](3),
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"pool": pool}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": pool}},
				Spec: clusterv1.MachineSpec{
					ClusterName: "c1",
					Version:     version,
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfigTemplate", Name: name,
					}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: name,
					},
				},
			},
		},
	}
	require.NoError(t, env.Client.Create(context.Background(), md))
	return md
}

// addPoolMachines creates n worker Machines of MachineDeployment md, named
// md-00, md-01, ... and labelled as its MachineSet labels them, whose nodes
// run version. It returns their names.
func (w *world) addPoolMachines(t *testing.T, md *clusterv1.MachineDeployment, n int, version string) []string {
	t.Helper()
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-%02d", md.Name, i)
		w.addMachine(t, name, version, map[string]string{clusterv1.MachineDeploymentNameLabel: md.Name, clusterv1.MachineSetNameLabel: md.Name + "-abcde"})
		names = append(names, name)
	}
	return names
}

// addMachine creates worker Machine name of the world's cluster with labels,
// whose node runs version.
func (w *world) addMachine(t *testing.T, name, version string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: "c1",
			Version:     version,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachine", Name: name,
			},
		},
	}
	require.NoError(t, env.Client.Create(ctx, m))
	m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: version}
	require.NoError(t, env.Client.Status().Update(ctx, m))
}

// refresh re-reads every object of the world.
func (w *world) refresh(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range []client.Object{w.cluster, w.kcp, w.md} {
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	}
}
