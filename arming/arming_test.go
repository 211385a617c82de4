package arming

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// The Armer's bookkeeping runs here against an in-memory client;
// test/install shows arming through a real API server, the webhooks
// skipped before and called after.

const ns = "guard-ns"

func newClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, rbacv1.AddToScheme(s))
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
}

// run starts a for the time it takes to arm, or until timeout.
func run(t *testing.T, a *Armer, until func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Start(ctx); close(done) }()
	assert.Eventually(t, until, 10*time.Second, 5*time.Millisecond)
	cancel()
	<-done
}

func TestArmerArmsOnceReady(t *testing.T) {
	var ready atomic.Bool
	c := newClient(t, interceptor.Funcs{})
	a := &Armer{Client: c, Reader: c, Namespace: ns, Log: logr.Discard(), Interval: time.Millisecond,
		Ready: []healthz.Checker{func(req *http.Request) error {
			require.NotNil(t, req, "checkers read the request's context")
			if !ready.Load() {
				return errors.New("webhook server not started")
			}
			return nil
		}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { _ = a.Start(ctx); close(done) }()

	// Not ready: nothing is created, and readiness names why.
	assert.Eventually(t, func() bool {
		err := a.Checker(nil)
		return err != nil && err.Error() == "webhooks not armed: waiting to serve before arming the webhooks: webhook server not started"
	}, 10*time.Second, time.Millisecond, "readiness names what arming waits for")
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: Name}, &rbacv1.RoleBinding{})
	assert.True(t, apierrors.IsNotFound(err), "no RoleBinding before the guard serves: %v", err)

	ready.Store(true)
	<-done // Start returns once armed
	require.NoError(t, a.Checker(nil))
	got := &rbacv1.RoleBinding{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: Name}, got))
	want := RoleBinding(ns)
	assert.Equal(t, want.RoleRef, got.RoleRef)
	assert.Equal(t, want.Subjects, got.Subjects)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "rollout-guard-armed"}, got.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "rollout-guard-armed", Namespace: ns}}, got.Subjects)
}

func TestArmerFindsOrCorrectsTheRoleBinding(t *testing.T) {
	otherSubjects := RoleBinding(ns)
	otherSubjects.Subjects = []rbacv1.Subject{{Kind: "User", Name: "mallory"}}
	otherRole := RoleBinding(ns)
	otherRole.RoleRef.Name = "edit"
	otherRole.RoleRef.Kind = "ClusterRole"
	cases := []struct {
		name      string
		existing  client.Object
		wantArmed bool
		wantErr   string
	}{
		{name: "made by another replica", existing: RoleBinding(ns), wantArmed: true},
		{name: "binding someone else: corrected", existing: otherSubjects, wantArmed: true},
		{name: "binding another role: reported", existing: otherRole,
			wantErr: "webhooks not armed: RoleBinding guard-ns/rollout-guard-armed binds ClusterRole edit, not Role rollout-guard-armed: delete it, and the guard makes it anew"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, interceptor.Funcs{}, tc.existing)
			a := &Armer{Client: c, Reader: c, Namespace: ns, Log: logr.Discard(), Interval: time.Millisecond}
			run(t, a, func() bool {
				err := a.Checker(nil)
				if tc.wantArmed {
					return err == nil
				}
				return err != nil && err.Error() == tc.wantErr
			})
			got := &rbacv1.RoleBinding{}
			require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: Name}, got))
			if tc.wantArmed {
				assert.Equal(t, RoleBinding(ns).Subjects, got.Subjects)
			} else {
				assert.Equal(t, "edit", got.RoleRef.Name, "a RoleBinding the guard cannot correct is left as it is")
			}
		})
	}
}

func TestArmerSaysWhatRightIsMissing(t *testing.T) {
	var attempts atomic.Int32
	c := newClient(t, interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
		attempts.Add(1)
		return apierrors.NewForbidden(rbacv1.Resource("rolebindings"), Name, errors.New(`User "guard" cannot create resource "rolebindings"`))
	}})
	a := &Armer{Client: c, Reader: c, Namespace: ns, Log: logr.Discard(), Interval: time.Millisecond, MaxInterval: time.Millisecond}
	run(t, a, func() bool { return attempts.Load() >= 3 })
	err := a.Checker(nil)
	require.Error(t, err, "unarmed: not ready")
	assert.Contains(t, err.Error(), "webhooks not armed: arming the webhooks with RoleBinding guard-ns/rollout-guard-armed: ")
	assert.Contains(t, err.Error(), "(the guard's Role rollout-guard-arming in config/rbac grants create on rolebindings and bind on Role rollout-guard-armed; apply it)")
}

func TestExpressionNamesTheNamespace(t *testing.T) {
	assert.Equal(t,
		"authorizer.serviceAccount('rollout-guard-system', 'rollout-guard-armed').group('coordination.k8s.io').resource('leases').namespace('rollout-guard-system').name('rollout-guard-armed').check('get').allowed()",
		Expression("rollout-guard-system"))
}
