package install

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// registeredWebhook is what decides, for one webhook of the guard, which
// requests reach it and what the API server does when the guard cannot
// answer.
type registeredWebhook struct {
	// resource is "group/resource" of its rules.
	resource string
	// operations are the operations of its rules.
	operations []admissionregistrationv1.OperationType
	// failurePolicy is its failurePolicy; nil when the field is not set
	// (the API server then defaults it to Fail).
	failurePolicy *admissionregistrationv1.FailurePolicyType
}

// registeredWebhooks returns, by webhook name, the webhooks of the
// validating and mutating configurations given: their rules' resources and
// operations, and their failure policy. A webhook whose rules name more
// than one resource fails the test.
func registeredWebhooks(t *testing.T, validating []admissionregistrationv1.ValidatingWebhookConfiguration, mutating []admissionregistrationv1.MutatingWebhookConfiguration) map[string]registeredWebhook {
	t.Helper()
	out := map[string]registeredWebhook{}
	add := func(config, name string, rules []admissionregistrationv1.RuleWithOperations, policy *admissionregistrationv1.FailurePolicyType) {
		_, dup := out[name]
		require.False(t, dup, "webhook %s registered twice", name)
		w := registeredWebhook{failurePolicy: policy}
		var resources []string
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					resources = append(resources, g+"/"+res)
				}
			}
			for _, op := range r.Operations {
				if !slices.Contains(w.operations, op) {
					w.operations = append(w.operations, op)
				}
			}
		}
		slices.Sort(resources)
		resources = slices.Compact(resources)
		require.Len(t, resources, 1, "%s webhook %s: its rules name one resource", config, name)
		w.resource = resources[0]
		slices.Sort(w.operations)
		out[name] = w
	}
	for _, cfg := range validating {
		for _, w := range cfg.Webhooks {
			add(cfg.Name, w.Name, w.Rules, w.FailurePolicy)
		}
	}
	for _, cfg := range mutating {
		for _, w := range cfg.Webhooks {
			add(cfg.Name, w.Name, w.Rules, w.FailurePolicy)
		}
	}
	return out
}

// webhooksOf returns the registered webhooks of the configurations in m.
func webhooksOf(t *testing.T, m manifest) map[string]registeredWebhook {
	t.Helper()
	var validating []admissionregistrationv1.ValidatingWebhookConfiguration
	var mutating []admissionregistrationv1.MutatingWebhookConfiguration
	for _, u := range m.ofKind("ValidatingWebhookConfiguration") {
		validating = append(validating, *as[admissionregistrationv1.ValidatingWebhookConfiguration](t, u))
	}
	for _, u := range m.ofKind("MutatingWebhookConfiguration") {
		mutating = append(mutating, *as[admissionregistrationv1.MutatingWebhookConfiguration](t, u))
	}
	return registeredWebhooks(t, validating, mutating)
}

// TestWebhookFailurePolicyPerOperation pins, for every webhook the guard
// ships, the operations that reach it and its failurePolicy: a webhook for
// UPDATE fails closed (Fail: a policed change never passes unjudged while
// the guard is down), a webhook for CREATE only fails open (Ignore: Cluster
// API and operators can still create control planes, worker pools and
// Clusters during an outage; the reconciler records what was created as
// adopted). One webhook polices nothing: the owner label of
// RolloutRevisions, set to follow their owner reference on CREATE and
// UPDATE (clusterctl move recreates owners under new UIDs), fails open
// (Ignore: a move never fails on it; the guard repairs the labels it missed
// when it starts). The table is checked against config/webhook (the registration
// the tests and the sandbox use), config/default, config/without-certmanager
// and what the test environment registered in its API server, so that
// neither an edit of the manifests nor an overlay can flip a policy, add an
// operation or add a webhook without this table saying so.
func TestWebhookFailurePolicyPerOperation(t *testing.T) {
	const (
		create = admissionregistrationv1.Create
		update = admissionregistrationv1.Update
		fail   = admissionregistrationv1.Fail
		ignore = admissionregistrationv1.Ignore

		rolloutRevisions = "rollout-guard.io/rolloutrevisions"
	)
	type row struct {
		resource   string
		operations []admissionregistrationv1.OperationType
		policy     admissionregistrationv1.FailurePolicyType
	}
	want := map[string]row{
		// ValidatingWebhookConfiguration rollout-guard-validating
		"validate.machinedeployment.rollout-guard.io":          {"cluster.x-k8s.io/machinedeployments", []admissionregistrationv1.OperationType{update}, fail},
		"validate-create.machinedeployment.rollout-guard.io":   {"cluster.x-k8s.io/machinedeployments", []admissionregistrationv1.OperationType{create}, ignore},
		"validate.machinepool.rollout-guard.io":                {"cluster.x-k8s.io/machinepools", []admissionregistrationv1.OperationType{update}, fail},
		"validate-create.machinepool.rollout-guard.io":         {"cluster.x-k8s.io/machinepools", []admissionregistrationv1.OperationType{create}, ignore},
		"validate.kubeadmcontrolplane.rollout-guard.io":        {"controlplane.cluster.x-k8s.io/kubeadmcontrolplanes", []admissionregistrationv1.OperationType{update}, fail},
		"validate-create.kubeadmcontrolplane.rollout-guard.io": {"controlplane.cluster.x-k8s.io/kubeadmcontrolplanes", []admissionregistrationv1.OperationType{create}, ignore},
		"validate.cluster.rollout-guard.io":                    {"cluster.x-k8s.io/clusters", []admissionregistrationv1.OperationType{update}, fail},
		"validate-create.cluster.rollout-guard.io":             {"cluster.x-k8s.io/clusters", []admissionregistrationv1.OperationType{create}, ignore},
		"validate.machineset.rollout-guard.io":                 {"cluster.x-k8s.io/machinesets", []admissionregistrationv1.OperationType{update}, fail},
		"validate-create.machineset.rollout-guard.io":          {"cluster.x-k8s.io/machinesets", []admissionregistrationv1.OperationType{create}, ignore},
		"validate.machine.rollout-guard.io":                    {"cluster.x-k8s.io/machines", []admissionregistrationv1.OperationType{update}, fail},
		"validate-create.machine.rollout-guard.io":             {"cluster.x-k8s.io/machines", []admissionregistrationv1.OperationType{create}, ignore},
		// MutatingWebhookConfiguration rollout-guard-mutating
		"stamp.machinedeployment.rollout-guard.io":          {"cluster.x-k8s.io/machinedeployments", []admissionregistrationv1.OperationType{update}, fail},
		"stamp-create.machinedeployment.rollout-guard.io":   {"cluster.x-k8s.io/machinedeployments", []admissionregistrationv1.OperationType{create}, ignore},
		"stamp.machinepool.rollout-guard.io":                {"cluster.x-k8s.io/machinepools", []admissionregistrationv1.OperationType{update}, fail},
		"stamp-create.machinepool.rollout-guard.io":         {"cluster.x-k8s.io/machinepools", []admissionregistrationv1.OperationType{create}, ignore},
		"stamp.kubeadmcontrolplane.rollout-guard.io":        {"controlplane.cluster.x-k8s.io/kubeadmcontrolplanes", []admissionregistrationv1.OperationType{update}, fail},
		"stamp-create.kubeadmcontrolplane.rollout-guard.io": {"controlplane.cluster.x-k8s.io/kubeadmcontrolplanes", []admissionregistrationv1.OperationType{create}, ignore},
		"stamp.clusterclass.rollout-guard.io":               {"cluster.x-k8s.io/clusterclasses", []admissionregistrationv1.OperationType{update}, fail},
		"stamp-create.clusterclass.rollout-guard.io":        {"cluster.x-k8s.io/clusterclasses", []admissionregistrationv1.OperationType{create}, ignore},
		"stamp.cluster.rollout-guard.io":                    {"cluster.x-k8s.io/clusters", []admissionregistrationv1.OperationType{update}, fail},
		"stamp-create.cluster.rollout-guard.io":             {"cluster.x-k8s.io/clusters", []admissionregistrationv1.OperationType{create}, ignore},
		"owner-label.rolloutrevision.rollout-guard.io":      {rolloutRevisions, []admissionregistrationv1.OperationType{create, update}, ignore},
		"validate-record.rolloutrevision.rollout-guard.io":  {rolloutRevisions, []admissionregistrationv1.OperationType{update}, fail},
	}
	// The table itself keeps the rule it pins: for the policed kinds,
	// CREATE only → Ignore, UPDATE → Fail, never both operations in one
	// webhook; the guard's own history store Ignore but for the record
	// guard, which refuses updates of a record's number, owner and stamps
	// by anyone but the guard (the history is the policy's memory).
	for name, w := range want {
		switch {
		case w.resource == rolloutRevisions && name == "validate-record.rolloutrevision.rollout-guard.io":
			require.Equal(t, fail, w.policy, "table row %s", name)
		case w.resource == rolloutRevisions:
			require.Equal(t, ignore, w.policy, "table row %s", name)
		case slices.Equal(w.operations, []admissionregistrationv1.OperationType{create}):
			require.Equal(t, ignore, w.policy, "table row %s", name)
		case slices.Equal(w.operations, []admissionregistrationv1.OperationType{update}):
			require.Equal(t, fail, w.policy, "table row %s", name)
		default:
			require.Failf(t, "table row with operations other than CREATE alone or UPDATE alone", "%s: %v", name, w.operations)
		}
	}

	withoutCertManager, _, _ := buildWithoutCertManager(t)
	registrations := []struct {
		source string
		read   func(t *testing.T) map[string]registeredWebhook
	}{
		{"config/webhook", func(t *testing.T) map[string]registeredWebhook { return webhooksOf(t, build(t, "config/webhook")) }},
		{"config/default", func(t *testing.T) map[string]registeredWebhook { return webhooksOf(t, build(t, "config/default")) }},
		{"config/without-certmanager", func(t *testing.T) map[string]registeredWebhook { return webhooksOf(t, withoutCertManager) }},
		{"the test environment's API server", func(t *testing.T) map[string]registeredWebhook {
			v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			require.NoError(t, env.Client.Get(t.Context(), client.ObjectKey{Name: validatingName}, v))
			m := &admissionregistrationv1.MutatingWebhookConfiguration{}
			require.NoError(t, env.Client.Get(t.Context(), client.ObjectKey{Name: mutatingName}, m))
			return registeredWebhooks(t, []admissionregistrationv1.ValidatingWebhookConfiguration{*v}, []admissionregistrationv1.MutatingWebhookConfiguration{*m})
		}},
	}
	for _, r := range registrations {
		t.Run(r.source, func(t *testing.T) {
			got := r.read(t)
			assert.ElementsMatch(t, keys(want), keys(got), "the webhooks registered: every one has a row in this table")
			for name, w := range want {
				g, ok := got[name]
				if !assert.True(t, ok, "webhook %s is registered", name) {
					continue
				}
				assert.Equal(t, w.resource, g.resource, "webhook %s: resource", name)
				assert.Equal(t, w.operations, g.operations, "webhook %s: operations", name)
				if assert.NotNil(t, g.failurePolicy, "webhook %s: failurePolicy set explicitly, not left to the API server's default", name) {
					assert.Equal(t, w.policy, *g.failurePolicy, "webhook %s: failurePolicy for %v", name, w.operations)
				}
			}
		})
	}
}
