package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// demoClass is a ClusterClass of the in-memory provider's kinds, built as
// the sandbox builds its class (no template need exist: this package runs
// no Cluster API controller or webhook).
func demoClass(namespace, name string) *clusterv1.ClusterClass {
	return builder.ClusterClass(namespace, name).
		WithInfrastructureClusterTemplate(builder.TemplateRef("infrastructure.cluster.x-k8s.io/v1beta2", "DevClusterTemplate", name), "").
		WithControlPlaneTemplate(builder.TemplateRef("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlaneTemplate", name),
			builder.TemplateRef("infrastructure.cluster.x-k8s.io/v1beta2", "DevMachineTemplate", name+"-cp"), "").
		WithWorkerMachineDeploymentClasses(builder.MachineDeploymentClass("default-worker").
			WithBootstrapTemplate(builder.TemplateRef("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfigTemplate", name+"-md")).
			WithInfrastructureTemplate(builder.TemplateRef("infrastructure.cluster.x-k8s.io/v1beta2", "DevMachineTemplate", name+"-md")).Build()).
		Build()
}

// recordsOf lists obj's recorded revisions, by number.
func recordsOf(t require.TestingT, obj client.Object) []revisions.Revision {
	revs, bad, err := history.List(context.Background(), env.Client, obj.GetNamespace(), string(obj.GetUID()))
	require.NoError(t, err)
	require.Empty(t, bad)
	sort.Slice(revs, func(i, j int) bool { return revs[i].Record.Revision < revs[j].Record.Revision })
	return revs
}

// authors are the (number, author) pairs of revs.
func authors(revs []revisions.Revision) []string {
	out := make([]string, 0, len(revs))
	for _, r := range revs {
		out = append(out, fmt.Sprintf("%d:%s", r.Record.Revision, r.Record.ChangedBy))
	}
	return out
}

// TestClusterClassEditsAreRecordedWithTheirUsers: a ClusterClass created
// by one user and edited by two others has three revisions, each with the
// user whose request made it (impersonated through the API server), the
// replaced ones recorded at admission, the live one by the reconciler;
// author and number stamps forged in an edit's body are replaced; a label
// change of the class makes no revision.
func TestClusterClassEditsAreRecordedWithTheirUsers(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	alice, bob, carol := framework.UserClient(t, env, "alice"), framework.UserClient(t, env, "bob"), framework.UserClient(t, env, "carol")

	cc := demoClass(w.Namespace, "demo-class")
	require.NoError(t, alice.Create(ctx, cc))
	assert.Equal(t, revisions.Record{Revision: 1, ChangedBy: "alice"}, pick(env.Stamps(t, cc)))

	// bob rotates the workers' infrastructure template, with forged stamps
	// in the same request.
	before := cc.DeepCopy()
	cc.Spec.Workers.MachineDeployments[0].Infrastructure.TemplateRef.Name = "demo-class-md-v2"
	cc.Annotations = map[string]string{revisions.AnnotationChangedBy: "mallory", revisions.AnnotationRevision: "41"}
	require.NoError(t, bob.Patch(ctx, cc, client.MergeFrom(before)))
	stamps := env.Stamps(t, cc)
	assert.Equal(t, revisions.Record{Revision: 2, ChangedBy: "bob"}, pick(stamps))
	assert.Equal(t, "workers.machineDeployments[default-worker].infrastructure.templateRef.name demo-class-md → demo-class-md-v2", stamps.ChangeCause)
	assert.Equal(t, revisions.ChangeRollout, stamps.ChangeType)

	// A label of the class is no revision.
	before = cc.DeepCopy()
	cc.Labels = map[string]string{"team": "platform"}
	require.NoError(t, bob.Patch(ctx, cc, client.MergeFrom(before)))
	assert.Equal(t, revisions.Record{Revision: 2, ChangedBy: "bob"}, pick(env.Stamps(t, cc)))

	// carol adds a Kubernetes version.
	before = cc.DeepCopy()
	cc.Spec.KubernetesVersions = []string{"v1.34.2", "v1.35.2"}
	require.NoError(t, carol.Patch(ctx, cc, client.MergeFrom(before)))
	assert.Equal(t, revisions.Record{Revision: 3, ChangedBy: "carol"}, pick(env.Stamps(t, cc)))

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		revs := recordsOf(c, cc)
		require.Equal(c, []string{"1:alice", "2:bob", "3:carol"}, authors(revs))
		for _, r := range revs {
			assert.Equal(c, revisions.KindClusterClass, r.Snapshot.Kind)
		}
	}, 30*time.Second, 100*time.Millisecond, "the class's three revisions recorded with their users")
	for _, r := range recordsOf(t, cc) {
		assert.NotContains(t, r.Record.ChangedBy, "mallory")
	}
}

// TestClusterTopologyEditsAreRecordedAndNothingElse: an edit of a Cluster's
// topology is a revision with its user; what Cluster API's controllers
// write of a Cluster — status, labels, finalizers, its control-plane
// reference — makes none, and neither do stamps forged in a request; a
// Cluster without a topology has no history at all.
func TestClusterTopologyEditsAreRecordedAndNothingElse(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2", Topology: true})
	dave, mallory := framework.UserClient(t, env, "dave"), framework.UserClient(t, env, "mallory")
	cluster := w.Cluster
	created := env.Stamps(t, cluster)
	require.EqualValues(t, 1, created.Revision, "the created Cluster's topology is revision 1")
	waitLiveRecorded(t, cluster, kinds.Cluster)

	// dave sets a topology variable.
	before := cluster.DeepCopy()
	cluster.Spec.Topology.Variables = []clusterv1.ClusterVariable{{Name: "workerImage", Value: apiextensionsv1.JSON{Raw: []byte(`"kindest/node:v2"`)}}}
	require.NoError(t, dave.Patch(ctx, cluster, client.MergeFrom(before)))
	stamps := env.Stamps(t, cluster)
	assert.Equal(t, revisions.Record{Revision: 2, ChangedBy: "dave"}, pick(stamps))
	assert.Equal(t, `variables[workerImage].value (none) → kindest/node:v2`, stamps.ChangeCause)

	// What the controllers write, and forged stamps: no revision.
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster))
	cluster.Status.Phase = "Provisioned"
	require.NoError(t, env.Client.Status().Update(ctx, cluster), "status update")
	before = cluster.DeepCopy()
	cluster.Labels = map[string]string{"team": "platform"}
	cluster.Finalizers = append(cluster.Finalizers, "cluster.cluster.x-k8s.io")
	cluster.Spec.ControlPlaneRef.Name = w.KCP.Name
	require.NoError(t, env.Client.Patch(ctx, cluster, client.MergeFrom(before)), "labels, finalizer, control-plane reference")
	before = cluster.DeepCopy()
	cluster.Annotations[revisions.AnnotationChangedBy] = "mallory-forged"
	cluster.Annotations[revisions.AnnotationRevision] = "77"
	require.NoError(t, mallory.Patch(ctx, cluster, client.MergeFrom(before)), "forged stamps alone")
	assert.Equal(t, revisions.Record{Revision: 2, ChangedBy: "dave"}, pick(env.Stamps(t, cluster)), "the stored stamps are put back")

	// mallory's own topology edit is hers, whatever author it claims.
	before = cluster.DeepCopy()
	cluster.Spec.Topology.Workers.MachineDeployments = append(cluster.Spec.Topology.Workers.MachineDeployments,
		clusterv1.MachineDeploymentTopology{Class: "default-worker", Name: "md-extra"})
	cluster.Annotations[revisions.AnnotationChangedBy] = "admin"
	require.NoError(t, mallory.Patch(ctx, cluster, client.MergeFrom(before)))
	assert.Equal(t, revisions.Record{Revision: 3, ChangedBy: "mallory"}, pick(env.Stamps(t, cluster)))

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		revs := recordsOf(c, cluster)
		require.Equal(c, []string{"1:" + created.ChangedBy, "2:dave", "3:mallory"}, authors(revs), "one record per topology, none for the other writes")
		for _, r := range revs {
			assert.Equal(c, revisions.KindCluster, r.Snapshot.Kind)
		}
	}, 30*time.Second, 100*time.Millisecond, "the topology's three revisions recorded")

	// A Cluster without a topology: no stamps, no records, even when a
	// client sends some.
	plain := builder.Cluster(w.Namespace, "plain").WithInfrastructure("plain").WithAnnotations(map[string]string{revisions.AnnotationChangedBy: "mallory-forged"}).Build()
	require.NoError(t, mallory.Create(ctx, plain))
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(plain), plain))
	assert.NotContains(t, plain.Annotations, revisions.AnnotationChangedBy)
	assert.Empty(t, recordsOf(t, plain))
}

// TestGuardStoppedLetsClassAndClusterBookkeepingThrough: with the guard
// down, the stamping webhooks' match conditions keep Cluster API's own
// writes of Clusters and ClusterClasses (labels, finalizers, references)
// from reaching it, while a change of a class's spec or a Cluster's
// topology fails closed.
func TestGuardStoppedLetsClassAndClusterBookkeepingThrough(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2", Topology: true})
	cc := demoClass(w.Namespace, "stopped-class")
	require.NoError(t, env.Client.Create(ctx, cc))
	require.NoError(t, env.StopGuard())
	t.Cleanup(func() {
		require.NoError(t, env.StartGuard(context.Background()))
	})

	w.Refresh(t)
	before := w.Cluster.DeepCopy()
	w.Cluster.Labels = map[string]string{"team": "platform"}
	w.Cluster.Finalizers = append(w.Cluster.Finalizers, "cluster.cluster.x-k8s.io")
	w.Cluster.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: builder.InfrastructureGroup, Kind: "DevCluster", Name: "c1"}
	require.NoError(t, env.Client.Patch(ctx, w.Cluster, client.MergeFrom(before)), "Cluster bookkeeping while the guard is down")
	beforeClass := cc.DeepCopy()
	cc.Labels = map[string]string{"team": "platform"}
	require.NoError(t, env.Client.Patch(ctx, cc, client.MergeFrom(beforeClass)), "ClusterClass label while the guard is down")

	before = w.Cluster.DeepCopy()
	w.Cluster.Spec.Topology.Variables = []clusterv1.ClusterVariable{{Name: "workerImage", Value: apiextensionsv1.JSON{Raw: []byte(`"x"`)}}}
	err := env.Client.Patch(ctx, w.Cluster, client.MergeFrom(before))
	require.Error(t, err, "a topology change passed with the guard down")
	assert.Contains(t, err.Error(), `failed calling webhook "stamp.cluster.rollout-guard.io"`)

	beforeClass = cc.DeepCopy()
	cc.Spec.KubernetesVersions = []string{"v1.34.2"}
	err = env.Client.Patch(ctx, cc, client.MergeFrom(beforeClass))
	require.Error(t, err, "a class change passed with the guard down")
	assert.Contains(t, err.Error(), `failed calling webhook "stamp.clusterclass.rollout-guard.io"`)
}

// pick keeps the number and author of a record, what these tests compare.
func pick(r revisions.Record) revisions.Record {
	return revisions.Record{Revision: r.Revision, ChangedBy: r.ChangedBy}
}

// TestClusterClassHistoryAndUndoThroughTheGuard: `rollout history
// clusterclass/NAME` lists the class's revisions with their users, and
// `rollout undo --to-revision 1` with --dry-run=server (through the API
// server and the guard's stamper, which stores nothing on a dry run) and
// with --emit yaml changes nothing: the class's resourceVersion and its
// records stay as they were; without either, it rolls the class back,
// a new revision by the user who ran it.
func TestClusterClassHistoryAndUndoThroughTheGuard(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	alice, bob := framework.UserClient(t, env, "alice"), framework.UserClient(t, env, "bob")
	cc := demoClass(w.Namespace, "undo-class")
	require.NoError(t, alice.Create(ctx, cc))
	before := cc.DeepCopy()
	cc.Spec.Workers.MachineDeployments[0].Infrastructure.TemplateRef.Name = "undo-class-md-v2"
	require.NoError(t, bob.Patch(ctx, cc, client.MergeFrom(before)))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, []string{"1:alice", "2:bob"}, authors(recordsOf(c, cc)))
	}, 30*time.Second, 100*time.Millisecond, "both revisions recorded")

	cache := t.TempDir()
	run := func(args ...string) (string, string, int) {
		var stdout, stderr strings.Builder
		code := framework.RunRollout(ctx, env.Kubeconfig, cache, &stdout, &stderr, append(args, "-n", w.Namespace)...)
		return stdout.String(), stderr.String(), code
	}
	out, errOut, code := run("history", "clusterclass/undo-class")
	require.Equal(t, 0, code, errOut)
	t.Logf("rollout history clusterclass/undo-class:\n%s", out)
	assert.Regexp(t, `(?m)^1\s+alice\s+`, out)
	assert.Regexp(t, `(?m)^2\s+bob\s+`, out)

	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(cc), cc))
	rv := cc.ResourceVersion
	for _, args := range [][]string{{"--dry-run=server"}, {"--emit", "yaml"}} {
		out, errOut, code := run(append([]string{"undo", "cc/undo-class", "--to-revision", "1"}, args...)...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		t.Logf("rollout undo cc/undo-class --to-revision 1 %v:\n%s%s", args, out, errOut)
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(cc), cc))
		assert.Equal(t, rv, cc.ResourceVersion, "%v changed the class", args)
		assert.Equal(t, []string{"1:alice", "2:bob"}, authors(recordsOf(t, cc)), "%v recorded something", args)
	}

	carol := "carol"
	var stdout, stderr strings.Builder
	code = framework.RunRollout(ctx, env.Kubeconfig, cache, &stdout, &stderr, "undo", "cc/undo-class", "--to-revision", "1", "-n", w.Namespace, "--as", carol, "--as-group", "system:masters")
	require.Equal(t, 0, code, stderr.String())
	stamps := env.Stamps(t, cc)
	assert.Equal(t, revisions.Record{Revision: 3, ChangedBy: carol}, pick(stamps))
	assert.Equal(t, "undo-class-md", cc.Spec.Workers.MachineDeployments[0].Infrastructure.TemplateRef.Name)
}
