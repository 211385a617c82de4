package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// forgedStamps are what an attacker with edit rights writes on objects
// they create while the guard is down (creates fail open): a revision
// number, an author and a cause the guard never admitted, and, on a
// control plane, a highest run it never ran.
func forgedStamps(highestRun string) map[string]string {
	out := map[string]string{
		revisions.AnnotationRevision:    "7",
		revisions.AnnotationChangedBy:   "system:admin",
		revisions.AnnotationChangeCause: "approved change CHG-1234",
		revisions.AnnotationChangeType:  revisions.ChangeRollout,
		revisions.AnnotationChangedAt:   "2026-01-02T03:04:05Z",
	}
	if highestRun != "" {
		out[revisions.AnnotationHighestRun] = highestRun
	}
	return out
}

// TestForgedStampsOnACreateAreNotHistory: with the guard stopped, a
// namespace editor creates a worker pool and a control plane carrying
// revision stamps of their own making — revision 7 by system:admin, an
// approved cause, and on the control plane a highest run of v1.36.0 it
// never ran. Once the guard is back, neither is recorded as revision 7 by
// system:admin: each live content is a revision of unknown author
// numbered by the guard, `rollout history` shows no forged author or
// cause, the forged highest run does not refuse the control plane's
// upgrade to v1.35.0 as a downgrade, and the next edit is numbered after
// the guard's own number, its replaced revision still of unknown author.
func TestForgedStampsOnACreateAreNotHistory(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	editor := namespaceEditor(t, w.Namespace, "mallory")
	restartGuard := stopGuard(t)

	pool := builder.MachineDeployment(w.Namespace, "c1-md-forged").WithSpecOf(w.MD).
		WithLabels(map[string]string{clusterv1.ClusterNameLabel: "c1"}).Build()
	pool.SetAnnotations(forgedStamps(""))
	require.NoError(t, editor.Create(ctx, pool), "a worker pool created with forged stamps while the guard is down")

	cluster := builder.Cluster(w.Namespace, "c2").WithControlPlane("c2-control-plane").WithInfrastructure("c2").Build()
	require.NoError(t, env.Client.Create(ctx, cluster))
	controlPlane := builder.KubeadmControlPlane(w.Namespace, "c2-control-plane").WithClusterName("c2").
		WithReplicas(1).WithVersion("v1.34.2").WithInfrastructureTemplate("c2-control-plane").Build()
	controlPlane.SetAnnotations(forgedStamps(`{"kubernetes":"v1.36.0","kubernetesRevision":7,"etcd":"3.6.5","etcdRevision":7}`))
	require.NoError(t, editor.Create(ctx, controlPlane), "a control plane created with forged stamps while the guard is down")

	restartGuard()

	for _, obj := range []client.Object{pool, controlPlane} {
		var got []revisions.Revision
		require.Eventually(t, func() bool {
			revs, _, err := history.List(ctx, env.Client, w.Namespace, string(obj.GetUID()))
			got = revs
			return err == nil && len(revs) == 1
		}, 30*time.Second, 100*time.Millisecond, "the guard records what was created without it: %s", fmt.Sprint(got))
		rec := got[0].Record
		assert.Equal(t, int64(1), rec.Revision, "%s: numbered by the guard, not as its stamps say", obj.GetName())
		assert.Empty(t, rec.ChangedBy, "%s: author unknown", obj.GetName())
		assert.Equal(t, history.UnadmittedCause, rec.ChangeCause, obj.GetName())
		assert.NotContains(t, rec.History, int64(7), obj.GetName())
	}
	code, out, errOut := runRollout(t, "history", "kcp/"+controlPlane.Name, "-n", w.Namespace)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.NotContains(t, out, "system:admin")
	assert.NotContains(t, out, "CHG-1234")

	// The forged highest run (v1.36.0) would refuse this upgrade as a
	// downgrade from what the control plane ran.
	require.NoError(t, edit(t, mergePatch, controlPlane, "v1.35.0", kcpVersion...), "an upgrade judged against a forged highest run")
	stamps := env.Stamps(t, controlPlane)
	assert.Equal(t, int64(2), stamps.Revision, "the next revision follows the guard's number")
	assert.NotEqual(t, "system:admin", stamps.ChangedBy)
	assert.NotContains(t, controlPlane.GetAnnotations()[revisions.AnnotationHighestRun], "v1.36", "the forged highest run is gone")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		revs, _, err := history.List(ctx, env.Client, w.Namespace, string(controlPlane.UID))
		require.NoError(c, err)
		require.Len(c, revs, 2, "%s", framework.DescribeHistory(revs))
		assert.Equal(c, []int64{1}, revs[0].Record.History)
		assert.Empty(c, revs[0].Record.ChangedBy, "the replaced revision stays of unknown author")
		for _, r := range revs {
			assert.False(c, strings.Contains(r.Record.ChangedBy+r.Record.ChangeCause, "system:admin"), "%s", framework.DescribeHistory(revs))
		}
	}, 30*time.Second, 100*time.Millisecond)

	// A create through the guard is stamped and signed as ever.
	fresh := builder.MachineDeployment(w.Namespace, "c1-md-admitted").WithSpecOf(w.MD).
		WithLabels(map[string]string{clusterv1.ClusterNameLabel: "c1"}).Build()
	fresh.SetAnnotations(forgedStamps(""))
	require.NoError(t, editor.Create(ctx, fresh))
	assert.Equal(t, "1", fresh.GetAnnotations()[revisions.AnnotationRevision])
	assert.Equal(t, "mallory", fresh.GetAnnotations()[revisions.AnnotationChangedBy])
	assert.NotEmpty(t, fresh.GetAnnotations()[revisions.AnnotationSignature])
	require.Eventually(t, func() bool {
		revs, _, err := history.List(ctx, env.Client, w.Namespace, string(fresh.UID))
		return err == nil && len(revs) == 1 && revs[0].Record.ChangedBy == "mallory"
	}, 30*time.Second, 100*time.Millisecond, "a create the guard admitted is recorded as its stamps say")
}

// namespaceEditor returns a client of user with what an editor of
// namespace has of Cluster API and the guard's kinds: every verb on
// Cluster API's objects, and RolloutRevisions to read only (the guard's
// history is not theirs to write).
func namespaceEditor(t *testing.T, namespace, user string) client.Client {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user + "-edit"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{clusterv1.GroupVersion.Group, "controlplane.cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{APIGroups: []string{"rollout-guard.io"}, Resources: []string{"rolloutrevisions"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	require.NoError(t, env.Client.Create(ctx, role))
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user + "-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	require.NoError(t, env.Client.Create(ctx, binding))
	c, err := env.ClientAs(user)
	require.NoError(t, err)
	return c
}
