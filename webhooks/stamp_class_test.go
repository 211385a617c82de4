package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

func topologyCluster(version string, ann map[string]string) *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md-0", UID: "uid-c", Annotations: ann}}
	c.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "demo-class"}, Version: version,
		Variables: []clusterv1.ClusterVariable{{Name: "workerImage", Value: apiextensionsv1.JSON{Raw: []byte(`"img:v1"`)}}}}
	return c
}

func clusterClass(infra string, ann map[string]string) *clusterv1.ClusterClass {
	cc := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md-0", UID: "uid-cc", Annotations: ann}}
	cc.Spec.Infrastructure.TemplateRef = clusterv1.ClusterClassTemplateReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta2", Kind: "DevClusterTemplate", Name: infra}
	return cc
}

// recorded lists the RolloutRevisions in c.
func recorded(t *testing.T, c client.Client) []revisions.Revision {
	t.Helper()
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, c.List(context.Background(), list))
	var out []revisions.Revision
	for i := range list.Items {
		rev, err := revisions.FromRolloutRevision(&list.Items[i])
		require.NoError(t, err)
		out = append(out, rev)
	}
	return out
}

// TestStamperOfClassesAndTopologies: a ClusterClass's spec and a Cluster's
// topology are stamped as a MachineDeployment's template is — the author
// from the request, a forged author replaced, the replaced revision
// recorded owned by the object; a Cluster write that leaves the topology
// as it is keeps its stamps and records nothing.
func TestStamperOfClassesAndTopologies(t *testing.T) {
	forged := map[string]string{revisions.AnnotationRevision: "99", revisions.AnnotationChangedBy: "forged", revisions.AnnotationChangedAt: "2020-01-01T00:00:00Z"}
	alice := map[string]string{revisions.AnnotationRevision: "1", revisions.AnnotationChangedBy: "alice", revisions.AnnotationChangedAt: "2026-12-01T00:00:00Z", revisions.AnnotationChangeType: revisions.ChangeCreated}

	t.Run("ClusterClass", func(t *testing.T) {
		s, c := stamper(t)
		s.Kind = kinds.ClusterClass
		old := stored(t, c, clusterClass("tmpl-a", alice))
		req := updateRequest(t, old, clusterClass("tmpl-b", forged), "bob", false)
		ann := applyResponse(t, req, s.Handle(context.Background(), req))
		assert.Equal(t, "2", ann[revisions.AnnotationRevision])
		assert.Equal(t, "bob", ann[revisions.AnnotationChangedBy])
		assert.NotEqual(t, "2020-01-01T00:00:00Z", ann[revisions.AnnotationChangedAt])
		assert.Equal(t, "infrastructure.templateRef DevClusterTemplate/tmpl-a → DevClusterTemplate/tmpl-b", ann[revisions.AnnotationChangeCause])
		revs := recorded(t, c)
		require.Len(t, revs, 1)
		assert.Equal(t, "alice", revs[0].Record.ChangedBy)
		assert.Equal(t, revisions.KindClusterClass, revs[0].Snapshot.Kind)
	})

	t.Run("Cluster topology", func(t *testing.T) {
		s, c := stamper(t)
		s.Kind = kinds.Cluster
		old := stored(t, c, topologyCluster("v1.35.2", alice))
		newer := topologyCluster("v1.36.1", forged)
		req := updateRequest(t, old, newer, "bob", false)
		ann := applyResponse(t, req, s.Handle(context.Background(), req))
		assert.Equal(t, "2", ann[revisions.AnnotationRevision])
		assert.Equal(t, "bob", ann[revisions.AnnotationChangedBy])
		assert.Equal(t, revisions.ChangeRollout, ann[revisions.AnnotationChangeType])
		assert.Equal(t, "version v1.35.2 → v1.36.1", ann[revisions.AnnotationChangeCause])
		revs := recorded(t, c)
		require.Len(t, revs, 1)
		assert.Equal(t, "alice", revs[0].Record.ChangedBy)
		assert.Equal(t, revisions.KindCluster, revs[0].Snapshot.Kind)
	})

	t.Run("a Cluster write that leaves the topology alone", func(t *testing.T) {
		s, c := stamper(t)
		s.Kind = kinds.Cluster
		old := stored(t, c, topologyCluster("v1.35.2", alice))
		newer := old.DeepCopy()
		newer.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Name: "cp"}
		newer.Labels = map[string]string{"team": "a"}
		newer.Annotations = forged
		req := updateRequest(t, old, newer, "system:serviceaccount:capi-system:capi-manager", false)
		ann := applyResponse(t, req, s.Handle(context.Background(), req))
		assert.Equal(t, alice[revisions.AnnotationRevision], ann[revisions.AnnotationRevision])
		assert.Equal(t, "alice", ann[revisions.AnnotationChangedBy], "the stored stamps are put back")
		assert.Empty(t, recorded(t, c))
	})

	t.Run("a Cluster without a topology", func(t *testing.T) {
		s, c := stamper(t)
		s.Kind = kinds.Cluster
		plain := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md-0"}}
		raw, err := json.Marshal(&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md-0", Annotations: forged}})
		require.NoError(t, err)
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "1", Operation: admissionv1.Create, Namespace: "ns", Name: plain.Name,
			Kind:     metav1.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "Cluster"},
			UserInfo: authenticationv1.UserInfo{Username: "bob"},
			Object:   runtime.RawExtension{Raw: raw},
		}}
		ann := applyResponse(t, req, s.Handle(context.Background(), req))
		assert.Empty(t, ann, "no revision, and the forged stamps are taken off")
		assert.Empty(t, recorded(t, c))
	})
}

// TestStamperOfAClassIgnoresAnOverride: the policy judges no ClusterClass,
// so an override annotation on one overrides nothing and fails nothing.
func TestStamperOfAClassIgnoresAnOverride(t *testing.T) {
	s, c := stamper(t)
	s.Kind = kinds.ClusterClass
	s.Overrides = []string{"admins"}
	old := stored(t, c, clusterClass("tmpl-a", nil))
	newer := clusterClass("tmpl-b", map[string]string{revisions.AnnotationOverride: "INC-1"})
	req := updateRequest(t, old, newer, "bob", false)
	req.UserInfo.Groups = []string{"admins"}
	ann := applyResponse(t, req, s.Handle(context.Background(), req))
	assert.Equal(t, "bob", ann[revisions.AnnotationChangedBy])
	assert.NotContains(t, ann, revisions.AnnotationOverriddenBy)
}
