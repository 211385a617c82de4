package cli

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// The world's objects (see framework.World).
const (
	clusterName = framework.WorldClusterName
	kcpName     = framework.WorldControlPlaneName
	mdName      = framework.WorldPoolName
)

// newWorld creates namespace ns and a world in it: labelled as Cluster
// API's controllers label its objects, which is how the CLI finds them,
// and with the templates its objects may switch between (see
// framework.WorldSpec). It waits until the guard's cache has seen it.
func newWorld(t *testing.T, ns string, spec framework.WorldSpec) *framework.World {
	t.Helper()
	spec.Labelled, spec.Templates = true, true
	return env.NewWorld(t, ns, spec)
}

// waitRecorded waits until the guard has recorded obj's live revision in a
// RolloutRevision (its reconciler does so shortly after each change), so
// that history output does not depend on its timing.
func waitRecorded(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	// A failed step ends only its tick (require on the CollectT): the next
	// tick tries again, and the last tick's failures are reported.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
		var snap revisions.Snapshot
		var err error
		switch o := obj.(type) {
		case *clusterv1.MachineDeployment:
			snap, err = revisions.ForMachineDeployment(o)
		case *clusterv1.MachinePool:
			snap, err = revisions.ForMachinePool(o)
		case *controlplanev1.KubeadmControlPlane:
			snap, err = revisions.ForKubeadmControlPlane(o)
		}
		require.NoError(c, err)
		revs, _, err := history.List(ctx, env.Client, obj.GetNamespace(), string(obj.GetUID()))
		require.NoError(c, err)
		rec, err := revisions.RecordFromAnnotations(obj.GetAnnotations())
		require.NoError(c, err)
		assert.True(c, slices.ContainsFunc(revs, func(r revisions.Revision) bool {
			return r.Snapshot.Hash == snap.Hash && r.Record.Revision == rec.Revision
		}), "revision %d (%s) among the recorded: %s", rec.Revision, snap.Hash, framework.DescribeHistory(revs))
	}, 20*time.Second, 100*time.Millisecond, "the live revision of %s was never recorded", obj.GetName())
}

// settle fixes the CLI's clock 30 hours after the latest stamp of objs
// (revisions and restarts), so that every AGE in a history table reads
// "30h" whatever the wall clock.
func settle(t *testing.T, objs ...client.Object) {
	t.Helper()
	var latest time.Time
	for _, obj := range objs {
		waitRecorded(t, obj)
		rec := env.Stamps(t, obj)
		if rec.ChangedAt.After(latest) {
			latest = rec.ChangedAt
		}
		if obj.GetCreationTimestamp().After(latest) {
			latest = obj.GetCreationTimestamp().Time
		}
	}
	setNow(latest.Add(30*time.Hour + 30*time.Minute))
	t.Cleanup(func() { setNow(time.Time{}) })
}

// grantViewer binds the user "viewer" to a Role in ns with rules, and waits
// until the API server's authorizer, which learns of bindings through its
// own cache, lets the viewer read every one of objs: the refusals a test
// then shows are the ones the Role leaves, not a binding not yet seen.
func grantViewer(t *testing.T, ns string, rules []rbacv1.PolicyRule, objs ...client.Object) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"},
		Rules:      rules,
	}))
	require.NoError(t, env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "viewer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "viewer"}},
	}))
	viewer, err := env.ClientAs("viewer")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for _, obj := range objs {
			if err := viewer.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)); err != nil {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the viewer's RoleBinding in %s never took effect", ns)
}
