package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/builder"
)

// TestWithoutGuard runs history and undo on objects the guard never saw:
// the guard is stopped and unregistered, as if it were not installed.
// history says so and shows what the cluster still has; undo refuses.
func TestWithoutGuard(t *testing.T) {
	ctx := context.Background()
	require.NoError(t, env.StopGuard())
	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-validating"}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-mutating"}},
	} {
		require.NoError(t, env.Client.Delete(ctx, obj))
	}
	t.Cleanup(func() {
		if err := env.StartGuard(context.Background()); err != nil {
			t.Fatalf("starting the guard again: %v", err)
		}
	})

	ns := "cli-noguard"
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	kcp := builder.KubeadmControlPlane(ns, kcpName).WithClusterName(clusterName).WithVersion("v1.34.2").
		WithInfrastructureTemplate(kcpName).Build()
	require.NoError(t, env.Client.Create(ctx, kcp))
	md := env.WorldIn(ns).Pool(mdName, "v1.34.2").WithInfrastructureTemplate("c1-md-2").Build()
	require.NoError(t, env.Client.Create(ctx, md))
	// What Cluster API leaves behind: the MachineSets of revisions 1 and 3
	// (it deleted revision 2's once scaled to zero).
	for _, ms := range []struct {
		revision, infra, version string
		replicas                 int32
	}{{"1", "c1-md-0", "v1.34.1", 0}, {"3", "c1-md-2", "v1.34.2", 3}} {
		obj := builder.MachineSet(ns, fmt.Sprintf("%s-rev%s", mdName, ms.revision)).OwnedBy(md, ms.revision).
			WithLabels(map[string]string{clusterv1.ClusterNameLabel: clusterName}).
			WithClusterName(clusterName).WithReplicas(ms.replicas).WithSelector(md.Spec.Selector.MatchLabels).
			WithVersion(ms.version).WithBootstrapTemplate(mdName).WithInfrastructureTemplate(ms.infra).Build()
		require.NoError(t, env.Client.Create(ctx, obj))
	}
	setNow(md.CreationTimestamp.Add(30*time.Hour + 30*time.Minute))
	t.Cleanup(func() { setNow(time.Time{}) })

	golden(t, "history/md-without-guard.txt", rolloutCmd(t, "history", "md/"+mdName, "-n", ns).ok(t))
	golden(t, "history/kcp-without-guard.txt", rolloutCmd(t, "history", "kcp/"+kcpName, "-n", ns).ok(t))
	out := rolloutCmd(t, "history", "md/"+mdName, "-n", ns, "-o", "yaml").ok(t)
	assert.Contains(t, out, "recorded: false\n")
	assert.Contains(t, out, "machineSet: c1-md-0-rev3\n")

	rolloutCmd(t, "undo", "md/"+mdName, "-n", ns).fails(t,
		"cannot undo MachineDeployment cli-noguard/c1-md-0: rollout-guard recorded no history for it (no RolloutRevisions, no rollout-guard.io/ stamps), so there is nothing to roll back to; is the guard installed? See rollout history machinedeployment/c1-md-0")
}
