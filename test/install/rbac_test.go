package install

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// The rules config/rbac ships. Changing them means changing these, the
// comments in config/rbac and the RBAC section of docs/install-access.md.
var (
	// guardRules: read the Cluster API objects the policy judges against,
	// keep history in RolloutRevisions, move the ControllerRevisions of
	// earlier releases into them once (list and delete), authenticate and
	// authorize metrics callers.
	guardRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"clusters", "clusterclasses", "machinedeployments", "machinepools", "machinesets", "machines"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"controlplane.cluster.x-k8s.io"}, Resources: []string{"kubeadmcontrolplanes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"rollout-guard.io"}, Resources: []string{"rolloutrevisions"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}},
		{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"list", "delete"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
	// leaderElectionRules: in the guard's namespace only.
	leaderElectionRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
	// armingRules: in the guard's namespace only, create the RoleBinding
	// that arms the webhooks (the shipped ValidatingAdmissionPolicy
	// rollout-guard-arming narrows create to that one, as it must be:
	// TestGuardMayBindOnlyItsArmingRole), read, watch, correct and re-make
	// it by name, bind the marker's Role and no other, and read and watch
	// that Role.
	armingRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"rolebindings"}, Verbs: []string{"create"}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"rolebindings"}, ResourceNames: []string{"rollout-guard-armed"}, Verbs: []string{"get", "list", "watch", "update", "delete"}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles"}, ResourceNames: []string{"rollout-guard-armed"}, Verbs: []string{"bind"}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles"}, ResourceNames: []string{"rollout-guard-armed"}, Verbs: []string{"get", "list", "watch"}},
	}
	// armedRules: what the armed match condition asks of the marker
	// ServiceAccount, all the RoleBinding the guard creates grants.
	armedRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"rollout-guard-armed"}, Verbs: []string{"get"}},
	}
	// stampKeyRules: in the guard's namespace only, read and fill the
	// Secret of the key it signs revision stamps with, by name; no other
	// Secret, no create, list or watch.
	stampKeyRules = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"rollout-guard-stamp-key"}, Verbs: []string{"get", "update"}},
	}
	metricsReaderRules = []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
	// historyReaderRules: read RolloutRevisions, nothing else.
	historyReaderRules = []rbacv1.PolicyRule{{APIGroups: []string{"rollout-guard.io"}, Resources: []string{"rolloutrevisions"}, Verbs: []string{"get", "list", "watch"}}}
	// aggregationLabel selects the ClusterRoles whose rules are added to
	// rollout-guard-control-planes.
	aggregationLabel = map[string]string{"rollout-guard.io/aggregate-to-control-planes": "true"}
	// writableResources are the only resources any shipped rule may write.
	writableResources = []string{"secrets", "rolloutrevisions", "controllerrevisions", "leases", "events", "tokenreviews", "subjectaccessreviews", "rolebindings", "roles"}
)

// TestShippedRBACIsLeastPrivilege pins every rule config/rbac ships and
// checks the invariants behind them: no wildcard, no Secret but its stamp
// key (by name: get and update), writes only to
// the guard's history (and the deletion of the earlier releases' history it
// migrates), its lease and events, and the two review APIs.
func TestShippedRBACIsLeastPrivilege(t *testing.T) {
	m := build(t, "config/rbac")
	assert.Equal(t, guardRules, as[rbacv1.ClusterRole](t, m.find(t, "ClusterRole", "rollout-guard")).Rules)
	assert.Equal(t, leaderElectionRules, as[rbacv1.Role](t, m.find(t, "Role", "rollout-guard-leader-election")).Rules)
	assert.Equal(t, metricsReaderRules, as[rbacv1.ClusterRole](t, m.find(t, "ClusterRole", "rollout-guard-metrics-reader")).Rules)
	historyReader := as[rbacv1.ClusterRole](t, m.find(t, "ClusterRole", "rollout-guard-history-reader"))
	assert.Equal(t, historyReaderRules, historyReader.Rules)
	for k := range historyReader.Labels {
		assert.NotContains(t, k, "rbac.authorization.k8s.io/aggregate-to-", "the history reader is aggregated into a built-in role by %s", k)
	}
	assert.Equal(t, armingRules, as[rbacv1.Role](t, m.find(t, "Role", "rollout-guard-arming")).Rules)
	assert.Equal(t, armedRules, as[rbacv1.Role](t, m.find(t, "Role", "rollout-guard-armed")).Rules)
	assert.Equal(t, stampKeyRules, as[rbacv1.Role](t, m.find(t, "Role", "rollout-guard-stamp-key")).Rules)
	aggregated := as[rbacv1.ClusterRole](t, m.find(t, "ClusterRole", "rollout-guard-control-planes"))
	assert.Empty(t, aggregated.Rules, "kube-controller-manager fills the aggregated role")
	require.NotNil(t, aggregated.AggregationRule)
	assert.Equal(t, []metav1.LabelSelector{{MatchLabels: aggregationLabel}}, aggregated.AggregationRule.ClusterRoleSelectors)

	var rules []rbacv1.PolicyRule
	for _, u := range m.ofKind("ClusterRole") {
		rules = append(rules, as[rbacv1.ClusterRole](t, u).Rules...)
	}
	for _, u := range m.ofKind("Role") {
		rules = append(rules, as[rbacv1.Role](t, u).Rules...)
	}
	for _, r := range rules {
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs} {
			assert.NotContains(t, list, "*", "no wildcard: %v", r)
		}
		if !reflect.DeepEqual(r, stampKeyRules[0]) {
			assert.NotContains(t, r.Resources, "secrets")
		}
		if slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" }) {
			for _, res := range r.Resources {
				assert.Contains(t, writableResources, res, "write access in %v", r)
			}
		}
	}
}

// TestShippedRBACWritesOnlyHistoryAndLease checks, over every role
// config/rbac ships, the promise docs/reliability.md makes: no access to
// Secrets but its own stamp key (get and update, by name), and writes only to RolloutRevisions (the history)
// cluster-wide, deletes of the ControllerRevisions earlier releases kept
// history in (migrated once, at start) and, in the guard's own namespace, to its leader-election
// Lease, the Events announcing it and the RoleBinding that arms its
// webhooks (binding only the marker's Role, which grants one get of one
// Lease). TokenReviews and SubjectAccessReviews
// are created to check metrics callers; the API server stores neither.
// Every binding binds a shipped role, to the guard's ServiceAccount alone.
func TestShippedRBACWritesOnlyHistoryAndLease(t *testing.T) {
	m := build(t, "config/rbac")
	readOnly := func(verbs []string) bool {
		return !slices.ContainsFunc(verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" })
	}
	type scoped struct {
		rule      rbacv1.PolicyRule
		namespace string // "" for a ClusterRole
	}
	var rules []scoped
	shipped := map[string]bool{}
	for _, u := range m.ofKind("ClusterRole") {
		shipped["ClusterRole/"+u.GetName()] = true
		for _, r := range as[rbacv1.ClusterRole](t, u).Rules {
			rules = append(rules, scoped{r, ""})
		}
	}
	for _, u := range m.ofKind("Role") {
		shipped["Role/"+u.GetName()] = true
		require.Equal(t, framework.GuardNamespace, u.GetNamespace(), "Role %s outside the guard's namespace", u.GetName())
		for _, r := range as[rbacv1.Role](t, u).Rules {
			rules = append(rules, scoped{r, u.GetNamespace()})
		}
	}
	require.NotEmpty(t, rules)
	for _, sr := range rules {
		r := sr.rule
		if reflect.DeepEqual(r, stampKeyRules[0]) {
			// The stamp key, by name, in the guard's namespace.
			assert.Equal(t, framework.GuardNamespace, sr.namespace, "%v", r)
			continue
		}
		assert.NotContains(t, r.Resources, "secrets", "access to Secrets: %v", r)
		assert.NotContains(t, r.APIGroups, "*", "%v", r)
		assert.NotContains(t, r.Resources, "*", "%v", r)
		if len(r.NonResourceURLs) > 0 {
			assert.True(t, readOnly(r.Verbs), "a non-resource write: %v", r)
			continue
		}
		if readOnly(r.Verbs) {
			continue
		}
		for _, res := range r.Resources {
			switch {
			case res == "rolloutrevisions" && slices.Equal(r.APIGroups, []string{"rollout-guard.io"}):
			case res == "controllerrevisions" && slices.Equal(r.APIGroups, []string{"apps"}):
				// The migration of earlier history: found with list, removed
				// with delete once moved; never created or changed.
				assert.Equal(t, []string{"list", "delete"}, r.Verbs, "ControllerRevisions beyond the migration's list and delete: %v", r)
			case (res == "leases" && slices.Equal(r.APIGroups, []string{"coordination.k8s.io"})) ||
				(res == "events" && slices.Equal(r.APIGroups, []string{""})):
				assert.Equal(t, framework.GuardNamespace, sr.namespace, "%s written outside the guard's namespace: %v", res, r)
			case res == "tokenreviews" || res == "subjectaccessreviews":
				assert.Equal(t, []string{"create"}, r.Verbs, "%v", r)
			case res == "rolebindings" && slices.Equal(r.APIGroups, []string{"rbac.authorization.k8s.io"}):
				// The arming RoleBinding: created in the guard's
				// namespace, changed only by name.
				assert.Equal(t, framework.GuardNamespace, sr.namespace, "RoleBindings written outside the guard's namespace: %v", r)
				if !slices.Equal(r.Verbs, []string{"create"}) {
					assert.Equal(t, []string{"rollout-guard-armed"}, r.ResourceNames, "RoleBindings changed beyond the arming one: %v", r)
				}
			case res == "roles" && slices.Equal(r.APIGroups, []string{"rbac.authorization.k8s.io"}):
				// bind, on the marker's Role only: what it grants is pinned
				// by TestShippedRBACIsLeastPrivilege (armedRules).
				assert.Equal(t, framework.GuardNamespace, sr.namespace, "%v", r)
				assert.Equal(t, []string{"bind"}, r.Verbs, "%v", r)
				assert.Equal(t, []string{"rollout-guard-armed"}, r.ResourceNames, "%v", r)
			default:
				t.Errorf("write access to %s: %v", res, r)
			}
		}
	}

	guardSA := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "rollout-guard", Namespace: framework.GuardNamespace}}
	bindings := 0
	for _, u := range m.ofKind("ClusterRoleBinding") {
		b := as[rbacv1.ClusterRoleBinding](t, u)
		assert.True(t, shipped[b.RoleRef.Kind+"/"+b.RoleRef.Name], "ClusterRoleBinding %s binds %s/%s, which config/rbac does not ship", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		assert.Equal(t, guardSA, b.Subjects, "ClusterRoleBinding %s", b.Name)
		bindings++
	}
	for _, u := range m.ofKind("RoleBinding") {
		b := as[rbacv1.RoleBinding](t, u)
		assert.Equal(t, "Role", b.RoleRef.Kind, "RoleBinding %s grants a ClusterRole", b.Name)
		assert.True(t, shipped[b.RoleRef.Kind+"/"+b.RoleRef.Name], "RoleBinding %s binds %s/%s, which config/rbac does not ship", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		assert.Equal(t, guardSA, b.Subjects, "RoleBinding %s", b.Name)
		bindings++
	}
	assert.Equal(t, 5, bindings, "the guard's ClusterRole, the aggregated control-plane readers, the leader-election Role, the arming Role, the stamp-key Role; the metrics reader is bound by the operator, the marker's Role by the guard once it serves")
}

// TestGuardRunsAsItsServiceAccount asks the API server who the guard is and
// what it may do, through the guard's own client configuration.
func TestGuardRunsAsItsServiceAccount(t *testing.T) {
	ctx := t.Context()
	cfg := env.GuardConfig()
	require.NotNil(t, cfg)
	guard, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	review := &authenticationv1.SelfSubjectReview{}
	require.NoError(t, guard.Create(ctx, review))
	assert.Equal(t, framework.GuardServiceAccount, review.Status.UserInfo.Username)
	assert.ElementsMatch(t, framework.GuardGroups(), review.Status.UserInfo.Groups)

	cases := []struct {
		verb, group, resource, subresource, namespace string
		allowed                                       bool
	}{
		{"list", "cluster.x-k8s.io", "machines", "", "", true},
		{"watch", "controlplane.cluster.x-k8s.io", "kubeadmcontrolplanes", "", "", true},
		{"create", "rollout-guard.io", "rolloutrevisions", "", "team-a", true},
		{"delete", "rollout-guard.io", "rolloutrevisions", "", "team-a", true},
		{"deletecollection", "rollout-guard.io", "rolloutrevisions", "", "team-a", true},
		{"list", "apps", "controllerrevisions", "", "team-a", true},
		{"delete", "apps", "controllerrevisions", "", "team-a", true},
		{"create", "authentication.k8s.io", "tokenreviews", "", "", true},
		{"create", "authorization.k8s.io", "subjectaccessreviews", "", "", true},
		{"update", "coordination.k8s.io", "leases", "", framework.GuardNamespace, true},
		{"create", "", "events", "", framework.GuardNamespace, true},
		// Not a right more.
		{"get", "", "secrets", "", framework.GuardNamespace, false},
		{"list", "", "secrets", "", "", false},
		{"watch", "", "secrets", "", "", false},
		{"create", "", "secrets", "", framework.GuardNamespace, false},
		{"update", "rollout-guard.io", "rolloutrevisions", "status", "team-a", false},
		{"create", "apps", "controllerrevisions", "", "team-a", false},
		{"update", "apps", "controllerrevisions", "", "team-a", false},
		{"deletecollection", "apps", "controllerrevisions", "", "team-a", false},
		{"create", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", false},
		{"patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", false},
		{"create", "", "serviceaccounts", "token", framework.GuardNamespace, false},
		{"impersonate", "", "users", "", "", false},
		{"update", "cluster.x-k8s.io", "machinedeployments", "", "team-a", false},
		{"patch", "controlplane.cluster.x-k8s.io", "kubeadmcontrolplanes", "", "team-a", false},
		{"update", "cluster.x-k8s.io", "machinedeployments", "status", "team-a", false},
		{"delete", "cluster.x-k8s.io", "clusters", "", "team-a", false},
		{"list", "controlplane.cluster.x-k8s.io", "talosclontrolplanes", "", "", false},
		{"list", "apps", "deployments", "", "", false},
		{"create", "coordination.k8s.io", "leases", "", "kube-system", false},
		{"create", "", "events", "", "team-a", false},
		{"create", "", "configmaps", "", framework.GuardNamespace, false},
		{"escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", false},
		// RoleBindings: create in its namespace (the admission policy
		// narrows it to the arming one), every other verb by name only.
		{"create", "rbac.authorization.k8s.io", "rolebindings", "", framework.GuardNamespace, true},
		{"create", "rbac.authorization.k8s.io", "rolebindings", "", "team-a", false},
		{"delete", "rbac.authorization.k8s.io", "rolebindings", "", framework.GuardNamespace, false},
		{"update", "rbac.authorization.k8s.io", "rolebindings", "", framework.GuardNamespace, false},
		{"list", "rbac.authorization.k8s.io", "rolebindings", "", framework.GuardNamespace, false},
		{"bind", "rbac.authorization.k8s.io", "roles", "", framework.GuardNamespace, false},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "", false},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s %s/%s", c.verb, c.group, c.resource)
		if c.subresource != "" {
			name += "/" + c.subresource
		}
		if c.namespace != "" {
			name += " in " + c.namespace
		}
		t.Run(name, func(t *testing.T) {
			sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: c.verb, Group: c.group, Resource: c.resource, Subresource: c.subresource, Namespace: c.namespace,
				},
			}}
			require.NoError(t, guard.Create(ctx, sar))
			assert.Equal(t, c.allowed, sar.Status.Allowed, "reason: %s", sar.Status.Reason)
		})
	}
}

// TestLeaderElectionWithTheShippedRole: the guard, started with
// --leader-elect, takes its Lease and announces it with an Event, both in
// its namespace, through the leader-election Role.
func TestLeaderElectionWithTheShippedRole(t *testing.T) {
	ctx := t.Context()
	lease := &coordinationv1.Lease{}
	require.Eventually(t, func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: framework.GuardNamespace, Name: "rollout-guard-leader"}, lease)
		return err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != ""
	}, 30*time.Second, 200*time.Millisecond, "the guard holds lease %s/rollout-guard-leader", framework.GuardNamespace)

	require.Eventually(t, func() bool {
		events := &corev1.EventList{}
		if err := env.Client.List(ctx, events, client.InNamespace(framework.GuardNamespace)); err != nil {
			return false
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "Lease" && e.InvolvedObject.Name == "rollout-guard-leader" && e.Reason == "LeaderElection" {
				return true
			}
		}
		return false
	}, 30*time.Second, 200*time.Millisecond, "the guard recorded its leadership in an Event")
}

// TestAMissingRightStopsTheGuard takes Machines out of the live ClusterRole
// and restarts the guard: it never becomes ready, because its cache of
// Machines cannot fill, and its log says why. (One verb alone is not enough
// to show this at start-up: against this API server the informers fill
// through a watch with initial events, and fall back to a list, so neither
// list nor watch alone keeps the cache from syncing. A missing watch leaves
// the cache stale instead, which the end-to-end tests, run with nothing
// but the shipped RBAC, catch.) Such a guard also ignores SIGTERM, as it
// waits for its caches; it is killed after the grace period, as the
// kubelet would.
func TestAMissingRightStopsTheGuard(t *testing.T) {
	ctx := t.Context()
	t.Cleanup(func() {
		ctx := context.Background()
		require.NoError(t, env.InstallGuardRBAC(ctx))
		if env.GuardURL() == "" {
			require.NoError(t, env.StartGuard(ctx))
		}
	})
	role := &rbacv1.ClusterRole{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "rollout-guard"}, role))
	for i, r := range role.Rules {
		role.Rules[i].Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(s string) bool { return s == "machines" })
	}
	require.NoError(t, env.Client.Update(ctx, role))

	// Still not ready once its log shows the machines refused three times
	// (its informer retries): the start is given up then, not after a time
	// that a busy machine could need for a guard with its rights.
	refused := regexp.MustCompile(`cannot (list|watch) resource \\?"machines\\?" in API group \\?"cluster.x-k8s.io\\?"`)
	startCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- env.StartGuard(startCtx) }()
	var err error
	returned := false
	// The tail of the log is short and the readiness checks log on every
	// poll, so a refusal may leave it before the next one comes: the
	// refusals are gathered across polls (each line carries its time).
	seen := map[string]bool{}
	framework.WaitFor(t, 2*time.Minute, 100*time.Millisecond, "three refusals of the machines in the guard's log", func() (bool, string) {
		select {
		case err = <-started:
			returned = true
			return true, "the start returned"
		default:
		}
		for _, line := range strings.Split(env.GuardLogTail(), "\n") {
			if refused.MatchString(line) {
				seen[line] = true
			}
		}
		return len(seen) >= 3, fmt.Sprintf("refused %d times", len(seen))
	})
	if !returned {
		cancel()
		err = <-started
	}
	require.Error(t, err, "the guard must not become ready without rights on machines")
	assert.Contains(t, err.Error(), "/readyz")
	assert.Regexp(t, refused, err.Error())
	assert.Empty(t, env.GuardURL(), "the failed guard was stopped")

	require.NoError(t, env.InstallGuardRBAC(ctx))
	require.NoError(t, env.StartGuard(ctx), "with the shipped role again")
}

// TestMetricsAnswerOnlyAuthorizedCallers: the guard's metrics endpoint
// checks a caller's token with a TokenReview and its right to get /metrics
// with a SubjectAccessReview, both made with the shipped ClusterRole; the
// shipped metrics-reader ClusterRole is the right.
func TestMetricsAnswerOnlyAuthorizedCallers(t *testing.T) {
	ctx := t.Context()
	url := env.GuardMetricsURL()
	require.NotEmpty(t, url)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "install-metrics"}}
	require.NoError(t, env.Client.Create(ctx, ns))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })

	token := func(name string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name}}
		require.NoError(t, env.Client.Create(ctx, sa))
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
		require.NoError(t, env.Client.SubResource("token").Create(ctx, sa, tr))
		require.NotEmpty(t, tr.Status.Token)
		return tr.Status.Token
	}
	scraper, stranger := token("scraper"), token("stranger")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "install-test-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rollout-guard-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns.Name, Name: "scraper"}},
	}
	require.NoError(t, env.Client.Create(ctx, binding))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	// The API server's authorizer learns of the binding through its own
	// cache, and the guard keeps a refusal for 30 s: ask the API server
	// first, so that the scraper's first request is judged with the binding.
	require.Eventually(t, func() bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:                  "system:serviceaccount:" + ns.Name + ":scraper",
			Groups:                []string{"system:serviceaccounts", "system:serviceaccounts:" + ns.Name, "system:authenticated"},
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		}}
		return env.Client.Create(ctx, sar) == nil && sar.Status.Allowed
	}, 30*time.Second, 50*time.Millisecond, "the scraper's ClusterRoleBinding never took effect")

	// The endpoint's certificate is self-signed; what is tested here is who
	// may read it.
	httpClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a self-signed local endpoint
	}}
	get := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	// A guard restarted by an earlier test serves metrics a moment after it
	// is ready (readiness covers admission and caches): wait for a listener.
	require.Eventually(t, func() bool {
		resp, err := httpClient.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, 10*time.Second, 100*time.Millisecond, "the metrics endpoint %s accepts connections", url)
	code, body := get(scraper)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "controller_runtime_webhook_requests_total")
	code, body = get(stranger)
	assert.Equal(t, http.StatusForbidden, code, "a valid token without the metrics-reader role")
	assert.Contains(t, body, `user "system:serviceaccount:install-metrics:stranger" may not get /metrics`)
	assert.NotContains(t, body, "controller_runtime_webhook_requests_total")
	code, _ = get("")
	assert.Equal(t, http.StatusUnauthorized, code, "no token")
	code, body = get("not-a-token")
	assert.Equal(t, http.StatusUnauthorized, code, "a token the API server does not know")
	assert.NotContains(t, body, "controller_runtime_webhook_requests_total")
	assert.False(t, strings.Contains(env.GuardLogTail(), "is forbidden"), "the guard made every review it needed:\n%s", env.GuardLogTail())
}

// TestArmingPolicyMatchesOnlyTheGuard pins the shipped
// ValidatingAdmissionPolicy that narrows the guard's create of
// RoleBindings: it judges creates and updates of RoleBindings by the
// guard's ServiceAccount alone (so it never refuses Cluster API or anyone
// else), fails closed, and its binding denies. What it refuses and allows
// is shown through the API server by TestGuardMayBindOnlyItsArmingRole.
func TestArmingPolicyMatchesOnlyTheGuard(t *testing.T) {
	m := build(t, "config/default")
	p := as[admissionregistrationv1.ValidatingAdmissionPolicy](t, m.find(t, "ValidatingAdmissionPolicy", "rollout-guard-arming"))
	require.NotNil(t, p.Spec.FailurePolicy)
	assert.Equal(t, admissionregistrationv1.Fail, *p.Spec.FailurePolicy)
	require.NotNil(t, p.Spec.MatchConstraints)
	require.Len(t, p.Spec.MatchConstraints.ResourceRules, 1)
	rule := p.Spec.MatchConstraints.ResourceRules[0]
	assert.Equal(t, []admissionregistrationv1.OperationType{"CREATE", "UPDATE", "DELETE"}, rule.Operations)
	assert.Equal(t, []string{"rbac.authorization.k8s.io"}, rule.APIGroups)
	assert.Equal(t, []string{"rolebindings"}, rule.Resources)
	assert.Equal(t, []admissionregistrationv1.MatchCondition{{Name: "by-the-guard",
		Expression: "request.userInfo.username == '" + framework.GuardServiceAccount + "'"}}, p.Spec.MatchConditions)
	assert.Len(t, p.Spec.Validations, 4, "the name, the delete of the arming binding, the role, the subjects")

	b := as[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, m.find(t, "ValidatingAdmissionPolicyBinding", "rollout-guard-arming"))
	assert.Equal(t, "rollout-guard-arming", b.Spec.PolicyName)
	assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, b.Spec.ValidationActions)
	assert.Nil(t, b.Spec.MatchResources, "the policy's own constraints select what it judges")
}
