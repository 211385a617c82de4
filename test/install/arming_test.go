package install

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	assert.Contains(t, err.Error(), `cannot get resource \"rolebindings\" in API group \"rbac.authorization.k8s.io\" in the namespace \"rollout-guard-system\"`, "the guard reads the RoleBinding before it creates or corrects it")
	assert.Contains(t, err.Error(), "the guard's Role rollout-guard-arming, config/rbac/arming_role.yaml, grants what arming needs on that RoleBinding and on Role rollout-guard-armed; apply it")
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
	assert.Len(t, conditions, 24, "webhooks in config/default: six validating webhooks (MachineDeployments, MachinePools, KubeadmControlPlanes, MachineSets, Machines and Clusters) and five mutating ones (the revision stampers of MachineDeployments, MachinePools, KubeadmControlPlanes, ClusterClasses and Clusters), each once for UPDATE and once for CREATE, the validating webhook of RolloutRevision records and the mutating webhook of the RolloutRevisions' owner label")
	for name, mcs := range conditions {
		require.NotEmpty(t, mcs, name)
		last := mcs[len(mcs)-1]
		assert.Equal(t, arming.ConditionName, last.Name, "%s: the last match condition", name)
		assert.Equal(t, arming.Expression(framework.GuardNamespace), last.Expression, "%s: armed names the guard's namespace", name)
	}
}

// guardMay asks the API server's authorizer whether the guard's
// ServiceAccount may verb RoleBindings in its namespace.
func guardMay(ctx context.Context, t *testing.T, verb string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: framework.GuardServiceAccount, Groups: framework.GuardGroups(),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: framework.GuardNamespace, Verb: verb, Group: rbacv1.GroupName, Resource: "rolebindings",
		},
	}}
	require.NoError(t, env.Client.Create(ctx, sar))
	return sar.Status.Allowed
}

// armingBinding returns the RoleBinding rollout-guard-armed as stored, or
// nil when there is none.
func armingBinding(ctx context.Context, t *testing.T) *rbacv1.RoleBinding {
	t.Helper()
	rb := &rbacv1.RoleBinding{}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: framework.GuardNamespace, Name: arming.Name}, rb)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return rb
}

// asShipped says whether rb binds what the guard makes it bind.
func asShipped(rb *rbacv1.RoleBinding) bool {
	want := arming.RoleBinding(framework.GuardNamespace)
	return rb != nil && rb.RoleRef == want.RoleRef && slices.Equal(rb.Subjects, want.Subjects)
}

// TestDisarmingIsUndoneAndTold disarms the webhooks as an attacker with
// rights on RoleBindings in the guard's namespace (or the guard's own
// token) would, and checks that the guard puts the RoleBinding back and
// that its gauge and the API server agree on every state in between:
//   - deleted while the guard may not put it back (its binding to the
//     arming Role taken away first): the API server's authorizer and the
//     gauge rollout_guard_armed both say not armed, the replica stays
//     ready (it still serves, and is needed the moment the webhooks are
//     armed again), and a downgrade it refuses is admitted (dry run): the
//     window the gauge and RolloutGuardNotArmed report;
//   - the guard's right back: the RoleBinding put back, armed, refused
//     again, counted as a repair;
//   - deleted with the guard running as shipped: put back;
//   - re-subjected (another user bound in the marker's place): restored;
//   - made anew binding another role (ClusterRole view, which grants no
//     Lease): not armed; deleted and made anew binding the marker's Role (a
//     RoleBinding's role cannot change in place).
func TestDisarmingIsUndoneAndTold(t *testing.T) {
	ctx := t.Context()
	const ns = "install-disarm"
	w := env.NewWorld(t, ns, framework.WorldSpec{Version: "v1.35.2", Running: []string{"v1.35.2"}, WorkerVersion: "v1.35.2"})
	token, err := framework.MetricsReaderToken(ctx, env.Client, ns+"-metrics", time.Hour)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		for _, obj := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics"}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"}},
		} {
			_ = env.Client.Delete(ctx, obj)
		}
		if err := env.InstallGuardRBAC(ctx); err != nil {
			t.Errorf("restoring the guard's RBAC: %v", err)
		}
		waitArmed(ctx, t, true)
	})
	// metric reads one sample of the guard's metrics; ok is false while
	// it cannot be read (the reader's binding takes a moment).
	metric := func(name, label, value string) (float64, bool) {
		samples, err := framework.ScrapeMetrics(ctx, env.GuardMetricsURL(), token)
		if err != nil {
			return 0, false
		}
		for _, s := range samples {
			if s.Name == name && (label == "" || s.Labels[label] == value) {
				return s.Value, true
			}
		}
		return 0, false
	}
	waitMetric := func(name, label, value string, want float64, state string) {
		t.Helper()
		var last float64
		framework.WaitFor(t, 30*time.Second, 50*time.Millisecond, state, func() (bool, string) {
			v, ok := metric(name, label, value)
			last = v
			return ok && v == want, fmt.Sprintf("%s{%s=%q} %v (read: %v)", name, label, value, last, ok)
		})
	}
	repairs := func(found string) float64 {
		t.Helper()
		var v float64
		require.Eventually(t, func() bool {
			var ok bool
			v, ok = metric("rollout_guard_arming_repairs_total", "found", found)
			return ok
		},
			30*time.Second, 50*time.Millisecond, "the guard's metrics are read")
		return v
	}
	downgrade := func() error {
		kcp := w.KCP.DeepCopy()
		return env.Client.Patch(ctx, kcp, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"version":"v1.34.3"}}`)), client.DryRunAll)
	}
	refused := func(state string) {
		t.Helper()
		err := downgrade()
		require.Error(t, err, state)
		assert.Contains(t, err.Error(), `admission webhook "validate.kubeadmcontrolplane.rollout-guard.io" denied the request`, state)
	}
	putBack := func(state string, old *rbacv1.RoleBinding) *rbacv1.RoleBinding {
		t.Helper()
		var rb *rbacv1.RoleBinding
		framework.WaitFor(t, 90*time.Second, 50*time.Millisecond, state, func() (bool, string) {
			rb = armingBinding(ctx, t)
			return asShipped(rb) && (old == nil || rb.UID != old.UID || rb.ResourceVersion != old.ResourceVersion) && armed(ctx, t),
				fmt.Sprintf("RoleBinding %+v", rb)
		})
		return rb
	}

	require.True(t, armed(ctx, t), "the package's guard armed its webhooks when it started")
	waitMetric("rollout_guard_armed", "", "", 1, "the gauge says armed")
	refused("armed")
	before := armingBinding(ctx, t)
	require.True(t, asShipped(before))

	// Deleted while the guard may not put it back.
	deleted := repairs(arming.FoundDeleted)
	require.NoError(t, env.Client.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: framework.GuardNamespace, Name: "rollout-guard-arming"}}))
	require.Eventually(t, func() bool { return !guardMay(ctx, t, "create") }, 30*time.Second, 50*time.Millisecond, "the guard's right to create RoleBindings is gone")
	require.NoError(t, env.Client.Delete(ctx, before))
	waitArmed(ctx, t, false)
	waitMetric("rollout_guard_armed", "", "", 0, "the gauge says not armed")
	assert.Nil(t, armingBinding(ctx, t), "the guard may not put it back")
	resp, err := http.Get(env.GuardReadyzURL())
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a replica that armed stays ready while disarmed")
	assert.NoError(t, downgrade(), "disarmed, the webhooks are not called: a downgrade the guard refuses is admitted")
	assert.Contains(t, env.GuardLogTail(), "cannot arm the webhooks")

	// Its right back: put back.
	require.NoError(t, env.InstallGuardRBAC(ctx))
	rb := putBack("put back once the guard may", before)
	waitMetric("rollout_guard_armed", "", "", 1, "the gauge says armed again")
	assert.Equal(t, deleted+1, repairs(arming.FoundDeleted), "the repair is counted")
	refused("armed again")

	// Deleted, the guard running as shipped: put back.
	require.NoError(t, env.Client.Delete(ctx, rb))
	rb = putBack("deleted: put back", rb)
	waitMetric("rollout_guard_arming_repairs_total", "found", arming.FoundDeleted, deleted+2, "the second repair is counted")
	refused("put back")

	// Re-subjected: restored.
	subjects := repairs(arming.FoundSubjects)
	rb.Subjects = []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "mallory"}}
	require.NoError(t, env.Client.Update(ctx, rb))
	rb = putBack("re-subjected: restored", rb)
	waitMetric("rollout_guard_arming_repairs_total", "found", arming.FoundSubjects, subjects+1, "the repair is counted")
	refused("subjects restored")

	// Made anew binding another role: made anew binding the Role. (The
	// guard's right is taken away meanwhile, so that it does not put the
	// deleted one back before the other is made.)
	role := repairs(arming.FoundRole)
	require.NoError(t, env.Client.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: framework.GuardNamespace, Name: "rollout-guard-arming"}}))
	require.Eventually(t, func() bool { return !guardMay(ctx, t, "create") }, 30*time.Second, 50*time.Millisecond, "the guard's right to create RoleBindings is gone")
	require.NoError(t, env.Client.Delete(ctx, rb))
	other := arming.RoleBinding(framework.GuardNamespace)
	other.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}
	require.NoError(t, env.Client.Create(ctx, other))
	waitArmed(ctx, t, false)
	waitMetric("rollout_guard_armed", "", "", 0, "the gauge says not armed")
	require.NoError(t, env.InstallGuardRBAC(ctx))
	putBack("another role: made anew", other)
	waitMetric("rollout_guard_arming_repairs_total", "found", arming.FoundRole, role+1, "the repair is counted")
	refused("role restored")
}

// TestGuardMayBindOnlyItsArmingRole performs, as the guard's
// ServiceAccount (what a stolen token of the guard can do), the bindings
// RBAC alone would let it make in its namespace — RBAC lets one bind a
// role whose every right one holds — and checks that the shipped
// ValidatingAdmissionPolicy rollout-guard-arming refuses each: the guard's
// leader-election Role, its own ClusterRole and its arming Role bound to
// another identity, the marker's Role under another name, edit to itself,
// the arming RoleBinding with one more subject. A role whose rights the
// guard does not hold (cluster-admin) RBAC refuses by itself. What the guard must do is
// allowed: create and update the arming RoleBinding as it must be; and the
// policy touches no one else (the admin makes the same binding).
func TestGuardMayBindOnlyItsArmingRole(t *testing.T) {
	ctx := t.Context()
	const ns = "install-guard-binds"
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		for _, name := range []string{"intruder", "intruder-lease", "intruder-guard", "intruder-arming", "intruder-armed", "intruder-admin", "intruder-edit", "admin-made"} {
			_ = env.Client.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: framework.GuardNamespace, Name: name}})
		}
		if env.GuardURL() == "" {
			if err := env.StartGuard(ctx); err != nil {
				t.Errorf("restarting the guard: %v", err)
			}
		}
	})
	require.True(t, armed(ctx, t), "the package's guard armed its webhooks when it started")
	guard, err := client.New(env.GuardConfig(), client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	intruder := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "intruder"}}
	binding := func(name, kind, role string, subjects []rbacv1.Subject) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: framework.GuardNamespace, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
			Subjects:   subjects,
		}
	}
	const policy = `ValidatingAdmissionPolicy 'rollout-guard-arming' with binding 'rollout-guard-arming' denied request: `
	for _, tc := range []struct {
		name string
		rb   *rbacv1.RoleBinding
		want string
	}{
		{"the leader-election Role to another identity", binding("intruder-lease", "Role", "rollout-guard-leader-election", intruder),
			policy + "the guard may create or update only the RoleBinding rollout-guard-system/rollout-guard-armed (config/rbac/arming_policy.yaml), not rollout-guard-system/intruder-lease"},
		{"the guard's ClusterRole to another identity", binding("intruder-guard", "ClusterRole", "rollout-guard", intruder),
			policy + "the guard may create or update only the RoleBinding rollout-guard-system/rollout-guard-armed"},
		{"the arming Role to another identity", binding("intruder-arming", "Role", "rollout-guard-arming", intruder),
			policy + "the guard may create or update only the RoleBinding rollout-guard-system/rollout-guard-armed"},
		{"the marker's Role under another name", binding("intruder-armed", "Role", arming.Name, arming.RoleBinding(framework.GuardNamespace).Subjects),
			policy + "the guard may create or update only the RoleBinding rollout-guard-system/rollout-guard-armed"},
		// RBAC refuses a role whose rights the guard does not hold; edit is
		// empty here (no controller-manager aggregates its rules), so the
		// policy refuses it.
		{"cluster-admin to itself", binding("intruder-admin", "ClusterRole", "cluster-admin", []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: framework.GuardNamespace, Name: framework.GuardServiceAccountName}}),
			"attempting to grant RBAC permissions not currently held"},
		{"edit to itself", binding("intruder-edit", "ClusterRole", "edit", []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: framework.GuardNamespace, Name: framework.GuardServiceAccountName}}),
			policy + "the guard may create or update only the RoleBinding rollout-guard-system/rollout-guard-armed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := guard.Create(ctx, tc.rb)
			require.Error(t, err, "the guard's ServiceAccount bound %s %s", tc.rb.RoleRef.Kind, tc.rb.RoleRef.Name)
			assert.True(t, apierrors.IsForbidden(err), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(tc.rb), &rbacv1.RoleBinding{})), "nothing was bound")
		})
	}

	// The arming RoleBinding with one more subject: refused.
	rb := armingBinding(ctx, t)
	require.True(t, asShipped(rb))
	more := rb.DeepCopy()
	more.Subjects = append(more.Subjects, intruder...)
	err = guard.Update(ctx, more, client.DryRunAll)
	require.Error(t, err)
	assert.Contains(t, err.Error(), policy+"the RoleBinding rollout-guard-armed the guard makes binds the ServiceAccount rollout-guard-system/rollout-guard-armed alone (config/rbac/arming_policy.yaml)")
	// As it must be: allowed.
	require.NoError(t, guard.Update(ctx, rb.DeepCopy(), client.DryRunAll), "the guard updates the arming RoleBinding as it must be")
	// Deleted while it binds the arming Role (a stolen token disarming the
	// webhooks, again and again): refused. TestDisarmingIsUndoneAndTold
	// shows the delete of one that binds another role, the guard's repair.
	err = guard.Delete(ctx, rb.DeepCopy(), client.DryRunAll)
	require.Error(t, err)
	assert.Contains(t, err.Error(), policy+"the guard may delete the RoleBinding rollout-guard-armed only when it binds another role than the Role rollout-guard-armed, to make it anew (config/rbac/arming_policy.yaml)")

	// The policy touches no one else: the admin binds what the guard may not.
	require.NoError(t, env.Client.Create(ctx, binding("admin-made", "Role", "rollout-guard-leader-election", intruder)))

	// The guard creates the arming RoleBinding as it must be: allowed
	// (the guard stopped, so that it does not make it first).
	require.NoError(t, env.StopGuard())
	require.NoError(t, env.Client.Delete(ctx, rb))
	waitArmed(ctx, t, false)
	made := arming.RoleBinding(framework.GuardNamespace)
	require.NoError(t, guard.Create(ctx, made), "the guard creates the arming RoleBinding")
	waitArmed(ctx, t, true)
	require.NoError(t, env.StartGuard(ctx))
	assert.True(t, asShipped(armingBinding(ctx, t)))
}
