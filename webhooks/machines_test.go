package webhooks

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rollout-guard/rollout-guard/policy"
)

func machineOf(ns, name, cluster, version, kubelet string, labels map[string]string) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "7",
		CreationTimestamp: metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)),
		Labels:            labels, Annotations: map[string]string{"example.com/note": "dropped"}, Finalizers: []string{"machine.cluster.x-k8s.io"}},
		Spec: clusterv1.MachineSpec{ClusterName: cluster, Version: version, ProviderID: "dev://" + name}}
	if kubelet != "" {
		m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: kubelet, OSImage: "Ubuntu 24.04"}
	}
	return m
}

// updatingInPlace gives m Cluster API's in-place update annotation.
func updatingInPlace(m *clusterv1.Machine) *clusterv1.Machine {
	m.Annotations[clusterv1.UpdateInProgressAnnotation] = ""
	return m
}

// TestMachineReader: the policy's cached List of a cluster's Machines
// (namespace and cluster-name field, as policy.workersOf and the revert
// check make it) is answered from the store with what the policy reads;
// other Machines are not listed; a List of another shape is an error, not
// a silent empty answer; other kinds go to the next reader.
func TestMachineReader(t *testing.T) {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{machinesByCluster: byCluster})
	for _, m := range []*clusterv1.Machine{
		machineOf("ns", "cp-0", "c1", "v1.35.0", "v1.35.0", map[string]string{clusterv1.MachineControlPlaneLabel: "", clusterv1.ClusterNameLabel: "c1"}),
		machineOf("ns", "md-0-a", "c1", "v1.34.0", "v1.33.4", map[string]string{clusterv1.MachineDeploymentNameLabel: "md-0", clusterv1.ClusterTopologyOwnedLabel: "", "team": "a"}),
		machineOf("ns", "md-0-b", "c1", "v1.34.0", "", map[string]string{clusterv1.MachinePoolNameLabel: "mp-0"}),
		updatingInPlace(machineOf("ns", "cp-1", "c1", "v1.35.0", "v1.35.0", map[string]string{clusterv1.MachineControlPlaneLabel: ""})),
		machineOf("ns", "other", "c2", "v1.30.0", "", nil),
		machineOf("ns2", "same-cluster-name", "c1", "v1.30.0", "", nil),
	} {
		e, err := toMachineEntry(m)
		require.NoError(t, err)
		require.NoError(t, store.Add(e))
	}
	s := runtime.NewScheme()
	require.NoError(t, clusterv1.AddToScheme(s))
	next := fake.NewClientBuilder().WithScheme(s).WithObjects(&clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md-0"}}).Build()
	r := machineReader{Reader: next, machines: store}
	ctx := context.Background()

	list := &clusterv1.MachineList{}
	require.NoError(t, r.List(ctx, list, client.InNamespace("ns"), client.MatchingFields{policy.ClusterNameField: "c1"}, client.UnsafeDisableDeepCopy))
	got := map[string]clusterv1.Machine{}
	for _, m := range list.Items {
		got[m.Name] = m
	}
	require.Len(t, got, 4, "the Machines of Cluster ns/c1")
	assert.Equal(t, map[string]string{clusterv1.UpdateInProgressAnnotation: ""}, got["cp-1"].Annotations, "the in-place update annotation, which the revert rule reads")
	cp, worker, pooled := got["cp-0"], got["md-0-a"], got["md-0-b"]
	assert.Equal(t, map[string]string{clusterv1.MachineControlPlaneLabel: ""}, cp.Labels)
	assert.Equal(t, map[string]string{clusterv1.MachineDeploymentNameLabel: "md-0", clusterv1.ClusterTopologyOwnedLabel: ""}, worker.Labels)
	assert.Equal(t, map[string]string{clusterv1.MachinePoolNameLabel: "mp-0"}, pooled.Labels)
	assert.Equal(t, clusterv1.MachineSpec{ClusterName: "c1", Version: "v1.34.0"}, worker.Spec)
	assert.Equal(t, &corev1.NodeSystemInfo{KubeletVersion: "v1.33.4"}, worker.Status.NodeInfo)
	assert.Nil(t, pooled.Status.NodeInfo, "no node yet")
	assert.Equal(t, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), cp.CreationTimestamp.Time.UTC())
	assert.Equal(t, "ns", cp.Namespace)
	assert.Empty(t, cp.Annotations)
	assert.Empty(t, cp.Finalizers)

	err := r.List(ctx, &clusterv1.MachineList{}, client.InNamespace("ns"))
	require.Error(t, err, "a List the store cannot answer")
	assert.Contains(t, err.Error(), policy.ClusterNameField)

	mds := &clusterv1.MachineDeploymentList{}
	require.NoError(t, r.List(ctx, mds, client.InNamespace("ns")))
	require.Len(t, mds.Items, 1, "other kinds are the next reader's")
}
