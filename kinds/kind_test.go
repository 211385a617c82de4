package kinds

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestHistoryOf: every kind with a history is found from its object; an
// unstructured object is a control plane read through the contract; a
// Cluster has a history only with a topology; other objects are neither.
func TestHistoryOf(t *testing.T) {
	contract := &unstructured.Unstructured{}
	contract.SetAPIVersion("controlplane.cluster.x-k8s.io/v1beta2")
	contract.SetKind("KThreesControlPlane")
	for _, tc := range []struct {
		obj  client.Object
		kind string
	}{
		{&clusterv1.MachineDeployment{}, "MachineDeployment"},
		{&clusterv1.MachinePool{}, "MachinePool"},
		{&controlplanev1.KubeadmControlPlane{}, "KubeadmControlPlane"},
		{contract, "KThreesControlPlane"},
		{&clusterv1.ClusterClass{}, "ClusterClass"},
		{&clusterv1.Cluster{Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{Version: "v1.35.2"}}}, "Cluster"},
	} {
		k, ok := HistoryOf(tc.obj)
		if !ok || k.GVK.Kind != tc.kind {
			t.Errorf("HistoryOf(%T) = %v, %v; want %s", tc.obj, k.GVK, ok, tc.kind)
		}
		if got := k.New(); got == nil {
			t.Errorf("%s: New() = nil", tc.kind)
		}
	}
	if _, ok := HistoryOf(&clusterv1.Cluster{}); ok {
		t.Error("HistoryOf(Cluster): a Cluster without a topology has no history of its own")
	}
	if k, ok := Of(&clusterv1.Cluster{}); !ok || k.GVK.Kind != "Cluster" {
		t.Errorf("Of(Cluster) = %v, %v; want the policed kind Cluster", k.GVK, ok)
	}
	// MachineSets and Machines are judged (their versions against the
	// control plane) but have no history of their own.
	for _, obj := range []client.Object{&clusterv1.Machine{}, &clusterv1.MachineSet{}} {
		if k, ok := Of(obj); !ok || k.Decide == nil {
			t.Errorf("Of(%T) = %v, %v: want a kind the policy judges", obj, k.GVK, ok)
		}
		if _, ok := HistoryOf(obj); ok {
			t.Errorf("HistoryOf(%T): a MachineSet or Machine has no history of its own", obj)
		}
	}
}

// TestClusterName: as Cluster API follows it — a worker pool's
// spec.clusterName, then the owning Cluster of Cluster API's group, then
// the cluster-name label, which an editor may point anywhere.
func TestClusterName(t *testing.T) {
	owned := func(apiVersion string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: "Cluster", Name: "owner"}}
	}
	md := func(label, spec string, owners []metav1.OwnerReference) client.Object {
		o := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owners}}
		if label != "" {
			o.Labels = map[string]string{clusterv1.ClusterNameLabel: label}
		}
		o.Spec.ClusterName = spec
		return o
	}
	mp := &clusterv1.MachinePool{}
	mp.Spec.ClusterName = "pool-cluster"
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owned("cluster.x-k8s.io/v1beta2")}}
	relabelled := kcp.DeepCopy()
	relabelled.Labels = map[string]string{clusterv1.ClusterNameLabel: "nope"}
	labelled := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{clusterv1.ClusterNameLabel: "c4"}}}
	contract := &unstructured.Unstructured{}
	contract.SetLabels(map[string]string{clusterv1.ClusterNameLabel: "c3"})
	contractOwned := &unstructured.Unstructured{}
	contractOwned.SetLabels(map[string]string{clusterv1.ClusterNameLabel: "nope"})
	contractOwned.SetOwnerReferences(owned("cluster.x-k8s.io/v1beta2"))
	for _, tc := range []struct {
		name string
		kind Kind
		obj  client.Object
		want string
	}{
		{"spec.clusterName first", MachineDeployment, md("c1", "c2", owned("cluster.x-k8s.io/v1beta2")), "c2"},
		{"then the owner", MachineDeployment, md("c1", "", owned("cluster.x-k8s.io/v1beta1")), "owner"},
		{"then the label", MachineDeployment, md("c1", "", nil), "c1"},
		{"an owner of another group is no Cluster", MachineDeployment, md("", "", owned("example.com/v1")), ""},
		{"a pool's spec.clusterName", MachinePool, mp, "pool-cluster"},
		{"a control plane's owner", KubeadmControlPlane, kcp, "owner"},
		{"a control plane's owner, whatever its label says", KubeadmControlPlane, relabelled, "owner"},
		{"a control plane's label, without an owner", KubeadmControlPlane, labelled, "c4"},
		{"a contract control plane's label", Contract(contract.GroupVersionKind()), contract, "c3"},
		{"a contract control plane's owner first", Contract(contractOwned.GroupVersionKind()), contractOwned, "owner"},
	} {
		if got := tc.kind.ClusterName(tc.obj); got != tc.want {
			t.Errorf("%s: ClusterName = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestRolloutAfter: RFC 3339 in UTC, "" when unset; a MachinePool has none.
func TestRolloutAfter(t *testing.T) {
	at := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600)))
	md := &clusterv1.MachineDeployment{}
	if got := MachineDeployment.RolloutAfter(md); got != "" {
		t.Errorf("unset: %q", got)
	}
	md.Spec.Rollout.After = at
	if got := MachineDeployment.RolloutAfter(md); got != "2030-01-02T02:04:05Z" {
		t.Errorf("MachineDeployment: %q", got)
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	kcp.Spec.Rollout.After = at
	if got := KubeadmControlPlane.RolloutAfter(kcp); got != "2030-01-02T02:04:05Z" {
		t.Errorf("KubeadmControlPlane: %q", got)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"rollout": map[string]any{"after": "2030-01-02T02:04:05Z"}}}}
	if got := Contract(u.GroupVersionKind()).RolloutAfter(u); got != "2030-01-02T02:04:05Z" {
		t.Errorf("contract: %q", got)
	}
	if got := MachinePool.RolloutAfter(&clusterv1.MachinePool{}); got != "" {
		t.Errorf("MachinePool: %q", got)
	}
}

// TestMachinePoolLabelValue holds the label value a MachinePool's Machines
// carry equal to Cluster API's (format.MustFormatValue of Cluster API
// v1.14.2): the name itself while it is a valid label value, else its hash.
func TestMachinePoolLabelValue(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"mp-0", "mp-0"},
		{"pool-" + strings.Repeat("x", 70), "hash_YSBc6g_z"},
	} {
		if got := MachinePoolLabelValue(tc.name); got != tc.want {
			t.Errorf("MachinePoolLabelValue(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestTrimKeepsTheClusterAndTopologyOwnership: a cached worker pool,
// control plane or Cluster keeps, of its labels and owner references,
// what names its Cluster as before and the topology-owned label; the
// rest goes.
func TestTrimKeepsTheClusterAndTopologyOwnership(t *testing.T) {
	clusterRef := metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "c1", UID: "uid-c1"}
	otherRef := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Thing", Name: "t", UID: "uid-t"}
	for _, tc := range []struct {
		name       string
		kind       Kind
		obj        client.Object
		wantLabels map[string]string
		wantRefs   []metav1.OwnerReference
	}{
		{"a pool named by its spec", MachineDeployment,
			&clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1", "team": "a"},
				OwnerReferences: []metav1.OwnerReference{clusterRef}}, Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c1"}},
			nil, nil},
		{"a topology-owned pool", MachineDeployment,
			&clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1",
				clusterv1.ClusterTopologyOwnedLabel: ""}}, Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c1"}},
			map[string]string{clusterv1.ClusterTopologyOwnedLabel: ""}, nil},
		// Its spec names its Cluster, as Cluster API follows it: the label
		// that names another says nothing more.
		{"a pool whose label names another Cluster than its spec", MachineDeployment,
			&clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Labels: map[string]string{clusterv1.ClusterNameLabel: "c2"}},
				Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c1"}},
			nil, nil},
		{"a control plane whose label names another Cluster than its owner", KubeadmControlPlane,
			&controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "cp", Labels: map[string]string{clusterv1.ClusterNameLabel: "nope"},
				OwnerReferences: []metav1.OwnerReference{otherRef, clusterRef}}},
			map[string]string{clusterv1.ClusterNameLabel: "nope"}, []metav1.OwnerReference{clusterRef}},
		{"a control plane named by its label", KubeadmControlPlane,
			&controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "cp", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1", "team": "a"},
				OwnerReferences: []metav1.OwnerReference{clusterRef, otherRef}}},
			map[string]string{clusterv1.ClusterNameLabel: "c1"}, nil},
		{"a control plane named by its owner", KubeadmControlPlane,
			&controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "cp", Labels: map[string]string{"team": "a"},
				OwnerReferences: []metav1.OwnerReference{otherRef, clusterRef}}},
			nil, []metav1.OwnerReference{clusterRef}},
		{"a control plane of no Cluster", KubeadmControlPlane,
			&controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "cp", OwnerReferences: []metav1.OwnerReference{otherRef}}},
			nil, nil},
		{"a Cluster", Cluster,
			&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Labels: map[string]string{"rollout-guard.io/wave": "1"}, OwnerReferences: []metav1.OwnerReference{otherRef}}},
			nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.kind.ClusterName(tc.obj)
			tc.kind.Trim(tc.obj)
			assert.Equal(t, want, tc.kind.ClusterName(tc.obj), "the same Cluster")
			assert.Equal(t, tc.wantLabels, tc.obj.GetLabels())
			assert.Equal(t, tc.wantRefs, tc.obj.GetOwnerReferences())
		})
	}
}
