package policy

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// k3sGVK is a control-plane kind of another provider, shaped by Cluster
// API's contract.
var k3sGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KthreesControlPlane"}

// k3s is KthreesControlPlane cp of cluster c1 at spec version, its status
// reporting running, stamped with revision rev and the highest run h.
func k3s(version string, running []string, rev int64, h *revisions.HighestRun) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"version": version, "replicas": int64(3)}}}
	u.SetGroupVersionKind(k3sGVK)
	u.SetNamespace("ns")
	u.SetName("cp")
	u.SetLabels(map[string]string{clusterv1.ClusterNameLabel: "c1"})
	ann := map[string]string{}
	if rev > 0 {
		ann[revisions.AnnotationRevision] = strconv.FormatInt(rev, 10)
	}
	if h != nil {
		raw, _ := json.Marshal(h)
		ann[revisions.AnnotationHighestRun] = string(raw)
	}
	u.SetAnnotations(ann)
	if len(running) > 0 {
		var vs []any
		for _, v := range running {
			vs = append(vs, map[string]any{"version": v, "replicas": int64(1)})
		}
		_ = unstructured.SetNestedSlice(u.Object, vs, "status", "versions")
	}
	return u
}

// contractWorld is a Policy over Cluster c1, whose control plane is
// KthreesControlPlane cp, and objs.
func contractWorld(t *testing.T, objs ...client.Object) Policy {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clusterv1.AddToScheme(s))
	require.NoError(t, controlplanev1.AddToScheme(s))
	s.AddKnownTypeWithName(k3sGVK, &unstructured.Unstructured{})
	s.AddKnownTypeWithName(k3sGVK.GroupVersion().WithKind(k3sGVK.Kind+"List"), &unstructured.UnstructuredList{})
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"}}
	c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: k3sGVK.Group, Kind: k3sGVK.Kind, Name: "cp"}
	// The provider's kind is served: every kind of the scheme is mapped.
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{k3sGVK.GroupVersion(), clusterv1.GroupVersion})
	for gvk := range s.AllKnownTypes() {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	fc := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithObjects(append([]client.Object{c}, objs...)...).Build()
	return Policy{Reader: fc, Mapper: fc.RESTMapper(), ControlPlaneKinds: []schema.GroupKind{k3sGVK.GroupKind()}}
}

// TestContractControlPlaneChanges: a control plane of another provider is
// held to the rules of every Kubernetes control plane, each unsafe change
// refused in words naming its kind and none of kubeadm's, each safe
// neighbour allowed; etcd rules do not apply.
func TestContractControlPlaneChanges(t *testing.T) {
	ran136 := &revisions.HighestRun{Kubernetes: "v1.36.1", KubernetesRevision: 2,
		Before: &revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 1}, BeforeRevision: 2}
	cases := []struct {
		name    string
		old     *unstructured.Unstructured
		new     string
		workers []client.Object
		rule    skew.RuleID
		message string
	}{
		{
			name: "minor downgrade", old: k3s("v1.35.2", []string{"v1.35.2"}, 1, nil), new: "v1.34.3",
			rule:    skew.RuleControlPlaneDowngrade,
			message: "KthreesControlPlane cp: Kubernetes downgrade from v1.35.2 to v1.34.3 is not supported: a Kubernetes control plane cannot be downgraded",
		},
		{name: "patch downgrade in the same minor", old: k3s("v1.35.2", []string{"v1.35.2"}, 1, nil), new: "v1.35.1"},
		{
			name: "below what it has run, per its history", old: k3s("v1.35.2", []string{"v1.35.2"}, 3, &revisions.HighestRun{Kubernetes: "v1.36.1", KubernetesRevision: 2}), new: "v1.35.3",
			rule:    skew.RuleControlPlaneDowngrade,
			message: "KthreesControlPlane cp: Kubernetes downgrade from v1.36.1 (the highest version it has run, per revision 2) to v1.35.3 is not supported: a Kubernetes control plane cannot be downgraded",
		},
		{name: "revert of a bump no machine runs", old: k3s("v1.36.1", []string{"v1.35.2"}, 2, ran136), new: "v1.35.2"},
		{
			name: "revert of a bump its machines run", old: k3s("v1.36.1", []string{"v1.36.1"}, 2, ran136), new: "v1.35.2",
			rule:    skew.RuleControlPlaneDowngrade,
			message: "KthreesControlPlane cp: Kubernetes downgrade from v1.36.1 to v1.35.2 is not supported: a Kubernetes control plane cannot be downgraded",
		},
		{
			name: "two minors at once", old: k3s("v1.34.3", []string{"v1.34.3"}, 1, nil), new: "v1.36.1",
			rule:    skew.RuleControlPlaneMinorSkip,
			message: "KthreesControlPlane cp: upgrade from v1.34.3 to v1.36.1 skips v1.35; the API servers of a control plane must stay within one minor of each other",
		},
		{name: "one minor up", old: k3s("v1.34.3", []string{"v1.34.3"}, 1, nil), new: "v1.35.2"},
		{
			name: "a patch down, its worker at the old patch", old: k3s("v1.35.2", nil, 0, nil), new: "v1.35.0", workers: []client.Object{poolMD("md-0", "v1.35.2")},
		},
		{
			name: "up past a worker four minors behind", old: k3s("v1.35.2", []string{"v1.35.2"}, 1, nil), new: "v1.36.1", workers: []client.Object{poolMD("md-0", "v1.32.4")},
			rule: skew.RuleControlPlaneLeavesWorkerTooOld,
		},
		{name: "up with a worker three minors behind", old: k3s("v1.35.2", []string{"v1.35.2"}, 1, nil), new: "v1.36.1", workers: []client.Object{poolMD("md-0", "v1.33.4")}},
		{name: "an etcd-changing minor is no etcd matter", old: k3s("v1.33.5", []string{"v1.33.5"}, 1, nil), new: "v1.34.2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := contractWorld(t, append([]client.Object{tc.old.DeepCopy()}, tc.workers...)...)
			newCP := tc.old.DeepCopy()
			require.NoError(t, unstructured.SetNestedField(newCP.Object, tc.new, "spec", "version"))
			d, _, err := p.Decide(context.Background(), tc.old, newCP)
			require.NoError(t, err)
			if tc.rule == "" {
				assert.True(t, d.Allowed(), "refused: %v", violationTexts(d))
				return
			}
			require.NotEmpty(t, d.Violations)
			assert.Equal(t, tc.rule, d.Violations[0].Rule, "violations: %v", violationTexts(d))
			assert.Equal(t, "spec.version", d.Violations[0].Field)
			if tc.message != "" {
				assert.Equal(t, tc.message, d.Violations[0].Message)
			}
			for _, v := range d.Violations {
				assert.NotContains(t, v.Message, "kubeadm")
				assert.NotEqual(t, skew.RuleEtcdDowngrade, v.Rule)
			}
		})
	}
}

// TestWorkersAgainstAContractControlPlane: a worker pool is judged against
// a control plane of another provider by its contract fields, status.versions
// included.
func TestWorkersAgainstAContractControlPlane(t *testing.T) {
	p := contractWorld(t, k3s("v1.36.1", []string{"v1.35.2", "v1.36.1"}, 1, nil))
	d, warnings, err := p.Decide(context.Background(), poolMD("md-0", "v1.35.2"), poolMD("md-0", "v1.36.1"))
	require.NoError(t, err)
	assert.Empty(t, warnings)
	require.Len(t, d.Violations, 1)
	assert.Equal(t, "MachineDeployment md-0: v1.36.1 is newer than v1.35.2, the oldest version of control plane KthreesControlPlane cp (run by one of its machines); a kubelet must not be newer than the API server", d.Violations[0].Message)

	d, _, err = p.Decide(context.Background(), poolMD("md-0", "v1.34.2"), poolMD("md-0", "v1.35.2"))
	require.NoError(t, err)
	assert.True(t, d.Allowed(), "refused: %v", violationTexts(d))
}

// TestParseControlPlaneKinds reads the flag's KIND.GROUP list.
func TestParseControlPlaneKinds(t *testing.T) {
	got, err := ParseControlPlaneKinds(" KthreesControlPlane.controlplane.cluster.x-k8s.io, TalosControlPlane.controlplane.cluster.x-k8s.io,")
	require.NoError(t, err)
	assert.Equal(t, []schema.GroupKind{{Group: "controlplane.cluster.x-k8s.io", Kind: "KthreesControlPlane"}, {Group: "controlplane.cluster.x-k8s.io", Kind: "TalosControlPlane"}}, got)
	_, err = ParseControlPlaneKinds("KthreesControlPlane")
	assert.EqualError(t, err, `--control-plane-kinds: "KthreesControlPlane" is not KIND.GROUP; write e.g. KthreesControlPlane.controlplane.cluster.x-k8s.io`)
	_, err = ParseControlPlaneKinds("KubeadmControlPlane.controlplane.cluster.x-k8s.io")
	assert.ErrorContains(t, err, "is always policed")
}

// TestTopologyOfAContractControlPlane: a topology version change of a
// Cluster whose control plane is another provider's is judged by the rules
// of every control plane, without kubeadm's etcd table or words.
func TestTopologyOfAContractControlPlane(t *testing.T) {
	cluster := func(version string) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"}}
		c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: k3sGVK.Group, Kind: k3sGVK.Kind, Name: "cp"}
		c.Spec.Topology.Version = version
		return c
	}
	p := contractWorld(t, k3s("v1.35.2", []string{"v1.35.2"}, 1, nil))
	d, _, err := p.Decide(context.Background(), cluster("v1.35.2"), cluster("v1.34.3"))
	require.NoError(t, err)
	require.Equal(t, []skew.RuleID{skew.RuleControlPlaneDowngrade}, rulesOf(d), "violations: %v", violationTexts(d))
	assert.Equal(t, "Cluster c1: Kubernetes downgrade from v1.35.2 to v1.34.3 is not supported: a Kubernetes control plane cannot be downgraded", d.Violations[0].Message)

	d, _, err = p.Decide(context.Background(), cluster("v1.35.2"), cluster("v1.36.1"))
	require.NoError(t, err)
	assert.True(t, d.Allowed(), "refused: %v", violationTexts(d))
}
