package install

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/arming"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// armed asks the API server's authorizer what the webhooks' armed match
// condition asks it.
func armed(ctx context.Context, t *testing.T) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + framework.GuardNamespace + ":" + arming.Name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + framework.GuardNamespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: framework.GuardNamespace, Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Name: arming.Name,
		},
	}}
	require.NoError(t, env.Client.Create(ctx, sar))
	return sar.Status.Allowed
}

// waitArmed waits until the authorizer answers want.
func waitArmed(ctx context.Context, t *testing.T, want bool) {
	t.Helper()
	require.Eventually(t, func() bool { return armed(ctx, t) == want }, 30*time.Second, 50*time.Millisecond,
		"the API server's authorizer never said armed=%v", want)
}

// TestWebhooksArmOnlyOnceTheGuardServes walks an install through the
// states of arming, each time with a policed update of the same
// control plane, through the API server:
//   - an install whose guard never served (the RoleBinding rollout-guard-armed
//     absent, the guard down): the webhooks are registered but not called,
//     so even a downgrade the guard refuses goes through — nothing blocks
//     Cluster API;
//   - a guard that cannot arm (its binding to the arming Role missing, an
//     RBAC mistake): it is never ready, its log says what right is
//     missing, and still nothing is blocked;
//   - the right restored, the guard arms as soon as it serves, and refuses;
//   - armed, the guard down: policed updates fail closed, as before arming
//     existed;
//   - the arming Role deleted (an uninstall that left the webhook
//     configurations behind): the webhooks are not called any more.
func TestWebhooksArmOnlyOnceTheGuardServes(t *testing.T) {
	ctx := t.Context()
	const ns = "install-arming"
	w := env.NewWorld(t, ns, framework.WorldSpec{Version: "v1.35.2", Running: []string{"v1.35.2"}, WorkerVersion: "v1.34.3"})
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		// Whatever step failed, the package's later tests get the guard
		// installed, armed and running.
		ctx := context.Background()
		if err := env.InstallGuardRBAC(ctx); err != nil {
			t.Errorf("restoring the guard's RBAC: %v", err)
		}
		if err := env.StartGuard(ctx); err != nil {
			t.Errorf("restarting the guard: %v", err)
		}
	})
	downgrade := func(version string) error {
		kcp := w.KCP.DeepCopy()
		return env.Client.Patch(ctx, kcp, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"version":%q}}`, version)))
	}
	armedBinding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: framework.GuardNamespace, Name: arming.Name}}
	require.True(t, armed(ctx, t), "the package's guard armed its webhooks when it started")

	// Never served: the guard down and the RoleBinding gone.
	require.NoError(t, env.StopGuard())
	require.NoError(t, env.Client.Delete(ctx, armedBinding))
	waitArmed(ctx, t, false)
	require.NoError(t, downgrade("v1.35.1"), "unarmed, the webhooks are not called: not even the guard's absence blocks an update")

	// An RBAC mistake: the guard may not arm.
	require.NoError(t, env.Client.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: framework.GuardNamespace, Name: "rollout-guard-arming"}}))
	short, cancel := context.WithTimeout(ctx, 8*time.Second)
	err := env.StartGuardWith(short)
	cancel()
	require.Error(t, err, "a guard that cannot arm is never ready")
	assert.Contains(t, err.Error(), "cannot arm the webhooks: the API server does not call them, nothing is policed")
	assert.Contains(t, err.Error(), `cannot create resource \"rolebindings\" in API group \"rbac.authorization.k8s.io\" in the namespace \"rollout-guard-system\"`)
	assert.Contains(t, err.Error(), "the guard's Role rollout-guard-arming in config/rbac grants create on rolebindings and bind on Role rollout-guard-armed; apply it")
	assert.False(t, armed(ctx, t))
	require.NoError(t, downgrade("v1.35.0"), "a guard that cannot arm blocks nothing")

	// Restored: the guard arms once it serves, and judges.
	require.NoError(t, env.InstallGuardRBAC(ctx))
	require.NoError(t, env.StartGuard(ctx))
	assert.True(t, armed(ctx, t), "ready means armed")
	got := &rbacv1.RoleBinding{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(armedBinding), got))
	assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: arming.Name}, got.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: arming.Name, Namespace: framework.GuardNamespace}}, got.Subjects)
	err = downgrade("v1.34.1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `admission webhook "validate.kubeadmcontrolplane.rollout-guard.io" denied the request`)

	// Armed, the guard down: fail closed.
	require.NoError(t, env.StopGuard())
	err = downgrade("v1.34.1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `failed calling webhook "`)
	assert.Contains(t, err.Error(), `.kubeadmcontrolplane.rollout-guard.io": `)

	// Uninstalled but for the webhook configurations: not called.
	require.NoError(t, env.Client.Delete(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: framework.GuardNamespace, Name: arming.Name}}))
	waitArmed(ctx, t, false)
	require.NoError(t, downgrade("v1.34.1"), "with the arming Role gone the webhooks are not called")
}

// TestEveryWebhookWaitsToBeArmed: every webhook the guard ships ends its
// match conditions with armed, naming the namespace the guard is
// installed in.
func TestEveryWebhookWaitsToBeArmed(t *testing.T) {
	objs, err := framework.BuildKustomization(filepath.Join(env.RepoRoot, "config", "default"))
	require.NoError(t, err)
	conditions := map[string][]admissionregistrationv1.MatchCondition{} // by webhook
	for _, u := range objs {
		switch u.GetKind() {
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c))
			for _, h := range c.Webhooks {
				conditions[h.Name] = h.MatchConditions
			}
		case "MutatingWebhookConfiguration":
			var c admissionregistrationv1.MutatingWebhookConfiguration
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c))
			for _, h := range c.Webhooks {
				conditions[h.Name] = h.MatchConditions
			}
		}
		if u.GetKind() == "Namespace" {
			assert.Equal(t, framework.GuardNamespace, u.GetName(), "the namespace armed names")
		}
	}
	assert.Len(t, conditions, 19, "webhooks in config/default: four validating and five mutating webhooks (the revision stampers of MachineDeployments, MachinePools, KubeadmControlPlanes, ClusterClasses and Clusters), each once for UPDATE and once for CREATE, and the mutating webhook of the RolloutRevisions' owner label")
	for name, mcs := range conditions {
		require.NotEmpty(t, mcs, name)
		last := mcs[len(mcs)-1]
		assert.Equal(t, arming.ConditionName, last.Name, "%s: the last match condition", name)
		assert.Equal(t, arming.Expression(framework.GuardNamespace), last.Expression, "%s: armed names the guard's namespace", name)
	}
}
