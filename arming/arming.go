// Package arming keeps the guard's webhooks from refusing anything until a
// replica of the guard serves, and keeps them armed from then on.
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
// registered but unarmed. Deleting the Role or the guard's namespace
// disarms the webhooks, so an uninstall that leaves the webhook
// configurations behind blocks nothing. The webhook configurations
// themselves never change, so GitOps tools that own them see no drift; the
// RoleBinding is the guard's own, in no manifest, so they prune nothing.
//
// Once armed, the Armer keeps them armed: it watches the RoleBinding and the
// Role by name, and on every change (and every Resync) puts the RoleBinding
// back if it was deleted or changed — its subjects in place, its role, which
// cannot change, by deleting it and making it anew — and asks the API
// server's authorizer the very question the armed condition asks. The
// answer, not the Armer's own writes, is what the gauge rollout_guard_armed
// says; every disarm it undid counts in rollout_guard_arming_repairs_total.
// The Role is the install's: the Armer reports it missing (the uninstall
// path) and never makes it.
//
// A replica is ready once it has seen the webhooks armed, and stays ready
// if they are disarmed later. Readiness is what puts a replica behind the
// webhook Service, and a disarmed webhook is not called, so leaving the
// Service would gain nothing; coming back would lag the re-arming by a probe
// period and the endpoints' propagation, and for that time the re-armed
// webhooks would be called with no endpoint behind them: every policed
// update refused, every create let through unjudged (failurePolicy Ignore).
// An API server the Armer cannot reach would also take every replica out at
// once. A disarm shows in the gauge, the counter, the log and the alerts.
package arming

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
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

// What the Armer found wrong with the RoleBinding and put right: the values
// of the label found of rollout_guard_arming_repairs_total.
const (
	// FoundDeleted: the RoleBinding was missing (counted as a repair only
	// once the webhooks had been armed: before that it is the first arming).
	FoundDeleted = "deleted"
	// FoundSubjects: it bound someone other than the marker ServiceAccount
	// alone.
	FoundSubjects = "subjects"
	// FoundRole: it bound another role; it was deleted and made anew.
	FoundRole = "role"
)

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

// AccessReview returns the question the armed condition of a guard
// installed in namespace asks the API server's authorizer: may the marker
// ServiceAccount, in the groups the API server gives a ServiceAccount
// (CEL's authorizer.serviceAccount), get the Lease Name?
func AccessReview(namespace string) *authorizationv1.SubjectAccessReview {
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + namespace + ":" + Name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Name: Name,
		},
	}}
}

var (
	armedGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rollout_guard_armed",
		Help: "1 while the webhooks are armed, as this replica last asked the API server's authorizer what their armed match condition asks (on every change of the RoleBinding or Role " + Name + ", and at least every resync); 0 before this replica first armed them and while they are disarmed: then the API server does not call the webhooks and nothing is policed.",
	})
	repairsCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollout_guard_arming_repairs_total",
		Help: "Times this replica found the RoleBinding " + Name + " deleted (after the webhooks had been armed) or changed (found: subjects, role), and put it back. Until it was back the API server did not call the webhooks: edits in that window were not policed.",
	}, []string{"found"})
)

func init() {
	metrics.Registry.MustRegister(armedGauge, repairsCounter)
	// Every series exists from the start, so that the first repair is an
	// increase Prometheus sees.
	for _, found := range []string{FoundDeleted, FoundSubjects, FoundRole} {
		repairsCounter.WithLabelValues(found)
	}
}

// Armer arms the guard's webhooks once Ready passes, and keeps them armed.
// It runs on every replica (arming is idempotent): each watches, repairs
// and reports by itself, so one replica is enough.
type Armer struct {
	// Client creates, updates and deletes the RoleBinding and asks the
	// authorizer (SubjectAccessReviews).
	Client client.Client
	// Reader reads the RoleBinding and the Role; an uncached reader, so
	// that the guard needs no right to list RoleBindings cluster-wide.
	Reader client.Reader
	// Watch watches the RoleBinding and the Role, by name, so that a
	// deletion or change is put right at once. Nil: they are looked at
	// every Resync only.
	Watch client.WithWatch
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
	// Resync is how often, without a change seen, the RoleBinding is
	// checked and the authorizer asked. Default: 10s.
	Resync time.Duration

	mu sync.Mutex
	// armed is the authorizer's last answer; everArmed says whether it
	// ever said yes (readiness).
	armed, everArmed bool
	lastErr          error
}

// NeedLeaderElection is false: every replica arms (the first one ready
// does it, the others find it done), so a replica that serves while another
// holds the lease still arms the webhooks and puts them back.
func (a *Armer) NeedLeaderElection() bool { return false }

func (a *Armer) intervals() (interval, maxInterval, resync time.Duration) {
	interval, maxInterval, resync = a.Interval, a.MaxInterval, a.Resync
	if interval <= 0 {
		interval = 50 * time.Millisecond
	}
	if maxInterval <= 0 {
		maxInterval = 30 * time.Second
	}
	if resync <= 0 {
		resync = 10 * time.Second
	}
	return interval, maxInterval, resync
}

// Start arms the webhooks once the guard serves, then keeps them armed
// until ctx ends. It never fails the manager: a guard that cannot arm keeps
// serving, unready, and says why.
func (a *Armer) Start(ctx context.Context) error {
	interval, maxInterval, resync := a.intervals()
	if !a.waitReady(ctx, interval) {
		return nil
	}
	changed := make(chan struct{}, 1)
	if a.Watch != nil {
		go a.follow(ctx, &rbacv1.RoleBindingList{}, &rbacv1.RoleBinding{}, changed)
		go a.follow(ctx, &rbacv1.RoleList{}, &rbacv1.Role{}, changed)
	}
	wait := interval // after a failure or a repair, doubled up to maxInterval
	for {
		found, armErr := a.arm(ctx)
		// A RoleBinding missing before the first arming is the install's
		// first; any other is a repair.
		if found != "" && (found != FoundDeleted || a.wasArmed()) {
			a.Log.Error(nil, "the RoleBinding that arms the webhooks was deleted or changed, and is put back: until then the API server did not call the webhooks", "namespace", a.Namespace, "roleBinding", Name, "found", found)
			repairsCounter.WithLabelValues(found).Inc()
		}
		if armErr != nil {
			a.Log.Error(armErr, "cannot arm the webhooks: the API server does not call them, nothing is policed", "namespace", a.Namespace, "roleBinding", Name, "retryIn", wait.String())
		}
		armed, why, checkErr := a.authorized(ctx)
		switch {
		case checkErr != nil:
			// Unknown: the last answer stands, the error is reported.
			a.setState(a.isArmed(), fmt.Errorf("asking the API server's authorizer whether the webhooks are armed: %w (the guard's ClusterRole rollout-guard grants create on subjectaccessreviews)", checkErr))
		case armed:
			a.setState(true, armErr)
		case armErr != nil:
			a.setState(false, armErr)
		default:
			a.setState(false, why)
		}
		// pause: no change seen wakes the Armer before it, so that a writer
		// fighting the guard is answered at a falling pace.
		next, pause := resync, time.Duration(0)
		if found != "" || armErr != nil || checkErr != nil || !armed {
			next, wait = wait, min(2*wait, maxInterval)
			if found != "" {
				pause = next
			}
		} else {
			wait = interval
		}
		if !sleep(ctx, pause) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(next - pause):
		}
	}
}

// waitReady polls Ready until every check passes, and says whether they
// did before ctx ended.
func (a *Armer) waitReady(ctx context.Context, interval time.Duration) bool {
	logged := false
	for {
		err := a.ready(ctx)
		if err == nil {
			return true
		}
		a.setState(false, fmt.Errorf("waiting to serve before arming the webhooks: %w", err))
		if !logged {
			a.Log.V(1).Info("not arming the webhooks yet: the guard is not serving", "reason", err.Error())
			logged = true
		}
		if !sleep(ctx, interval) {
			return false
		}
	}
}

// sleep waits d, and says whether ctx is still going.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// follow runs an informer (client-go's, with its reflector's relist and
// backoff) over the objects of list's kind named Name in the guard's
// namespace, and signals changed on each event it delivers — the first
// list included, for what changed while no watch was open.
func (a *Armer) follow(ctx context.Context, list client.ObjectList, obj client.Object, changed chan<- struct{}) {
	byName := []client.ListOption{client.InNamespace(a.Namespace), client.MatchingFields{"metadata.name": Name}}
	// One object by name: a plain List request; a list streamed as watch
	// events would bring nothing here.
	lw := toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			out := list.DeepCopyObject().(client.ObjectList)
			err := a.Watch.List(ctx, out, append(byName, &client.ListOptions{Raw: &o})...)
			return out, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return a.Watch.Watch(ctx, list.DeepCopyObject().(client.ObjectList), append(byName, &client.ListOptions{Raw: &o})...)
		},
	}, listsPlainly{})
	wake := func(any) { signal(changed) }
	_, informer := toolscache.NewInformerWithOptions(toolscache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    obj,
		Handler: toolscache.ResourceEventHandlerFuncs{
			AddFunc:    wake,
			UpdateFunc: func(_, _ any) { signal(changed) },
			DeleteFunc: wake,
		},
	})
	informer.RunWithContext(ctx)
}

// listsPlainly tells client-go's reflector that a list is to be read with
// a List request (watchlist.DoesClientNotSupportWatchListSemantics).
type listsPlainly struct{}

// IsWatchListSemanticsUnSupported is true: see listsPlainly.
func (listsPlainly) IsWatchListSemanticsUnSupported() bool { return true }

// signal wakes the Armer without blocking: one pending signal is enough.
func signal(changed chan<- struct{}) {
	select {
	case changed <- struct{}{}:
	default:
	}
}

// Checker is a readiness check: it passes once this replica has seen the
// webhooks armed, and before that names what keeps them unarmed. A later
// disarm does not fail it (the package's documentation says why).
func (a *Armer) Checker(*http.Request) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.everArmed {
		return nil
	}
	if a.lastErr != nil {
		return fmt.Errorf("webhooks not armed: %w", a.lastErr)
	}
	return errors.New("webhooks not armed yet")
}

// State returns whether the webhooks are armed, as the authorizer last
// answered, and what keeps them unarmed or could not be done (nil when
// nothing).
func (a *Armer) State() (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.armed, a.lastErr
}

func (a *Armer) isArmed() bool {
	armed, _ := a.State()
	return armed
}

func (a *Armer) wasArmed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.everArmed
}

// setState records the authorizer's answer and what went wrong, sets the
// gauge and logs each change of the answer.
func (a *Armer) setState(armed bool, err error) {
	a.mu.Lock()
	was, ever := a.armed, a.everArmed
	a.armed, a.lastErr = armed, err
	a.everArmed = a.everArmed || armed
	a.mu.Unlock()
	if armed {
		armedGauge.Set(1)
	} else {
		armedGauge.Set(0)
	}
	switch {
	case armed && !was && !ever:
		a.Log.Info("webhooks armed: the API server calls them from now on", "namespace", a.Namespace, "roleBinding", Name)
	case armed && !was:
		a.Log.Info("webhooks armed again: the API server calls them", "namespace", a.Namespace, "roleBinding", Name)
	case !armed && was:
		a.Log.Error(err, "webhooks disarmed: the API server does not call them, nothing is policed", "namespace", a.Namespace, "roleBinding", Name)
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

// arm makes the RoleBinding what it must be: created when missing, its
// subjects corrected, and, binding another role, deleted and made anew. It
// returns what it found wrong and put right ("" when nothing). A race with
// another replica doing the same is tried again.
func (a *Armer) arm(ctx context.Context) (string, error) {
	for attempt := 1; ; attempt++ {
		found, err := a.armOnce(ctx)
		if err == nil {
			return found, nil
		}
		raced := apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err)
		if !raced || attempt == 3 {
			return "", wrap(err, a.Namespace)
		}
	}
}

func (a *Armer) armOnce(ctx context.Context) (string, error) {
	want := RoleBinding(a.Namespace)
	got := &rbacv1.RoleBinding{}
	err := a.Reader.Get(ctx, client.ObjectKeyFromObject(want), got)
	switch {
	case apierrors.IsNotFound(err):
		return FoundDeleted, a.Client.Create(ctx, want)
	case err != nil:
		return "", err
	case got.RoleRef != want.RoleRef:
		// A RoleBinding's role cannot change: delete this one — this one
		// only, as read — and make it anew.
		err := a.Client.Delete(ctx, got, client.Preconditions{UID: &got.UID, ResourceVersion: &got.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) {
			return "", err
		}
		return FoundRole, a.Client.Create(ctx, want)
	case !slices.Equal(got.Subjects, want.Subjects):
		got.Subjects = want.Subjects
		return FoundSubjects, a.Client.Update(ctx, got)
	}
	return "", nil
}

// authorized asks the API server's authorizer what the armed condition
// asks; when the answer is no, why says what is missing.
func (a *Armer) authorized(ctx context.Context) (armed bool, why, err error) {
	review := AccessReview(a.Namespace)
	if err := a.Client.Create(ctx, review); err != nil {
		return false, nil, err
	}
	if review.Status.Allowed {
		return true, nil, nil
	}
	return false, a.whyNotArmed(ctx), nil
}

// whyNotArmed names what keeps the marker ServiceAccount from its Lease:
// the RoleBinding or the Role missing, or the Role granting something else.
func (a *Armer) whyNotArmed(ctx context.Context) error {
	key := client.ObjectKey{Namespace: a.Namespace, Name: Name}
	if err := a.Reader.Get(ctx, key, &rbacv1.RoleBinding{}); apierrors.IsNotFound(err) {
		return fmt.Errorf("the RoleBinding %s/%s is missing", a.Namespace, Name)
	}
	role := &rbacv1.Role{}
	if err := a.Reader.Get(ctx, key, role); apierrors.IsNotFound(err) {
		return fmt.Errorf("the Role %s/%s is missing: it is the install's (config/rbac/arming_role.yaml), deleted by an uninstall, and the guard never makes it; apply config/rbac to arm the webhooks again", a.Namespace, Name)
	}
	return fmt.Errorf("the API server's authorizer does not (yet) let ServiceAccount %[1]s/%[2]s get Lease %[1]s/%[2]s although RoleBinding %[2]s binds it: the Role %[2]s must grant get on leases named %[2]s (config/rbac/arming_role.yaml)", a.Namespace, Name)
}

// wrap names the object and the way out of an error the API server gave.
func wrap(err error, namespace string) error {
	if err == nil {
		return nil
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("arming the webhooks with RoleBinding %s/%s: %w (the guard's Role rollout-guard-arming, config/rbac/arming_role.yaml, grants what arming needs on that RoleBinding and on Role %s; apply it)", namespace, Name, err, Name)
	}
	return fmt.Errorf("arming the webhooks with RoleBinding %s/%s: %w", namespace, Name, err)
}
