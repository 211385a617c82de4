package webhooks

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// TestStampOfARevertForgetsTheBump: once a bump that never rolled out is
// taken back, the control plane's highest run is what ran before the bump,
// so the next patch change is not judged against a version no machine ran;
// a revert of a bump that did roll out keeps it.
func TestStampOfARevertForgetsTheBump(t *testing.T) {
	bumpedAt := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	kcp := func(version string) *controlplanev1.KubeadmControlPlane {
		k := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1-cp", UID: "uid-cp",
			Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}, Annotations: map[string]string{}}}
		k.Spec.Version = version
		return k
	}
	bumped := kcp("v1.36.1")
	for k, v := range (revisions.Record{Revision: 4, History: []int64{4}, ChangedBy: "alice", ChangedAt: bumpedAt, ChangeType: revisions.ChangeRollout}).Annotations() {
		bumped.Annotations[k] = v
	}
	raw, err := json.Marshal(revisions.HighestRun{Kubernetes: "v1.36.1", KubernetesRevision: 4, Etcd: "3.6.8", EtcdRevision: 4,
		Before: &revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 3, Etcd: "3.6.6", EtcdRevision: 3}, BeforeRevision: 4})
	require.NoError(t, err)
	bumped.Annotations[revisions.AnnotationHighestRun] = string(raw)

	machine := func(name, version string, created time.Time) client.Object {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(created),
			Labels: map[string]string{clusterv1.ClusterNameLabel: "c1", clusterv1.MachineControlPlaneLabel: ""}}}
		m.Spec.ClusterName, m.Spec.Version = "c1", version
		return m
	}
	tests := []struct {
		name        string
		machines    []client.Object
		wantHighest string
	}{
		{"the bump never rolled out", []client.Object{machine("cp-1", "v1.35.2", bumpedAt.Add(-time.Hour))}, "v1.35.2"},
		{"a machine was made with the bump", []client.Object{machine("cp-1", "v1.35.2", bumpedAt.Add(-time.Hour)), machine("cp-2", "v1.36.1", bumpedAt.Add(time.Minute))}, "v1.36.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testScheme(t)
			require.NoError(t, rgv1alpha1.AddToScheme(s))
			c := fake.NewClientBuilder().WithScheme(s).Build()
			st := &Stamper{Kind: kinds.KubeadmControlPlane, Recorder: &history.Recorder{Client: c, Reader: c}, Stored: Persisted{Cache: c, Live: c},
				Policy: testFacts(t, tt.machines...), Decoder: newLeanDecoder(s)}
			req := updateRequest(t, bumped, kcp("v1.35.2"), "alice", false)
			ann := applyResponse(t, req, st.Handle(context.Background(), req))
			var got revisions.HighestRun
			require.NoError(t, json.Unmarshal([]byte(ann[revisions.AnnotationHighestRun]), &got))
			assert.Equal(t, tt.wantHighest, got.Kubernetes)
			before, ok := got.BeforeOf(5)
			require.True(t, ok, "the revert is revision 5 and knows what ran before it: %+v", got)
			assert.Equal(t, tt.wantHighest, before.Kubernetes)
		})
	}
}
