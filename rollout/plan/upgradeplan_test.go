package plan

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// plan asks a class's upgrade-plan extension as Cluster API does: a POST of
// a GenerateUpgradePlanRequest to the handler's path under the
// ExtensionConfig's URL, over TLS trusting its caBundle, with its settings;
// the answer's steps are the plan's. An extension behind a Service, one not
// discovered and one answering Failure are errors naming why.
func TestAskUpgradePlanExtension(t *testing.T) {
	var got *runtimehooksv1.GenerateUpgradePlanRequest
	answer := runtimehooksv1.GenerateUpgradePlanResponse{
		CommonResponse:       runtimehooksv1.CommonResponse{Status: runtimehooksv1.ResponseStatusSuccess},
		ControlPlaneUpgrades: []runtimehooksv1.UpgradeStep{{Version: "v1.33.9"}, {Version: "v1.34.11"}, {Version: "v1.35.2"}},
		WorkersUpgrades:      []runtimehooksv1.UpgradeStep{{Version: "v1.35.2"}},
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/ext/hooks.runtime.cluster.x-k8s.io/v1alpha1/generateupgradeplan/generate-upgrade-plan" {
			http.NotFound(w, r)
			return
		}
		got = &runtimehooksv1.GenerateUpgradePlanRequest{}
		if err := json.NewDecoder(r.Body).Decode(got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(answer)
	}))
	defer srv.Close()
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	scheme := runtime.NewScheme()
	require.NoError(t, runtimev1.AddToScheme(scheme))
	handler := runtimev1.ExtensionHandler{
		Name:        "generate-upgrade-plan.plans",
		RequestHook: runtimev1.GroupVersionHook{APIVersion: runtimehooksv1.GroupVersion.String(), Hook: "GenerateUpgradePlan"},
	}
	extension := func(name string, cc runtimev1.ClientConfig, handlers ...runtimev1.ExtensionHandler) *runtimev1.ExtensionConfig {
		return &runtimev1.ExtensionConfig{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       runtimev1.ExtensionConfigSpec{ClientConfig: cc, Settings: map[string]string{"mode": "test"}},
			Status:     runtimev1.ExtensionConfigStatus{Handlers: handlers},
		}
	}
	serviceHandler := handler
	serviceHandler.Name = "generate-upgrade-plan.in-cluster"
	cl := &core.Clients{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		extension("plans", runtimev1.ClientConfig{URL: srv.URL + "/ext", CABundle: caBundle}, handler),
		extension("in-cluster", runtimev1.ClientConfig{Service: runtimev1.ServiceReference{Namespace: "ext", Name: "plans"}, CABundle: caBundle}, serviceHandler),
		extension("undiscovered", runtimev1.ClientConfig{URL: srv.URL + "/ext", CABundle: caBundle}),
	).Build()}
	planned := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo"}}
	planned.Spec.Topology.Version = "v1.35.2"
	planned.Status.Phase = "Provisioned"
	ctx := context.Background()

	cp, workers, err := askUpgradePlanExtension(ctx, cl, "generate-upgrade-plan.plans", planned, "v1.32.4", "v1.32.4")
	require.NoError(t, err)
	assert.Equal(t, []string{"v1.33.9", "v1.34.11", "v1.35.2"}, cp)
	assert.Equal(t, []string{"v1.35.2"}, workers)
	require.NotNil(t, got)
	assert.Equal(t, "GenerateUpgradePlanRequest", got.Kind)
	assert.Equal(t, runtimehooksv1.GroupVersion.String(), got.APIVersion)
	assert.Equal(t, "v1.32.4", got.FromControlPlaneKubernetesVersion)
	assert.Equal(t, "v1.32.4", got.FromWorkersKubernetesVersion)
	assert.Equal(t, "v1.35.2", got.ToKubernetesVersion)
	assert.Equal(t, "demo", got.Cluster.Name)
	assert.Empty(t, got.Cluster.Status.Phase, "the Cluster is sent without its status")
	assert.Equal(t, map[string]string{"mode": "test"}, got.Settings)

	_, _, err = askUpgradePlanExtension(ctx, cl, "generate-upgrade-plan.in-cluster", planned, "v1.32.4", "v1.32.4")
	assert.ErrorContains(t, err, "ExtensionConfig in-cluster: the extension is served by Service ext/plans, which is only reachable from inside the management cluster")
	_, _, err = askUpgradePlanExtension(ctx, cl, "generate-upgrade-plan.undiscovered", planned, "v1.32.4", "v1.32.4")
	assert.ErrorContains(t, err, "ExtensionConfig undiscovered lists no GenerateUpgradePlan handler generate-upgrade-plan.undiscovered")
	_, _, err = askUpgradePlanExtension(ctx, cl, "generate-upgrade-plan.missing", planned, "v1.32.4", "v1.32.4")
	assert.ErrorContains(t, err, "reading ExtensionConfig missing")

	answer = runtimehooksv1.GenerateUpgradePlanResponse{CommonResponse: runtimehooksv1.CommonResponse{Status: runtimehooksv1.ResponseStatusFailure, Message: "no path to v1.35.2"}}
	_, _, err = askUpgradePlanExtension(ctx, cl, "generate-upgrade-plan.plans", planned, "v1.32.4", "v1.32.4")
	assert.ErrorContains(t, err, "generate-upgrade-plan.plans answered Failure: no path to v1.35.2")
}

func TestExtensionPlanProblem(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cp, workers []string
		want        string
	}{
		{"a chain to the target", []string{"v1.33.12", "v1.34.11", "v1.35.2"}, []string{"v1.35.2"}, ""},
		{"a plan that stops short of the target", []string{"v1.33.12", "v1.34.11", "v1.35.0"}, []string{"v1.35.0"},
			"invalid ControlPlane upgrade plan: control plane upgrade plan must end with version v1.35.2, ends with v1.35.0 instead"},
		{"a skipped minor", []string{"v1.34.11", "v1.35.2"}, []string{"v1.35.2"},
			"invalid ControlPlane upgrade plan: item 0; expecting a version with minor 32 or 33, found version v1.34.11"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := extensionPlanProblem("v1.35.2", "v1.32.4", "v1.32.4", tc.cp, tc.workers); got != tc.want {
				t.Fatalf("extensionPlanProblem = %q, want %q", got, tc.want)
			}
		})
	}
}
