package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestControlPlaneTheGuardMayNotRead points a Cluster at a control-plane
// kind outside the guard's ClusterRole. An edit of that cluster's worker
// pool must be allowed with a warning that says which right is missing —
// the guard's own answer, not a call that timed out and failed open, as
// the API server counts them — and the guard must stay ready and keep
// judging every other cluster.
func TestControlPlaneTheGuardMayNotRead(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-unreadable"}}
	require.NoError(t, env.Client.Create(ctx, ns))
	// A control-plane kind the guard's ClusterRole does not grant (any served kind will do).
	cluster := builder.Cluster(ns.Name, "other").WithControlPlaneRef(builder.InfrastructureGroup, "DevCluster", "other-cp").Build()
	require.NoError(t, env.Client.Create(ctx, cluster))
	md := builder.MachineDeployment(ns.Name, "other-md").WithClusterName("other").WithReplicas(1).
		WithSelector(map[string]string{"pool": "a"}).WithVersion("v1.34.2").
		WithBootstrapDataSecret("bootstrap").WithInfrastructureTemplate("other").Build()
	c, warnings := warningClient(t, "")
	before := webhookCalls(t)
	require.NoError(t, c.Create(ctx, md), "an edit of a cluster whose control plane the guard cannot read is allowed")
	// A guard that waited for an informer that can never fill would outlast
	// the webhook's timeout: the create would be admitted without its
	// answer (failurePolicy Ignore), counted as a call that failed open.
	after := webhookCalls(t)
	assert.Equal(t, before.failedOpen, after.failedOpen, "calls of the guard's webhooks that failed open (by webhook)")
	assert.Greater(t, after.answered[mdValidatingWebhook], before.answered[mdValidatingWebhook], "calls of %s the guard answered", mdValidatingWebhook)
	require.Len(t, warnings.texts, 1)
	assert.Contains(t, warnings.texts[0], "rollout-guard: version skew of MachineDeployment e2e-unreadable/other-md not checked: control plane DevCluster e2e-unreadable/other-cp could not be read within 2s")
	assert.Contains(t, warnings.texts[0], "grant rollout-guard read access to devclusters.infrastructure.cluster.x-k8s.io through a ClusterRole labelled rollout-guard.io/aggregate-to-control-planes=true")

	// The guard stays ready, and still refuses what it should elsewhere.
	resp, err := http.Get(env.GuardReadyzURL())
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "one unreadable control plane made the guard unready")
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	err = edit(t, mergePatch, w.MD, "v1.35.0", mdVersion...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "[rule WorkerNewerThanControlPlane]")
}

// mdValidatingWebhook is the guard's validating webhook of created MachineDeployments.
const mdValidatingWebhook = "validate-create.machinedeployment.rollout-guard.io"

// guardWebhookCalls are the API server's counts of its calls of the guard's
// webhooks, by webhook name.
type guardWebhookCalls struct {
	// answered: calls answered with HTTP 200 (admitted or refused).
	answered map[string]float64
	// failedOpen: calls that failed (a timeout, a lost connection) and
	// were ignored under failurePolicy Ignore.
	failedOpen map[string]float64
}

// webhookCalls reads the API server's counts of its calls of the guard's webhooks.
func webhookCalls(t *testing.T) guardWebhookCalls {
	t.Helper()
	samples, err := framework.APIServerMetrics(context.Background(), env.Config)
	require.NoError(t, err)
	guards := func(m map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for name, n := range m {
			if strings.HasSuffix(name, ".rollout-guard.io") {
				out[name] = n
			}
		}
		return out
	}
	return guardWebhookCalls{
		answered:   guards(framework.SumBy(samples, "apiserver_admission_webhook_request_total", map[string]string{"code": "200"}, "name")),
		failedOpen: guards(framework.SumBy(samples, "apiserver_admission_webhook_fail_open_count", nil, "name")),
	}
}

// warningRecorder keeps the warnings the API server returns.
type warningRecorder struct {
	mu    sync.Mutex
	texts []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

// warningClient returns a client of the API server whose warnings are kept
// in the returned recorder; with a user, it impersonates that user in
// groups.
func warningClient(t *testing.T, user string, groups ...string) (client.Client, *warningRecorder) {
	t.Helper()
	warnings := &warningRecorder{}
	cfg := rest.CopyConfig(env.Config)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	}
	cfg.WarningHandler = warnings
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	return c, warnings
}
