// Package arming keeps the guard's webhooks from refusing anything until a
// replica of the guard serves.
//
// Every webhook the guard ships carries one more match condition, armed
// (Expression): the API server calls the webhook only when the ServiceAccount
// rollout-guard-armed — a name nobody runs as — may get the Lease
// rollout-guard-armed in the guard's namespace. Nothing grants that right
// until a replica of the guard is serving and its caches are filled: then
// the Armer creates the RoleBinding rollout-guard-armed, binding the shipped
// Role of that name to the marker ServiceAccount. From then on the webhooks
// are called, and updates they police fail closed while no replica answers,
// as before.
//
// So an install whose Pods never start (a wrong image, a missing serving
// certificate, an RBAC mistake) leaves Cluster API working: its webhooks are
// registered but unarmed. The guard says so on its readiness endpoint and in
// the gauge rollout_guard_armed. Deleting the Role or the guard's namespace
// disarms the webhooks, so an uninstall that leaves the webhook
// configurations behind blocks nothing. The webhook configurations
// themselves never change, so GitOps tools that own them see no drift; the
// RoleBinding is the guard's own, in no manifest, so they prune nothing.
package arming

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Name is the name of the marker ServiceAccount, of the Lease it may get
// once armed, of the Role granting that and of the RoleBinding the Armer
// creates.
const Name = "rollout-guard-armed"

// ConditionName is the name of the match condition Expression is the
// expression of, on every webhook of the guard.
const ConditionName = "armed"

// ServiceAccountNamespaceFile is where a Pod finds its namespace.
const ServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Expression returns the CEL expression of the armed match condition for a
// guard installed in namespace: true once the RoleBinding Name exists there
// and binds the Role Name.
func Expression(namespace string) string {
	return fmt.Sprintf("authorizer.serviceAccount('%[1]s', '%[2]s').group('coordination.k8s.io').resource('leases').namespace('%[1]s').name('%[2]s').check('get').allowed()",
		namespace, Name)
}

// PodNamespace returns the namespace of the Pod the process runs in, read
// from its ServiceAccount token mount.
func PodNamespace() (string, error) {
	data, err := os.ReadFile(ServiceAccountNamespaceFile)
	if err != nil {
		return "", fmt.Errorf("reading the pod's namespace: %w (outside a Pod, set --arm-namespace)", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// RoleBinding returns the RoleBinding that arms the webhooks of a guard
// installed in namespace.
func RoleBinding(namespace string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: namespace, Labels: map[string]string{
			"app.kubernetes.io/part-of":    "rollout-guard",
			"app.kubernetes.io/managed-by": "rollout-guard",
		}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: Name, Namespace: namespace}},
	}
}

var armedGauge = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "rollout_guard_armed",
	Help: "1 once this replica has armed the guard's webhooks (created or found the RoleBinding " + Name + "), 0 before: until a replica arms them, the API server does not call the webhooks and nothing is policed.",
})

func init() {
	metrics.Registry.MustRegister(armedGauge)
}

// Armer arms the guard's webhooks once Ready passes. It runs on every
// replica (arming is idempotent), and keeps trying, with backoff, until it
// has armed or the guard stops.
type Armer struct {
	// Client creates and updates the RoleBinding.
	Client client.Client
	// Reader reads the RoleBinding; an uncached reader, so that the guard
	// needs no right to list or watch RoleBindings.
	Reader client.Reader
	// Namespace is the guard's namespace, the one Expression names.
	Namespace string
	// Ready are the checks that must all pass before arming: the webhook
	// server serves and the caches the policy reads are filled.
	Ready []healthz.Checker
	// Log receives what arming does and why it cannot.
	Log logr.Logger
	// Interval is how often Ready is polled, and the first wait between two
	// attempts to arm that failed (doubled up to MaxInterval). Default: 50ms.
	Interval time.Duration
	// MaxInterval bounds the wait between attempts. Default: 30s.
	MaxInterval time.Duration

	mu      sync.Mutex
	armed   bool
	lastErr error
}

// NeedLeaderElection is false: every replica arms (the first one ready
// does it, the others find it done), so a replica that serves while another
// holds the lease still arms the webhooks.
func (a *Armer) NeedLeaderElection() bool { return false }

// Start arms the webhooks, retrying until it has or ctx ends. It never
// fails the manager: a guard that cannot arm keeps serving, unready, and
// says why.
func (a *Armer) Start(ctx context.Context) error {
	interval, maxInterval := a.Interval, a.MaxInterval
	if interval <= 0 {
		interval = 50 * time.Millisecond
	}
	if maxInterval <= 0 {
		maxInterval = 30 * time.Second
	}
	loggedWaiting := false
	wait := interval // between two failed attempts to arm
	for {
		next := interval
		err := a.ready(ctx)
		switch {
		case err != nil:
			a.setState(false, fmt.Errorf("waiting to serve before arming the webhooks: %w", err))
			if !loggedWaiting {
				a.Log.V(1).Info("not arming the webhooks yet: the guard is not serving", "reason", err.Error())
				loggedWaiting = true
			}
		default:
			if err := a.arm(ctx); err != nil {
				a.setState(false, err)
				a.Log.Error(err, "cannot arm the webhooks: the API server does not call them, nothing is policed", "namespace", a.Namespace, "roleBinding", Name, "retryIn", wait.String())
				next, wait = wait, min(2*wait, maxInterval)
				break
			}
			a.setState(true, nil)
			a.Log.Info("webhooks armed: the API server calls them from now on", "namespace", a.Namespace, "roleBinding", Name)
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}

// Checker is a readiness check: it passes once the webhooks are armed,
// and else names what keeps them unarmed.
func (a *Armer) Checker(*http.Request) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.armed {
		return nil
	}
	if a.lastErr != nil {
		return fmt.Errorf("webhooks not armed: %w", a.lastErr)
	}
	return errors.New("webhooks not armed yet")
}

func (a *Armer) setState(armed bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.armed, a.lastErr = armed, err
	if armed {
		armedGauge.Set(1)
	} else {
		armedGauge.Set(0)
	}
}

func (a *Armer) ready(ctx context.Context) error {
	// Checkers read the request's context, as the readiness endpoint
	// passes them one.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/readyz", nil)
	if err != nil {
		return err
	}
	for _, check := range a.Ready {
		if err := check(req); err != nil {
			return err
		}
	}
	return nil
}

// arm creates the RoleBinding, or finds it made, and binding what it
// should: a RoleBinding of that name binding anything else is corrected
// (its subjects) or reported (its role, which cannot change).
func (a *Armer) arm(ctx context.Context) error {
	want := RoleBinding(a.Namespace)
	err := a.Client.Create(ctx, want.DeepCopy())
	if err == nil || !apierrors.IsAlreadyExists(err) {
		return wrap(err, a.Namespace)
	}
	got := &rbacv1.RoleBinding{}
	if err := a.Reader.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		return wrap(err, a.Namespace)
	}
	if got.RoleRef != want.RoleRef {
		return fmt.Errorf("RoleBinding %s/%s binds %s %s, not Role %s: delete it, and the guard makes it anew", a.Namespace, Name, got.RoleRef.Kind, got.RoleRef.Name, Name)
	}
	if len(got.Subjects) == 1 && got.Subjects[0] == want.Subjects[0] {
		return nil
	}
	got.Subjects = want.Subjects
	return wrap(a.Client.Update(ctx, got), a.Namespace)
}

// wrap names the object and the way out of an error the API server gave.
func wrap(err error, namespace string) error {
	if err == nil {
		return nil
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("arming the webhooks with RoleBinding %s/%s: %w (the guard's Role rollout-guard-arming in config/rbac grants create on rolebindings and bind on Role %s; apply it)", namespace, Name, err, Name)
	}
	return fmt.Errorf("arming the webhooks with RoleBinding %s/%s: %w", namespace, Name, err)
}
