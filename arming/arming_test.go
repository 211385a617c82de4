package arming

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// The Armer's bookkeeping runs here against an in-memory client, with an
// authorizer that answers from the RoleBinding and Role it holds;
// test/install shows arming, its repairs and the admission policy that
// narrows the guard's rights through a real API server, the webhooks
// skipped before and called after.

const ns = "guard-ns"

// armedRole is the Role the install ships.
func armedRole() *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			ResourceNames: []string{Name}, Verbs: []string{"get"}}},
	}
}

// authorize answers a SubjectAccessReview as RBAC would for the marker's
// question: allowed when the RoleBinding Name binds the Role Name to the
// asking ServiceAccount and the Role grants get on the Lease.
func authorize(ctx context.Context, c client.Client, review *authorizationv1.SubjectAccessReview) error {
	want := AccessReview(ns)
	if review.Spec.User != want.Spec.User || *review.Spec.ResourceAttributes != *want.Spec.ResourceAttributes {
		return errors.New("the fake authorizer answers only the armed condition's question")
	}
	review.Status = authorizationv1.SubjectAccessReviewStatus{}
	rb, role := &rbacv1.RoleBinding{}, &rbacv1.Role{}
	key := client.ObjectKey{Namespace: ns, Name: Name}
	if err := c.Get(ctx, key, rb); err != nil {
		return client.IgnoreNotFound(err)
	}
	if err := c.Get(ctx, key, role); err != nil {
		return client.IgnoreNotFound(err)
	}
	bound := rb.RoleRef == RoleBinding(ns).RoleRef
	subject := false
	for _, s := range rb.Subjects {
		subject = subject || (s.Kind == rbacv1.ServiceAccountKind && s.Namespace == ns && s.Name == Name)
	}
	granted := false
	for _, r := range role.Rules {
		granted = granted || (len(r.Verbs) == 1 && r.Verbs[0] == "get" && len(r.Resources) == 1 && r.Resources[0] == "leases")
	}
	review.Status.Allowed = bound && subject && granted
	return nil
}

// newClient returns an in-memory client holding objs, whose
// SubjectAccessReviews authorize answers.
func newClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, rbacv1.AddToScheme(s))
	require.NoError(t, authorizationv1.AddToScheme(s))
	create := funcs.Create
	funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if review, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
			return authorize(ctx, c, review)
		}
		if create != nil {
			return create(ctx, c, obj, opts...)
		}
		return c.Create(ctx, obj, opts...)
	}
	byName := func(o client.Object) []string { return []string{o.GetName()} }
	// The Armer lists and watches both by name, as a field selector.
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&rbacv1.RoleBinding{}, "metadata.name", byName).WithIndex(&rbacv1.Role{}, "metadata.name", byName).
		WithInterceptorFuncs(funcs).Build()
}

// start runs a until the test ends.
func start(t *testing.T, a *Armer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// eventually waits for cond, the state it names.
func eventually(t *testing.T, cond func() bool, state string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, state)
}

func armedNow(a *Armer) bool { armed, _ := a.State(); return armed }

func repairs(found string) float64 { return testutil.ToFloat64(repairsCounter.WithLabelValues(found)) }

func gauge() float64 { return testutil.ToFloat64(armedGauge) }

func TestArmerArmsOnceReady(t *testing.T) {
	var ready atomic.Bool
	c := newClient(t, interceptor.Funcs{}, armedRole())
	a := &Armer{Client: c, Reader: c, Watch: c, Namespace: ns, Log: logr.Discard(), Interval: time.Millisecond,
		Ready: []healthz.Checker{func(req *http.Request) error {
			require.NotNil(t, req, "checkers read the request's context")
			if !ready.Load() {
				return errors.New("webhook server not started")
			}
			return nil
		}}}
	start(t, a)

	// Not ready: nothing is created, and readiness names why.
	eventually(t, func() bool {
		err := a.Checker(nil)
		return err != nil && err.Error() == "webhooks not armed: waiting to serve before arming the webhooks: webhook server not started"
	}, "readiness names what arming waits for")
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: Name}, &rbacv1.RoleBinding{})
	assert.True(t, apierrors.IsNotFound(err), "no RoleBinding before the guard serves: %v", err)
	assert.Zero(t, gauge(), "not armed before the guard serves")

	deletedBefore := repairs(FoundDeleted)
	ready.Store(true)
	eventually(t, func() bool { return a.Checker(nil) == nil }, "ready once armed")
	assert.True(t, armedNow(a))
	assert.Equal(t, 1.0, gauge())
	assert.Equal(t, deletedBefore, repairs(FoundDeleted), "the first RoleBinding is no repair")
	got := &rbacv1.RoleBinding{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: Name}, got))
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "rollout-guard-armed"}, got.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "rollout-guard-armed", Namespace: ns}}, got.Subjects)
}

func TestArmerFindsOrCorrectsTheRoleBinding(t *testing.T) {
	otherSubjects := RoleBinding(ns)
	otherSubjects.Subjects = []rbacv1.Subject{{Kind: "User", Name: "mallory"}}
	moreSubjects := RoleBinding(ns)
	moreSubjects.Subjects = append(moreSubjects.Subjects, rbacv1.Subject{Kind: "User", Name: "mallory"})
	otherRole := RoleBinding(ns)
	otherRole.RoleRef.Name = "edit"
	otherRole.RoleRef.Kind = "ClusterRole"
	cases := []struct {
		name     string
		existing *rbacv1.RoleBinding
		found    string // the repair counted
	}{
		{name: "made by another replica", existing: RoleBinding(ns)},
		{name: "binding someone else: corrected", existing: otherSubjects, found: FoundSubjects},
		{name: "binding someone more: corrected", existing: moreSubjects, found: FoundSubjects},
		{name: "binding another role: deleted and made anew", existing: otherRole, found: FoundRole},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, interceptor.Funcs{}, armedRole(), tc.existing)
			before := map[string]float64{}
			for _, f := range []string{FoundDeleted, FoundSubjects, FoundRole} {
				before[f] = repairs(f)
			}
			a := &Armer{Client: c, Reader: c, Namespace: ns, Log: logr.Discard(), Interval: time.Millisecond}
			start(t, a)
			eventually(t, func() bool { return a.Checker(nil) == nil }, "armed")
			got := &rbacv1.RoleBinding{}
			require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: Name}, got))
			assert.Equal(t, RoleBinding(ns).RoleRef, got.RoleRef)
			assert.Equal(t, RoleBinding(ns).Subjects, got.Subjects)
			for f, n := range before {
				want := n
				if f == tc.found {
					want++
				}
				assert.Equal(t, want, repairs(f), "repairs found %s", f)
			}
		})
	}
}

// TestArmerPutsBackWhatIsDeletedOrChanged: once armed, the RoleBinding
// deleted, re-subjected or re-made binding another role is put back, seen
// through the watch, and each repair counts.
func TestArmerPutsBackWhatIsDeletedOrChanged(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, interceptor.Funcs{}, armedRole())
	// No resync but the watch's: a repair within the test's wait is the
	// watch's doing.
	a := &Armer{Client: c, Reader: c, Watch: c, Namespace: ns, Log: logr.Discard(), Interval: time.Millisecond, Resync: time.Hour}
	start(t, a)
	eventually(t, func() bool { return a.Checker(nil) == nil }, "armed")
	key := client.ObjectKey{Namespace: ns, Name: Name}
	restored := func() bool {
		got := &rbacv1.RoleBinding{}
		return c.Get(ctx, key, got) == nil && got.RoleRef == RoleBinding(ns).RoleRef &&
			len(got.Subjects) == 1 && got.Subjects[0] == RoleBinding(ns).Subjects[0] && armedNow(a)
	}

	deleted := repairs(FoundDeleted)
	require.NoError(t, c.Delete(ctx, RoleBinding(ns)))
	eventually(t, func() bool { return repairs(FoundDeleted) == deleted+1 && restored() }, "deleted: put back")

	subjects := repairs(FoundSubjects)
	rb := &rbacv1.RoleBinding{}
	require.NoError(t, c.Get(ctx, key, rb))
	rb.Subjects = []rbacv1.Subject{{Kind: "User", Name: "mallory", APIGroup: rbacv1.GroupName}}
	require.NoError(t, c.Update(ctx, rb))
	eventually(t, func() bool { return repairs(FoundSubjects) == subjects+1 && restored() }, "re-subjected: restored")

	role := repairs(FoundRole)
	require.NoError(t, c.Delete(ctx, RoleBinding(ns)))
	other := RoleBinding(ns)
	other.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}
	require.NoError(t, c.Create(ctx, other))
	eventually(t, func() bool { return repairs(FoundRole) == role+1 && restored() }, "another role: made anew")
	assert.Equal(t, 1.0, gauge())
	assert.NoError(t, a.Checker(nil))
}

// TestArmerSaysNotArmedUntilItIsBack: the RoleBinding deleted while the
// guard may not create it: not armed (gauge 0, the reason named), yet
// still ready; its right back, it is put back and armed again.
func TestArmerSaysNotArmedUntilItIsBack(t *testing.T) {
	ctx := context.Background()
	var refuse atomic.Bool
	c := newClient(t, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if refuse.Load() {
			return apierrors.NewForbidden(rbacv1.Resource("rolebindings"), Name, errors.New(`User "guard" cannot create resource "rolebindings"`))
		}
		return c.Create(ctx, obj, opts...)
	}}, armedRole())
	a := &Armer{Client: c, Reader: c, Watch: c, Namespace: ns, Log: logr.Discard(), Interval: time.Millisecond, MaxInterval: 5 * time.Millisecond}
	start(t, a)
	eventually(t, func() bool { return a.Checker(nil) == nil }, "armed")

	deleted := repairs(FoundDeleted)
	refuse.Store(true)
	require.NoError(t, c.Delete(ctx, RoleBinding(ns)))
	eventually(t, func() bool { armed, err := a.State(); return !armed && err != nil }, "not armed once the RoleBinding is gone")
	assert.Zero(t, gauge(), "the gauge says not armed")
	_, err := a.State()
	assert.Contains(t, err.Error(), "arming the webhooks with RoleBinding guard-ns/rollout-guard-armed: ")
	assert.Contains(t, err.Error(), "cannot create resource")
	assert.NoError(t, a.Checker(nil), "a replica that armed once stays ready: it still serves, and is needed the moment the webhooks are armed again")
	assert.Equal(t, deleted, repairs(FoundDeleted), "nothing put back yet")

	refuse.Store(false)
	eventually(t, func() bool { return armedNow(a) && repairs(FoundDeleted) == deleted+1 }, "put back once the guard may")
	assert.Equal(t, 1.0, gauge())
	_, err = a.State()
	assert.NoError(t, err)
}

// TestArmerReportsTheRoleItCannotMake: the Role is the install's; deleted
// (an uninstall), the webhooks are disarmed, the guard says so and makes
// nothing; applied again, they are armed again.
func TestArmerReportsTheRoleItCannotMake(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, interceptor.Funcs{}, armedRole())
	a := &Armer{Client: c, Reader: c, Watch: c, Namespace: ns, Log: logr.Discard(), Interval: time.Millisecond, MaxInterval: 5 * time.Millisecond}
	start(t, a)
	eventually(t, func() bool { return a.Checker(nil) == nil }, "armed")

	require.NoError(t, c.Delete(ctx, armedRole()))
	eventually(t, func() bool { return !armedNow(a) }, "disarmed with the Role gone")
	_, err := a.State()
	require.Error(t, err)
	assert.Equal(t, "the Role guard-ns/rollout-guard-armed is missing: it is the install's (config/rbac/arming_role.yaml), deleted by an uninstall, and the guard never makes it; apply config/rbac to arm the webhooks again", err.Error())
	assert.Zero(t, gauge())
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(armedRole()), &rbacv1.Role{})), "the guard does not make the Role")

	// The Role granting something else: the authorizer says no.
	wrong := armedRole()
	wrong.Rules[0].Verbs = []string{"list"}
	require.NoError(t, c.Create(ctx, wrong))
	eventually(t, func() bool {
		_, err := a.State()
		return err != nil && err.Error() == "the API server's authorizer does not (yet) let ServiceAccount guard-ns/rollout-guard-armed get Lease guard-ns/rollout-guard-armed although RoleBinding rollout-guard-armed binds it: the Role rollout-guard-armed must grant get on leases named rollout-guard-armed (config/rbac/arming_role.yaml)"
	}, "the reason names the Role's rule")

	require.NoError(t, c.Delete(ctx, wrong))
	require.NoError(t, c.Create(ctx, armedRole()))
	eventually(t, func() bool { return armedNow(a) }, "armed again with the Role applied")
	assert.Equal(t, 1.0, gauge())
}

// TestArmerKeepsItsAnswerWhenTheAuthorizerCannotBeAsked: a failed review
// says nothing of the RoleBinding: the last answer stands, the error is
// reported.
func TestArmerKeepsItsAnswerWhenTheAuthorizerCannotBeAsked(t *testing.T) {
	var fail atomic.Bool
	c := newClient(t, interceptor.Funcs{}, armedRole())
	a := &Armer{Client: interceptor.NewClient(c, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*authorizationv1.SubjectAccessReview); ok && fail.Load() {
			return errors.New("connection refused")
		}
		return c.Create(ctx, obj, opts...)
	}}), Reader: c, Namespace: ns, Log: logr.Discard(), Interval: time.Millisecond, MaxInterval: time.Millisecond, Resync: time.Millisecond}
	start(t, a)
	eventually(t, func() bool { return a.Checker(nil) == nil }, "armed")
	fail.Store(true)
	eventually(t, func() bool { _, err := a.State(); return err != nil }, "the failed review reported")
	armed, err := a.State()
	assert.True(t, armed, "the last answer stands")
	assert.Contains(t, err.Error(), "asking the API server's authorizer whether the webhooks are armed: connection refused")
	assert.Equal(t, 1.0, gauge())
}

func TestArmerSaysWhatRightIsMissing(t *testing.T) {
	var attempts atomic.Int32
	c := newClient(t, interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
		attempts.Add(1)
		return apierrors.NewForbidden(rbacv1.Resource("rolebindings"), Name, errors.New(`User "guard" cannot create resource "rolebindings"`))
	}}, armedRole())
	a := &Armer{Client: c, Reader: c, Namespace: ns, Log: logr.Discard(), Interval: time.Millisecond, MaxInterval: time.Millisecond}
	start(t, a)
	eventually(t, func() bool { return attempts.Load() >= 3 }, "three attempts")
	err := a.Checker(nil)
	require.Error(t, err, "unarmed: not ready")
	assert.Contains(t, err.Error(), "webhooks not armed: arming the webhooks with RoleBinding guard-ns/rollout-guard-armed: ")
	assert.Contains(t, err.Error(), "(the guard's Role rollout-guard-arming, config/rbac/arming_role.yaml, grants what arming needs on that RoleBinding and on Role rollout-guard-armed; apply it)")
	assert.Zero(t, gauge())
}

func TestExpressionNamesTheNamespace(t *testing.T) {
	assert.Equal(t,
		"authorizer.serviceAccount('rollout-guard-system', 'rollout-guard-armed').group('coordination.k8s.io').resource('leases').namespace('rollout-guard-system').name('rollout-guard-armed').check('get').allowed()",
		Expression("rollout-guard-system"))
}

func TestAccessReviewAsksWhatTheExpressionAsks(t *testing.T) {
	r := AccessReview("rollout-guard-system")
	assert.Equal(t, "system:serviceaccount:rollout-guard-system:rollout-guard-armed", r.Spec.User)
	assert.Equal(t, []string{"system:serviceaccounts", "system:serviceaccounts:rollout-guard-system"}, r.Spec.Groups, "the groups CEL's authorizer.serviceAccount gives")
	assert.Equal(t, authorizationv1.ResourceAttributes{Namespace: "rollout-guard-system", Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Name: "rollout-guard-armed"}, *r.Spec.ResourceAttributes)
}
