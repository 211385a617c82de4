package upgradehold

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/rollout-guard/rollout-guard/waves"
)

// The handlers run here over TLS against an in-memory client; the guard's
// end-to-end tests (test/e2e) call them on the guard's own port with
// Clusters of a real API server.

// mux registers on an http.ServeMux, as the guard's webhook server does.
type mux struct{ *http.ServeMux }

func (m mux) Register(path string, h http.Handler) { m.Handle(path, h) }

// serve starts the extension on a TLS server reading clusters through c and
// returns the server's client and URL.
func serve(t *testing.T, e *Extension) (*http.Client, string) {
	t.Helper()
	m := mux{http.NewServeMux()}
	e.Register(m)
	srv := httptest.NewTLSServer(m)
	t.Cleanup(srv.Close)
	return srv.Client(), srv.URL
}

// newReader is an in-memory client holding clusters, whose List goes
// through funcs.
func newReader(t *testing.T, funcs interceptor.Funcs, clusters ...clusterv1.Cluster) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clusterv1.AddToScheme(s))
	b := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(funcs)
	for i := range clusters {
		b = b.WithObjects(&clusters[i])
	}
	return b.Build()
}

// post sends body to url+path and returns the answer's status and body.
func post(t *testing.T, c *http.Client, url string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// upgradeRequest is a BeforeClusterUpgrade request as Cluster API's
// runtime client sends it: apiVersion and kind set, the Cluster as the
// topology controller holds it.
func upgradeRequest(t *testing.T, cluster clusterv1.Cluster, toVersion string) []byte {
	t.Helper()
	req := &runtimehooksv1.BeforeClusterUpgradeRequest{TypeMeta: typeMeta("BeforeClusterUpgradeRequest"),
		Cluster: cluster, FromKubernetesVersion: from, ToKubernetesVersion: toVersion,
		ControlPlaneUpgrades: []runtimehooksv1.UpgradeStepInfo{{Version: toVersion}}, WorkersUpgrades: []runtimehooksv1.UpgradeStepInfo{{Version: toVersion}}}
	body, err := json.Marshal(req)
	require.NoError(t, err)
	return body
}

// callHook posts body to the BeforeClusterUpgrade handler at url and
// decodes its answer strictly.
func callHook(t *testing.T, c *http.Client, url string, body []byte) runtimehooksv1.BeforeClusterUpgradeResponse {
	t.Helper()
	status, body := post(t, c, url+BeforeClusterUpgradePath, body)
	require.Equal(t, http.StatusOK, status, "Cluster API reads only 200 answers: %s", body)
	var resp runtimehooksv1.BeforeClusterUpgradeResponse
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&resp), "%s", body)
	assert.Equal(t, typeMeta("BeforeClusterUpgradeResponse"), resp.TypeMeta)
	return resp
}

func TestPathsAreClusterAPIs(t *testing.T) {
	// As Cluster API's runtime client calls them (catalog.GVHToPath), for
	// a handler discovered as wave-hold.
	assert.Equal(t, "/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery", DiscoveryPath)
	assert.Equal(t, "/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/wave-hold", BeforeClusterUpgradePath)
}

func TestDiscovery(t *testing.T) {
	c, url := serve(t, &Extension{Reader: newReader(t, interceptor.Funcs{}), Log: logr.Discard()})
	req, err := json.Marshal(&runtimehooksv1.DiscoveryRequest{TypeMeta: typeMeta("DiscoveryRequest")})
	require.NoError(t, err)
	status, body := post(t, c, url+DiscoveryPath, req)
	require.Equal(t, http.StatusOK, status, "%s", body)

	var resp runtimehooksv1.DiscoveryResponse
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&resp), "%s", body)
	assert.Equal(t, "hooks.runtime.cluster.x-k8s.io/v1alpha1", resp.APIVersion)
	assert.Equal(t, "DiscoveryResponse", resp.Kind)
	assert.Equal(t, runtimehooksv1.ResponseStatusSuccess, resp.Status)
	require.Len(t, resp.Handlers, 1)
	h := resp.Handlers[0]
	assert.Equal(t, "wave-hold", h.Name)
	assert.Equal(t, runtimehooksv1.GroupVersionHook{APIVersion: "hooks.runtime.cluster.x-k8s.io/v1alpha1", Hook: "BeforeClusterUpgrade"}, h.RequestHook)
	require.NotNil(t, h.FailurePolicy)
	assert.Equal(t, runtimehooksv1.FailurePolicyIgnore, *h.FailurePolicy, "a guard that does not answer holds no upgrade")
	require.NotNil(t, h.TimeoutSeconds)
	assert.EqualValues(t, 5, *h.TimeoutSeconds)

	// What Cluster API's runtime client checks of a discovery answer
	// (defaultAndValidateDiscoveryResponse), and the path it then calls.
	assert.Empty(t, validation.IsDNS1123Label(h.Name))
	assert.True(t, *h.TimeoutSeconds > 0 && *h.TimeoutSeconds <= 30)
	assert.Less(t, DefaultReadTimeout, time.Duration(*h.TimeoutSeconds)*time.Second, "the read gives up before Cluster API does")
	cat := catalog.New()
	require.NoError(t, runtimehooksv1.AddToCatalog(cat))
	gv, err := schema.ParseGroupVersion(h.RequestHook.APIVersion)
	require.NoError(t, err)
	gvh := catalog.GroupVersionHook{Group: gv.Group, Version: gv.Version, Hook: h.RequestHook.Hook}
	assert.True(t, cat.IsHookRegistered(gvh))
	assert.Equal(t, BeforeClusterUpgradePath, catalog.GVHToPath(gvh, h.Name))
}

func TestBeforeClusterUpgradeHolds(t *testing.T) {
	now := t0.Add(time.Hour)
	canary := clusterOf("demo-cc", "0", to, now, notUpToDate)
	requested := clusterOf("demo-cc-2", "1", from, now.Add(-time.Hour))
	c, url := serve(t, &Extension{Reader: newReader(t, interceptor.Funcs{}, canary, requested), Log: logr.Discard(), Now: func() time.Time { return now }})
	before := testutil.ToFloat64(answersTotal.WithLabelValues(OutcomeHeld))

	resp := callHook(t, c, url, upgradeRequest(t, requested, to))
	assert.Equal(t, runtimehooksv1.ResponseStatusSuccess, resp.Status)
	assert.EqualValues(t, 10, resp.RetryAfterSeconds)
	assert.Equal(t, "held by rollout-guard: wave 0 is not done upgrading to v1.35.2: cluster demo-cc: ControlPlaneMachinesUpToDate is False (NotUpToDate): * Machine demo-cc-x7k2p: Version v1.34.2, v1.35.2 required", resp.Message)
	assert.InDelta(t, before+1, testutil.ToFloat64(answersTotal.WithLabelValues(OutcomeHeld)), 0)

	// The request's own labels are not trusted: the live Cluster is in
	// wave 1 whatever the request says.
	claimed := requested.DeepCopy()
	claimed.Labels = map[string]string{waves.Label: "0"}
	resp = callHook(t, c, url, upgradeRequest(t, *claimed, to))
	assert.EqualValues(t, 10, resp.RetryAfterSeconds, "held: the live Cluster's wave counts, not the request's")

	// Upgrading to another version than wave 0's: not held.
	resp = callHook(t, c, url, upgradeRequest(t, requested, "v1.35.3"))
	assert.Equal(t, runtimehooksv1.ResponseStatusSuccess, resp.Status)
	assert.Zero(t, resp.RetryAfterSeconds)
	assert.Contains(t, resp.Message, "not held by rollout-guard")
}

func TestBeforeClusterUpgradeReleases(t *testing.T) {
	now := t0.Add(time.Hour)
	canary := clusterOf("demo-cc", "0", to, now.Add(-time.Minute))
	requested := clusterOf("demo-cc-2", "1", to, now.Add(-time.Hour))
	c, url := serve(t, &Extension{Reader: newReader(t, interceptor.Funcs{}, canary, requested), Soak: time.Minute, Log: logr.Discard(), Now: func() time.Time { return now }})
	before := testutil.ToFloat64(answersTotal.WithLabelValues(OutcomeReleased))
	resp := callHook(t, c, url, upgradeRequest(t, requested, to))
	assert.Equal(t, runtimehooksv1.ResponseStatusSuccess, resp.Status)
	assert.Zero(t, resp.RetryAfterSeconds)
	assert.Equal(t, "not held by rollout-guard: no cluster of an earlier wave than 1 in namespace fleet is upgrading to v1.35.2 or soaking there", resp.Message)
	assert.InDelta(t, before+1, testutil.ToFloat64(answersTotal.WithLabelValues(OutcomeReleased)), 0)
}

func TestBeforeClusterUpgradeListsOneNamespaceByLabel(t *testing.T) {
	var opts []client.ListOption
	reader := newReader(t, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, o ...client.ListOption) error {
		opts = o
		return c.List(ctx, list, o...)
	}})
	c, url := serve(t, &Extension{Reader: reader, Log: logr.Discard()})
	callHook(t, c, url, upgradeRequest(t, clusterOf("demo-cc-2", "1", to, t0), to))
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	assert.Equal(t, ns, lo.Namespace)
	assert.Equal(t, waves.Label, lo.LabelSelector.String(), "only the Clusters that carry the wave label")
}

func TestBeforeClusterUpgradeFailsOpen(t *testing.T) {
	requested := clusterOf("demo-cc-2", "1", to, t0)
	for _, tc := range []struct {
		name string
		list func(ctx context.Context) error
		want string
	}{{
		name: "not allowed",
		list: func(context.Context) error {
			return apierrors.NewForbidden(schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "clusters"}, "", errors.New("no list"))
		},
		want: `not held by rollout-guard: could not read the clusters of namespace fleet, so it does not hold the upgrade: clusters.cluster.x-k8s.io is forbidden: no list`,
	}, {
		name: "the API server does not answer in time",
		list: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
		want: `not held by rollout-guard: could not read the clusters of namespace fleet, so it does not hold the upgrade: context deadline exceeded`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			reader := newReader(t, interceptor.Funcs{List: func(ctx context.Context, _ client.WithWatch, _ client.ObjectList, _ ...client.ListOption) error {
				return tc.list(ctx)
			}})
			c, url := serve(t, &Extension{Reader: reader, Log: logr.Discard(), ReadTimeout: 50 * time.Millisecond})
			before := testutil.ToFloat64(answersTotal.WithLabelValues(OutcomeFailedOpen))
			resp := callHook(t, c, url, upgradeRequest(t, requested, to))
			assert.Equal(t, runtimehooksv1.ResponseStatusSuccess, resp.Status)
			assert.Zero(t, resp.RetryAfterSeconds)
			assert.Equal(t, tc.want, resp.Message)
			assert.InDelta(t, before+1, testutil.ToFloat64(answersTotal.WithLabelValues(OutcomeFailedOpen)), 0)
		})
	}
}

func TestUnreadableRequestsGetAFailure(t *testing.T) {
	requested := clusterOf("demo-cc-2", "1", to, t0)
	unnamed := requested.DeepCopy()
	unnamed.Name = ""
	wrongKind := bytes.Replace(upgradeRequest(t, requested, to), []byte(`"kind":"BeforeClusterUpgradeRequest"`), []byte(`"kind":"AfterClusterUpgradeRequest"`), 1)
	listed := 0
	reader := newReader(t, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, o ...client.ListOption) error {
		listed++
		return c.List(ctx, list, o...)
	}})
	c, url := serve(t, &Extension{Reader: reader, Log: logr.Discard()})
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"not JSON", []byte(`{"apiVersion":`), "rollout-guard cannot read this BeforeClusterUpgrade request: decoding the body: unexpected end of JSON input"},
		{"empty", nil, "rollout-guard cannot read this BeforeClusterUpgrade request: decoding the body: unexpected end of JSON input"},
		{"another hook's request", wrongKind, `rollout-guard cannot read this BeforeClusterUpgrade request: the body is apiVersion "hooks.runtime.cluster.x-k8s.io/v1alpha1" kind "AfterClusterUpgradeRequest", not hooks.runtime.cluster.x-k8s.io/v1alpha1 BeforeClusterUpgradeRequest`},
		{"no apiVersion and kind", []byte(`{"cluster":{"metadata":{"namespace":"fleet","name":"demo-cc-2"}},"toKubernetesVersion":"v1.35.2"}`),
			`rollout-guard cannot read this BeforeClusterUpgrade request: the body is apiVersion "" kind "", not hooks.runtime.cluster.x-k8s.io/v1alpha1 BeforeClusterUpgradeRequest`},
		{"a cluster without a name", upgradeRequest(t, *unnamed, to), "rollout-guard cannot read this BeforeClusterUpgrade request: cluster.metadata.namespace and .name required"},
		{"no version", upgradeRequest(t, requested, ""), "rollout-guard cannot read this BeforeClusterUpgrade request: toKubernetesVersion required"},
		{"a field of the wrong type", []byte(`{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"BeforeClusterUpgradeRequest","cluster":[]}`),
			"rollout-guard cannot read this BeforeClusterUpgrade request: decoding the body: json: cannot unmarshal array into Go struct field BeforeClusterUpgradeRequest.cluster of type v1beta2.Cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := callHook(t, c, url, tc.body)
			assert.Equal(t, runtimehooksv1.ResponseStatusFailure, resp.Status)
			assert.Zero(t, resp.RetryAfterSeconds)
			assert.Equal(t, tc.want, resp.Message)
		})
	}
	assert.Zero(t, listed, "nothing is read for a request the guard cannot read")

	// A body larger than any Cluster.
	huge := append([]byte(`{"apiVersion":"`), bytes.Repeat([]byte("x"), maxRequestBytes+1)...)
	resp := callHook(t, c, url, huge)
	assert.Equal(t, runtimehooksv1.ResponseStatusFailure, resp.Status)
	assert.Contains(t, resp.Message, "request body too large")

	// Discovery too.
	status, body := post(t, c, url+DiscoveryPath, []byte(`not json`))
	require.Equal(t, http.StatusOK, status)
	var disc runtimehooksv1.DiscoveryResponse
	require.NoError(t, json.Unmarshal(body, &disc))
	assert.Equal(t, runtimehooksv1.ResponseStatusFailure, disc.Status)
	assert.Empty(t, disc.Handlers)
	assert.True(t, strings.HasPrefix(disc.Message, "rollout-guard cannot read this discovery request: decoding the body"), disc.Message)

	// Only POST.
	for _, path := range []string{DiscoveryPath, BeforeClusterUpgradePath} {
		resp, err := c.Get(url + path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, path)
		assert.Equal(t, http.MethodPost, resp.Header.Get("Allow"))
	}
}

// FuzzBeforeClusterUpgrade: whatever the body, the handler answers 200 with
// a Success or a Failure it can decode, and never panics.
func FuzzBeforeClusterUpgrade(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"BeforeClusterUpgradeRequest"}`,
		`{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"BeforeClusterUpgradeRequest","cluster":{"metadata":{"namespace":"fleet","name":"c","labels":{"rollout-guard.io/wave":"-1"}}},"toKubernetesVersion":"v1.35.2"}`,
		`{"apiVersion":"hooks.runtime.cluster.x-k8s.io/v1alpha1","kind":"BeforeClusterUpgradeRequest","cluster":{"metadata":{"namespace":"fleet","name":"demo-cc-2"}},"toKubernetesVersion":"v1.35.2"}`,
	} {
		f.Add([]byte(seed))
	}
	s := runtime.NewScheme()
	if err := clusterv1.AddToScheme(s); err != nil {
		f.Fatal(err)
	}
	canary := clusterOf("demo-cc", "0", to, t0, notUpToDate)
	requested := clusterOf("demo-cc-2", "1", to, t0)
	e := &Extension{Reader: fake.NewClientBuilder().WithScheme(s).WithObjects(&canary, &requested).Build(), Log: logr.Discard()}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		e.ServeBeforeClusterUpgrade(rec, httptest.NewRequest(http.MethodPost, BeforeClusterUpgradePath, bytes.NewReader(body)))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		var resp runtimehooksv1.BeforeClusterUpgradeResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("answer not JSON: %v: %s", err, rec.Body)
		}
		if resp.Status != runtimehooksv1.ResponseStatusSuccess && resp.Status != runtimehooksv1.ResponseStatusFailure {
			t.Fatalf("status %q", resp.Status)
		}
		if resp.Status == runtimehooksv1.ResponseStatusFailure && resp.RetryAfterSeconds != 0 {
			t.Fatalf("a Failure that holds: %+v", resp)
		}
	})
}
