package policy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rollout-guard/rollout-guard/skew"
)

// TestWorkersWithoutIndex checks the path the CLI takes: a live reader with
// no spec.clusterName index, where the policy filters by cluster itself.
func TestWorkersWithoutIndex(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, clusterv1.AddToScheme(s))
	require.NoError(t, controlplanev1.AddToScheme(s))
	md := func(name, cluster, version string) client.Object {
		m := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: clusterv1.MachineDeploymentSpec{ClusterName: cluster}}
		m.Spec.Template.Spec.Version = version
		return m
	}
	kcp := func(labels map[string]string, version string) *controlplanev1.KubeadmControlPlane {
		return &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp", Labels: labels}, Spec: controlplanev1.KubeadmControlPlaneSpec{Version: version}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		md("ours", "c1", "v1.31.0"),   // too old for v1.35
		md("theirs", "c2", "v1.30.0"), // another cluster: must not count
	).Build()
	p := Policy{Reader: c, Mapper: c.RESTMapper()}

	oldKCP := kcp(map[string]string{clusterv1.ClusterNameLabel: "c1"}, "v1.34.2")
	newKCP := kcp(map[string]string{clusterv1.ClusterNameLabel: "c1"}, "v1.35.0")
	d, warnings, err := p.Decide(context.Background(), oldKCP, newKCP)
	require.NoError(t, err)
	assert.Empty(t, warnings)
	require.Len(t, d.Violations, 1)
	assert.Equal(t, skew.RuleControlPlaneLeavesWorkerTooOld, d.Violations[0].Rule)
	assert.Contains(t, d.Violations[0].Message, "MachineDeployment ours runs v1.31.0")
}

func TestOverrideRequested(t *testing.T) {
	obj := func(reason string) client.Object {
		o := &clusterv1.MachineDeployment{}
		if reason != "" {
			o.Annotations = map[string]string{"rollout-guard.io/override": reason}
		}
		return o
	}
	cases := []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"set on create", nil, obj("why"), true},
		{"newly set", obj(""), obj("why"), true},
		{"changed reason", obj("old"), obj("new"), true},
		{"carried over: spent", obj("why"), obj("why"), false},
		{"absent", obj(""), obj(""), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, got := OverrideRequested(tc.old, tc.new)
			assert.Equal(t, tc.want, got)
		})
	}
}
