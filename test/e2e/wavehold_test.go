package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/waves"
)

// waveSoak is the package guard's --wave-soak (main_test.go): long enough
// that a Cluster done during the test has not soaked, whatever the
// machine's speed; a Cluster done two hours before has.
const waveSoak = "1h"

// runtimeSDK calls the guard's Runtime Extension as Cluster API's runtime
// client does (internal/runtime/client, httpCall): a POST over TLS,
// verified with the CA an ExtensionConfig's caBundle holds, of the
// request's JSON with its apiVersion and kind set, with the handler's
// timeout in the query, at the path catalog.GVHToPath gives for the hook
// and the handler name discovery announced.
type runtimeSDK struct {
	t    *testing.T
	http *http.Client
	base string
}

func newRuntimeSDK(t *testing.T) *runtimeSDK {
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(env.GuardCABundle()))
	return &runtimeSDK{t: t, base: env.GuardURL(),
		http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// call posts body to path and decodes the 200 answer into out, strictly.
func (r *runtimeSDK) call(path string, timeout time.Duration, body []byte, out any) {
	r.t.Helper()
	u, err := url.Parse(r.base + path)
	require.NoError(r.t, err)
	u.RawQuery = url.Values{"timeout": {timeout.String()}}.Encode()
	resp, err := r.http.Post(u.String(), "application/json", bytes.NewReader(body))
	require.NoError(r.t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(r.t, err)
	require.Equal(r.t, http.StatusOK, resp.StatusCode, "%s: %s", path, answer)
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.DisallowUnknownFields()
	require.NoError(r.t, dec.Decode(out), "%s", answer)
}

// discover makes Cluster API's discovery call and returns the path and
// timeout of the one BeforeClusterUpgrade handler it announces.
func (r *runtimeSDK) discover() (string, time.Duration) {
	r.t.Helper()
	discovery := catalog.GroupVersionHook{Group: runtimehooksv1.GroupVersion.Group, Version: runtimehooksv1.GroupVersion.Version, Hook: "Discovery"}
	req, err := json.Marshal(&runtimehooksv1.DiscoveryRequest{TypeMeta: metav1.TypeMeta{APIVersion: runtimehooksv1.GroupVersion.String(), Kind: "DiscoveryRequest"}})
	require.NoError(r.t, err)
	var resp runtimehooksv1.DiscoveryResponse
	r.call(catalog.GVHToPath(discovery, ""), 10*time.Second, req, &resp)
	require.Equal(r.t, runtimehooksv1.ResponseStatusSuccess, resp.Status, resp.Message)
	assert.Equal(r.t, "DiscoveryResponse", resp.Kind)
	require.Len(r.t, resp.Handlers, 1)
	h := resp.Handlers[0]
	require.Equal(r.t, "BeforeClusterUpgrade", h.RequestHook.Hook)
	require.NotNil(r.t, h.FailurePolicy)
	assert.Equal(r.t, runtimehooksv1.FailurePolicyIgnore, *h.FailurePolicy)
	require.NotNil(r.t, h.TimeoutSeconds)
	gv, err := schema.ParseGroupVersion(h.RequestHook.APIVersion)
	require.NoError(r.t, err)
	cat := catalog.New()
	require.NoError(r.t, runtimehooksv1.AddToCatalog(cat))
	gvh := catalog.GroupVersionHook{Group: gv.Group, Version: gv.Version, Hook: h.RequestHook.Hook}
	require.True(r.t, cat.IsHookRegistered(gvh), "Cluster API's catalog knows %v", gvh)
	return catalog.GVHToPath(gvh, h.Name), time.Duration(*h.TimeoutSeconds) * time.Second
}

// beforeClusterUpgrade asks whether cluster (as the topology controller
// holds it) may start upgrading from one version to another.
func (r *runtimeSDK) beforeClusterUpgrade(path string, timeout time.Duration, cluster *clusterv1.Cluster, from, to string) runtimehooksv1.BeforeClusterUpgradeResponse {
	r.t.Helper()
	req := &runtimehooksv1.BeforeClusterUpgradeRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: runtimehooksv1.GroupVersion.String(), Kind: "BeforeClusterUpgradeRequest"},
		Cluster:  *cluster, FromKubernetesVersion: from, ToKubernetesVersion: to,
		ControlPlaneUpgrades: []runtimehooksv1.UpgradeStepInfo{{Version: to}}, WorkersUpgrades: []runtimehooksv1.UpgradeStepInfo{{Version: to}},
	}
	body, err := json.Marshal(req)
	require.NoError(r.t, err)
	var resp runtimehooksv1.BeforeClusterUpgradeResponse
	r.call(path, timeout, body, &resp)
	assert.Equal(r.t, "BeforeClusterUpgradeResponse", resp.Kind)
	return resp
}

// waveCluster creates topology Cluster namespace/name at version with the
// wave label set to wave ("" for none) and returns it as stored.
func waveCluster(t *testing.T, namespace, name, wave, version string) *clusterv1.Cluster {
	t.Helper()
	b := builder.Cluster(namespace, name).WithTopology("quick-start", version)
	if wave != "" {
		b = b.WithLabels(map[string]string{waves.Label: wave})
	}
	c := b.Build()
	require.NoError(t, env.Client.Create(t.Context(), c))
	return c
}

// setProgress writes, through the status subresource as Cluster API's
// controllers do, the conditions of a Cluster whose rollout is done since
// doneAt, but for the one condition changed by notDone (when not nil).
func setProgress(t *testing.T, c *clusterv1.Cluster, doneAt time.Time, notDone *metav1.Condition) {
	t.Helper()
	require.NoError(t, env.Client.Get(t.Context(), client.ObjectKeyFromObject(c), c))
	c.Status.Conditions = nil
	for _, next := range waves.DoneConditions(c.Generation, doneAt) {
		if notDone != nil && notDone.Type == next.Type {
			next = *notDone
			next.ObservedGeneration, next.LastTransitionTime = c.Generation, metav1.NewTime(doneAt)
		}
		c.Status.Conditions = append(c.Status.Conditions, next)
	}
	require.NoError(t, env.Client.Status().Update(t.Context(), c))
}

// TestWaveHoldThroughTheGuardsPort calls the package's guard (started with
// --wave-hold, --wave-soak=1h) as Cluster API's runtime client calls a
// Runtime Extension: discovery, then the BeforeClusterUpgrade handler it
// announces, for Clusters of a real API server whose conditions are written
// through the status subresource. A wave-1 Cluster is held while the wave-0
// Cluster moving to the same version is rolling out, with a message that
// names it and its condition, then while it soaks, and let go once it has
// soaked; a wave-2 Cluster is then held by the wave-1 one; Clusters
// without a wave, with a label that is not one, or upgrading to another
// version are not held; another namespace's waves are its own. The wave
// the guard goes by is the live Cluster's, not the request's. An
// unreadable request gets a Failure. Every answer is counted.
func TestWaveHoldThroughTheGuardsPort(t *testing.T) {
	ctx := t.Context()
	const from, to = "v1.34.2", "v1.35.2"
	ns := fmt.Sprintf("e2e-%d-waves", nsCounter.Add(1))
	other := ns + "-other"
	for _, name := range []string{ns, other} {
		require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	}
	token, err := framework.MetricsReaderToken(ctx, env.Client, ns+"-metrics", time.Hour)
	require.NoError(t, err)
	answers := func() map[string]float64 {
		var samples []framework.Sample
		require.Eventually(t, func() bool {
			var err error
			samples, err = framework.ScrapeMetrics(ctx, env.GuardMetricsURL(), token)
			return err == nil // the token's binding takes a moment to take effect
		}, 30*time.Second, 200*time.Millisecond)
		return framework.SumBy(samples, "rollout_guard_wave_hold_answers_total", nil, "outcome")
	}
	countedBefore := answers()

	canary := waveCluster(t, ns, "demo-cc", "0", to)
	second := waveCluster(t, ns, "demo-cc-2", "1", to)
	third := waveCluster(t, ns, "demo-cc-3", "2", to)
	loner := waveCluster(t, ns, "loner", "", to)
	odd := waveCluster(t, ns, "odd", "canary", to)
	otherCanary := waveCluster(t, other, "demo-cc", "0", to)
	otherSecond := waveCluster(t, other, "demo-cc-2", "1", to)
	rollingOut := &metav1.Condition{Type: clusterv1.ClusterControlPlaneMachinesUpToDateCondition, Status: metav1.ConditionFalse, Reason: "NotUpToDate",
		Message: "* Machine demo-cc-x7k2p: Version v1.34.2, v1.35.2 required"}
	longAgo := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	setProgress(t, canary, longAgo, rollingOut)
	setProgress(t, otherCanary, longAgo, nil)

	sdk := newRuntimeSDK(t)
	path, timeout := sdk.discover()
	assert.Equal(t, "/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/wave-hold", path)

	// Wave 0 is rolling out: wave 1 waits, naming it.
	resp := sdk.beforeClusterUpgrade(path, timeout, second, from, to)
	assert.Equal(t, runtimehooksv1.ResponseStatusSuccess, resp.Status)
	assert.EqualValues(t, 10, resp.RetryAfterSeconds)
	assert.Equal(t, "held by rollout-guard: wave 0 is not done upgrading to v1.35.2: cluster demo-cc: ControlPlaneMachinesUpToDate is False (NotUpToDate): * Machine demo-cc-x7k2p: Version v1.34.2, v1.35.2 required", resp.Message)
	t.Logf("a held answer: retryAfterSeconds %d, message %q", resp.RetryAfterSeconds, resp.Message)
	// So does wave 2, for the earliest wave first.
	resp = sdk.beforeClusterUpgrade(path, timeout, third, from, to)
	assert.EqualValues(t, 10, resp.RetryAfterSeconds)
	assert.Contains(t, resp.Message, "held by rollout-guard: wave 0 is not done upgrading to v1.35.2: cluster demo-cc: ")
	assert.Contains(t, resp.Message, "(and 1 more cluster of an earlier wave)", "demo-cc-2, with no conditions yet")
	// The request's own labels are not what counts: the live Cluster is in wave 1.
	claimed := second.DeepCopy()
	claimed.Labels = map[string]string{waves.Label: "0"}
	resp = sdk.beforeClusterUpgrade(path, timeout, claimed, from, to)
	assert.EqualValues(t, 10, resp.RetryAfterSeconds, "held: the live Cluster's wave, not the request's")

	// Not held: no wave, a label that is not a wave (and says so), another
	// version than wave 0's.
	for _, tc := range []struct {
		cluster *clusterv1.Cluster
		to      string
		message string
	}{
		{loner, to, "not held by rollout-guard: cluster " + ns + "/loner carries no label rollout-guard.io/wave"},
		{odd, to, "not held by rollout-guard: cluster " + ns + `/odd is in no wave: label rollout-guard.io/wave="canary" is not a wave: set it to 0, 1, 2… (0 goes first)`},
		{second, "v1.35.3", "not held by rollout-guard: no cluster of an earlier wave than 1 in namespace " + ns + " is upgrading to v1.35.3 or soaking there"},
	} {
		resp := sdk.beforeClusterUpgrade(path, timeout, tc.cluster, from, tc.to)
		assert.Equal(t, runtimehooksv1.ResponseStatusSuccess, resp.Status, tc.cluster.Name)
		assert.Zero(t, resp.RetryAfterSeconds, tc.cluster.Name)
		assert.Equal(t, tc.message, resp.Message)
	}
	// The other namespace's wave 0 is done long since: its wave 1 goes,
	// whatever this namespace's wave 0 does.
	resp = sdk.beforeClusterUpgrade(path, timeout, otherSecond, from, to)
	assert.Zero(t, resp.RetryAfterSeconds, resp.Message)

	// Wave 0 done just now: wave 1 waits for the soak.
	setProgress(t, canary, time.Now().Truncate(time.Second), nil)
	resp = sdk.beforeClusterUpgrade(path, timeout, second, from, to)
	assert.EqualValues(t, 30, resp.RetryAfterSeconds, "asked again after 30s at most while an hour's soak runs")
	assert.Regexp(t, regexp.MustCompile(`^held by rollout-guard: wave 0 has not soaked yet at v1\.35\.2: cluster demo-cc: done \d+s ago, soak 1h0m0s$`), resp.Message)
	t.Logf("a held answer: retryAfterSeconds %d, message %q", resp.RetryAfterSeconds, resp.Message)

	// Soaked: wave 1 goes; wave 2 now waits for wave 1, which Cluster API
	// has reported nothing of yet.
	setProgress(t, canary, longAgo, nil)
	resp = sdk.beforeClusterUpgrade(path, timeout, second, from, to)
	assert.Equal(t, runtimehooksv1.ResponseStatusSuccess, resp.Status)
	assert.Zero(t, resp.RetryAfterSeconds, resp.Message)
	assert.Equal(t, "not held by rollout-guard: no cluster of an earlier wave than 1 in namespace "+ns+" is upgrading to v1.35.2 or soaking there", resp.Message)
	resp = sdk.beforeClusterUpgrade(path, timeout, third, from, to)
	assert.EqualValues(t, 10, resp.RetryAfterSeconds)
	assert.Equal(t, "held by rollout-guard: wave 1 is not done upgrading to v1.35.2: cluster demo-cc-2: Cluster API has not reported TopologyReconciled yet", resp.Message)

	// A request the guard cannot read: a Failure, which holds nothing.
	var failure runtimehooksv1.BeforeClusterUpgradeResponse
	sdk.call(path, timeout, []byte(`{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"BeforeClusterUpgradeRequest","cluster":{}}`), &failure)
	assert.Equal(t, runtimehooksv1.ResponseStatusFailure, failure.Status)
	assert.Zero(t, failure.RetryAfterSeconds)
	assert.Equal(t, "rollout-guard cannot read this BeforeClusterUpgrade request: cluster.metadata.namespace and .name and toKubernetesVersion required", failure.Message)

	// Every answer counted by outcome.
	counted := answers()
	for outcome, want := range map[string]float64{"held": 5, "released": 3, "no-wave": 1, "bad-label": 1, "bad-request": 1, "failed-open": 0} {
		assert.InDelta(t, want, counted[outcome]-countedBefore[outcome], 0, "outcome %s", outcome)
	}
}
