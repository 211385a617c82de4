package e2e

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

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
// within seconds, not at the admission timeout — and the guard must stay
// ready and keep judging every other cluster.
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
	start := time.Now()
	require.NoError(t, c.Create(ctx, md), "an edit of a cluster whose control plane the guard cannot read is allowed")
	assert.Less(t, time.Since(start), 4*time.Second, "the guard waited for an informer that can never fill")
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
