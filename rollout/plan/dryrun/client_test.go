package dryrun

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// sentClient records the dry-run setting of every write that reaches it.
type sentClient struct {
	client.Client
	sent []string
	fail error
}

func (s *sentClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	po := (&client.PatchOptions{}).ApplyOptions(opts)
	s.sent = append(s.sent, "patch "+obj.GetName()+" dryRun="+dryRunText(po.DryRun))
	if s.fail != nil {
		return s.fail
	}
	return s.Client.Patch(ctx, obj, patch, opts...)
}

func (s *sentClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	co := (&client.CreateOptions{}).ApplyOptions(opts)
	s.sent = append(s.sent, "create "+obj.GetName()+" dryRun="+dryRunText(co.DryRun))
	return s.Client.Create(ctx, obj, opts...)
}

func dryRunText(d []string) string {
	if len(d) == 0 {
		return "none"
	}
	return d[0]
}

func newTestClient(t *testing.T, objs ...client.Object) (*capturingClient, *sentClient) {
	t.Helper()
	scheme, err := Scheme()
	require.NoError(t, err)
	base := &sentClient{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()}
	return newCapturingClient(base), base
}

func md(name string) *clusterv1.MachineDeployment {
	return &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c1"}}
}

func TestWritesAreSentAsDryRunsAndRecorded(t *testing.T) {
	c, sent := newTestClient(t, md("md-0"))
	ctx := context.Background()
	obj := md("md-0")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	obj.Spec.ClusterName = "c2"
	require.NoError(t, c.Patch(ctx, obj, client.MergeFrom(md("md-0"))))
	require.NoError(t, c.Create(ctx, md("md-new")))

	assert.Equal(t, []string{"patch md-0 dryRun=All", "create md-new dryRun=All"}, sent.sent)
	writes := c.takeWrites()
	require.Len(t, writes, 2)
	assert.Equal(t, "patch", writes[0].Verb)
	assert.Equal(t, "MachineDeployment", writes[0].GVK.Kind)
	assert.Equal(t, "md-0", writes[0].Name)
	assert.False(t, writes[0].Edited)
	// Nothing was stored: the fake keeps dry runs out of its store.
	stored := md("md-0")
	require.NoError(t, sent.Get(ctx, client.ObjectKeyFromObject(stored), stored))
	assert.Equal(t, "c1", stored.Spec.ClusterName)
	// What the run created is read back, as after a real create.
	created := &clusterv1.MachineDeployment{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "md-new"}, created))
	assert.Equal(t, "md-new", created.Name)
}

func TestTheReconcilersOwnDryRunsAreNotRecorded(t *testing.T) {
	c, sent := newTestClient(t, md("md-0"))
	obj := md("md-0")
	require.NoError(t, c.Patch(context.Background(), obj, client.MergeFrom(md("md-0")), client.DryRunAll))
	assert.Equal(t, []string{"patch md-0 dryRun=All"}, sent.sent)
	assert.Empty(t, c.takeWrites())
}

func TestEditedObjectsAreReadInPlaceOfTheStoredAndNeverSent(t *testing.T) {
	stored := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "class", Generation: 1}}
	c, sent := newTestClient(t, stored)
	edited := stored.DeepCopy()
	edited.Generation = 2
	edited.Spec.KubernetesVersions = []string{"v1.35.2"}
	require.NoError(t, c.edit(edited))

	got := &clusterv1.ClusterClass{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(stored), got))
	assert.Equal(t, []string{"v1.35.2"}, got.Spec.KubernetesVersions)

	// A status a reconciler computes for the edited object is what later
	// reads see; nothing reaches the API server.
	got.Status.ObservedGeneration = 2
	require.NoError(t, c.Status().Patch(context.Background(), got, client.MergeFrom(stored)))
	require.NoError(t, c.Patch(context.Background(), got, client.MergeFrom(stored)))
	again := &clusterv1.ClusterClass{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(stored), again))
	assert.Equal(t, int64(2), again.Status.ObservedGeneration)
	assert.Empty(t, sent.sent)
	for _, w := range c.takeWrites() {
		assert.True(t, w.Edited, w.Verb)
	}
}

func TestARefusedWriteIsRecordedWithItsError(t *testing.T) {
	c, sent := newTestClient(t, md("md-0"))
	refusal := errors.New(`admission webhook "validate.machinedeployment.rollout-guard.io" denied the request`)
	sent.fail = refusal
	err := c.Patch(context.Background(), md("md-0"), client.MergeFrom(md("md-0")))
	require.ErrorIs(t, err, refusal)
	writes := c.takeWrites()
	require.Len(t, writes, 1)
	assert.ErrorIs(t, writes[0].Err, refusal)
}

func TestRecordOnlyRunsSendNothing(t *testing.T) {
	c, sent := newTestClient(t, md("md-0"))
	c.reset(false)
	require.NoError(t, c.Patch(context.Background(), md("md-0"), client.MergeFrom(md("md-0"))))
	assert.Empty(t, sent.sent)
	assert.Len(t, c.takeWrites(), 1)
}

func TestSubresourceWritesAreRefusedNotSent(t *testing.T) {
	c, sent := newTestClient(t, md("md-0"))
	err := c.SubResource("scale").Update(context.Background(), md("md-0"))
	require.ErrorContains(t, err, "a preview writes nothing")
	assert.Empty(t, sent.sent)
}
