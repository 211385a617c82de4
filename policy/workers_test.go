package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// longPool is a MachinePool name too long for a label value: Cluster API
// labels its Machines with a hash of it.
var longPool = "pool-" + strings.Repeat("x", 70)

// workerMachine is a worker Machine of cluster c1 whose node runs version,
// with labels.
func workerMachine(name, version string, labels map[string]string) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels}}
	m.Spec.ClusterName = "c1"
	m.Spec.Version = version
	m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: version}
	return m
}

// machinesOfMD returns n Machines of MachineDeployment md, as its MachineSet
// labels them.
func machinesOfMD(md string, n int, version string) []client.Object {
	var out []client.Object
	for i := range n {
		out = append(out, workerMachine(fmt.Sprintf("%s-%02d", md, i), version, map[string]string{clusterv1.MachineDeploymentNameLabel: md, clusterv1.MachineSetNameLabel: md + "-abcde"}))
	}
	return out
}

func machinePool(name, version string) *clusterv1.MachinePool {
	mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	mp.Spec.ClusterName = "c1"
	mp.Spec.Template.Spec.Version = version
	return mp
}

func poolMD(name, version string) *clusterv1.MachineDeployment {
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	md.Spec.ClusterName = "c1"
	md.Spec.Template.Spec.Version = version
	return md
}

// TestRefusalsGroupWorkersByPool checks that a control-plane change is
// refused with one line per rule and per pool, the pool of a Machine read
// from the labels Cluster API puts on it, on the guard's path (a cache with
// the cluster-name index) and the CLI's (a live reader without it).
func TestRefusalsGroupWorkersByPool(t *testing.T) {
	const kcpObj = "KubeadmControlPlane cp: "
	newer := func(who, runs, versions, ref string) string {
		return kcpObj + who + " " + runs + " " + versions + ", newer than v1.34.2; a kubelet must not be newer than the API server [rule ControlPlaneLeavesWorkerNewer]; keep spec.version at v1.35.x or later while " + ref + " v1.35"
	}
	const downgrade = kcpObj + "Kubernetes downgrade from v1.35.2 to v1.34.2 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)"
	cases := []struct {
		name     string
		objects  []client.Object
		to       string
		want     []string
		warnings []string
	}{
		{
			name:    "two MachineDeployments of 25 Machines each",
			objects: append(append([]client.Object{poolMD("md-0", "v1.35.2"), poolMD("md-1", "v1.35.2")}, machinesOfMD("md-0", 25, "v1.35.2")...), machinesOfMD("md-1", 25, "v1.35.2")...),
			to:      "v1.34.2",
			want: []string{
				downgrade,
				newer("MachineDeployment md-0 and 25 of its Machines (md-0-00, md-0-01, md-0-02 and 22 more)", "run", "v1.35.2", "MachineDeployment md-0 runs"),
				newer("MachineDeployment md-1 and 25 of its Machines (md-1-00, md-1-01, md-1-02 and 22 more)", "run", "v1.35.2", "MachineDeployment md-1 runs"),
			},
		},
		{
			name: "MachinePools by name and by hashed name, and Machines of no pool",
			objects: []client.Object{
				machinePool("mp-0", "v1.35.2"), machinePool(longPool, "v1.35.1"),
				workerMachine("mp-0-a", "v1.35.2", map[string]string{clusterv1.MachinePoolNameLabel: "mp-0"}),
				workerMachine("long-a", "v1.35.1", map[string]string{clusterv1.MachinePoolNameLabel: "hash_YSBc6g_z"}),
				workerMachine("long-b", "v1.35.1", map[string]string{clusterv1.MachinePoolNameLabel: "hash_YSBc6g_z"}),
				workerMachine("stray", "v1.35.0", map[string]string{clusterv1.MachinePoolNameLabel: "hash_unknown_z"}),
				workerMachine("loose", "v1.35.2", nil),
			},
			to: "v1.34.2",
			want: []string{
				downgrade,
				newer("MachinePool mp-0 and its Machine mp-0-a", "run", "v1.35.2", "MachinePool mp-0 runs"),
				newer("MachinePool "+longPool+" and 2 of its Machines (long-a, long-b)", "run", "v1.35.1", "MachinePool "+longPool+" runs"),
				newer("2 Machines not in a MachineDeployment or MachinePool (loose, stray)", "run", "v1.35.0 to v1.35.2", "these Machines run"),
			},
		},
		{
			name: "Machines of a MachineDeployment the cluster no longer lists are still its",
			objects: []client.Object{
				workerMachine("gone-a", "v1.35.2", map[string]string{clusterv1.MachineDeploymentNameLabel: "gone"}),
				workerMachine("gone-b", "v1.35.2", map[string]string{clusterv1.MachineDeploymentNameLabel: "gone"}),
			},
			to:   "v1.34.2",
			want: []string{downgrade, newer("2 Machines of MachineDeployment gone (gone-a, gone-b)", "run", "v1.35.2", "MachineDeployment gone runs")},
		},
		{
			name: "control-plane Machines and other clusters' Machines are not workers",
			objects: append([]client.Object{
				cpWorkerOf("cp-0", "v1.35.2"),
				func() client.Object {
					m := workerMachine("other", "v1.35.2", map[string]string{clusterv1.MachineDeploymentNameLabel: "md-0"})
					m.Spec.ClusterName = "c2"
					return m
				}(),
				poolMD("md-0", "v1.35.2"),
			}, machinesOfMD("md-0", 1, "v1.35.2")...),
			to:   "v1.34.2",
			want: []string{downgrade, newer("MachineDeployment md-0 and its Machine md-0-00", "run", "v1.35.2", "MachineDeployment md-0 runs")},
		},
		{
			name:    "the safe neighbour with the same 50 Machines: a patch release",
			objects: append(append([]client.Object{poolMD("md-0", "v1.35.2"), poolMD("md-1", "v1.35.2")}, machinesOfMD("md-0", 25, "v1.35.2")...), machinesOfMD("md-1", 25, "v1.35.2")...),
			to:      "v1.35.3",
		},
	}
	for _, tc := range cases {
		for _, indexed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/indexed=%v", tc.name, indexed), func(t *testing.T) {
				p := workerWorld(t, indexed, tc.objects...)
				oldKCP, newKCP := clusterKCP("v1.35.2"), clusterKCP(tc.to)
				d, warnings, err := p.Decide(context.Background(), oldKCP, newKCP)
				require.NoError(t, err)
				assert.Empty(t, warnings)
				var got []string
				for _, v := range d.Violations {
					got = append(got, v.String())
				}
				assert.Equal(t, tc.want, got)
				assert.Equal(t, tc.warnings, d.Warnings)
				refusal := Refusal(controlplanev1.GroupVersion.WithKind("KubeadmControlPlane").GroupKind(), "cp", d, nil)
				if tc.want == nil {
					assert.NoError(t, refusal)
					return
				}
				require.Error(t, refusal)
				for _, line := range tc.want {
					assert.Contains(t, refusal.Error(), "spec.version: Forbidden: "+line, "every line keeps its field path")
				}
			})
		}
	}
}

// cpWorkerOf is a control-plane Machine of cluster c1.
func cpWorkerOf(name, version string) *clusterv1.Machine {
	return workerMachine(name, version, map[string]string{clusterv1.MachineControlPlaneLabel: "", clusterv1.ClusterNameLabel: "c1"})
}

// clusterKCP is KubeadmControlPlane cp of cluster c1 at version.
// clusterKCP is the control plane of cluster c1, initialized (its workers
// joined it).
func clusterKCP(version string) *controlplanev1.KubeadmControlPlane {
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec:       controlplanev1.KubeadmControlPlaneSpec{Version: version},
	}
	initialized := true
	kcp.Status.Initialization.ControlPlaneInitialized = &initialized
	return kcp
}

// workerWorld is a Policy over objs: with the guard's spec.clusterName index,
// or as the CLI reads, without it.
func workerWorld(t *testing.T, indexed bool, objs ...client.Object) Policy {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clusterv1.AddToScheme(s))
	require.NoError(t, controlplanev1.AddToScheme(s))
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...)
	if indexed {
		b = b.WithIndex(&clusterv1.MachineDeployment{}, ClusterNameField, func(o client.Object) []string { return []string{o.(*clusterv1.MachineDeployment).Spec.ClusterName} }).
			WithIndex(&clusterv1.MachinePool{}, ClusterNameField, func(o client.Object) []string { return []string{o.(*clusterv1.MachinePool).Spec.ClusterName} }).
			WithIndex(&clusterv1.Machine{}, ClusterNameField, func(o client.Object) []string { return []string{o.(*clusterv1.Machine).Spec.ClusterName} })
	}
	c := b.Build()
	return Policy{Reader: c, Mapper: c.RESTMapper(), Indexed: indexed}
}
