package install

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/builder"
)

// TestServingCertRotation replaces the running guard's serving certificate
// and CA with new ones, the way an operator without cert-manager does
// (docs/install.md), while a client keeps making admission requests that
// reach the guard:
//
//  1. trust the old and the new CA (caBundle = both);
//  2. write the new tls.key and tls.crt into the guard's cert directory;
//  3. wait until the guard serves the new certificate (no restart);
//  4. trust the new CA only.
//
// Not one request may fail, and the guard must end up serving the new
// certificate from the same process, still requiring the API server's
// client certificate (the package's guard runs with --client-ca-name, so
// every call of the API server and every connection of the test's loop
// below presents it).
//
// What the API server trusts is observed, not assumed. It reads webhook
// configurations through an informer and uses a changed caBundle some time
// after the update, so admission requests counted after an update may all
// have been made with the configuration before it. And a request that
// succeeds once the guard serves the new certificate proves little by
// itself: a connection opened before keeps working whatever the caBundle
// says now (TLS verifies the server once, at the handshake), and a new
// handshake with the new certificate succeeds under the bundle of step 1
// (both CAs) just as under that of step 4. So after each caBundle step the
// test updates its two configurations once more, adding (or moving) a probe
// webhook of its own whose URL path names the step, and waits until the
// probe is called at that path from both configurations 10 times. The API
// server takes one snapshot of a configuration per admission request
// (k8s.io/apiserver generic.Webhook.Dispatch: hookSource.Webhooks()) and its
// informer only moves forward, so a call at the step's path means that
// request, and every later one, was dispatched with a configuration that
// carries the step's caBundle on the guard's webhooks. Those requests
// called the guard in the same dispatch and succeeded. Once the bundle is
// the new CA alone, they cannot have used a connection opened before the
// switch: the API server caches its webhook clients by the whole client
// configuration, caBundle included (k8s.io/apiserver util/webhook
// ClientManager.HookClient), and client-go's transports by their CA data,
// so a new caBundle means a new transport, whose connections are opened,
// and the guard's certificate verified, against the new CA alone.
//
// The new certificate is written only once the API server is seen to trust
// both CAs (step 1): written before that, it would fail every connection
// the API server opens with the old bundle, which requests on connections
// it opened earlier could hide. A second loop makes a new TLS connection to the guard
// again and again and verifies the served certificate against the CA bundle
// registered at that moment, as a new connection of another API server
// would, between and during the steps, and makes a request on it, which
// the guard answers only once it has accepted the client certificate.
func TestServingCertRotation(t *testing.T) {
	ctx := t.Context()
	guardURL := env.GuardURL()
	require.NotEmpty(t, guardURL)
	u, err := url.Parse(guardURL)
	require.NoError(t, err)
	oldBundle := env.GuardCABundle()
	oldSerial := servedSerial(t, u.Host)

	// A MachineDeployment whose version changes reach both of the guard's
	// webhooks (validating and stamping); without a Cluster the guard
	// admits them with a warning.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "install-rotation"}}
	require.NoError(t, env.Client.Create(ctx, ns))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	md := orphanMachineDeployment(ns.Name, "rotation", "v1.36.0")
	require.NoError(t, env.Client.Create(ctx, md))

	var (
		requests atomic.Int64
		mu       sync.Mutex
		failures []string
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			patch := fmt.Appendf(nil, `{"spec":{"template":{"spec":{"version":"v1.36.%d"}}}}`, 1+i%5)
			err := env.Client.Patch(ctx, md.DeepCopy(), client.RawPatch("application/merge-patch+json", patch), client.DryRunAll)
			requests.Add(1)
			if err != nil {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("%s: %v", time.Now().Format(time.StampMilli), err))
				mu.Unlock()
			}
		}
	}()
	var handshakes atomic.Int64
	handshakesDone := make(chan struct{})
	go func() {
		defer close(handshakesDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			err := verifyServed(u.Host, env.GuardCABundle())
			handshakes.Add(1)
			if err != nil {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("%s: new connection: %v", time.Now().Format(time.StampMilli), err))
				mu.Unlock()
			}
		}
	}()
	stopLoop := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
		<-handshakesDone
	}
	defer stopLoop()

	// passThrough waits until admission requests and new connections have
	// gone on through a step of the swap: 10 more of each, rather than a
	// fixed time that may be too short on a busy machine.
	// waitSwap waits until cond holds, and stops the test with the
	// failures so far when it does not within 30 s.
	waitSwap := func(cond func() bool, what string, args ...any) {
		t.Helper()
		if !assert.Eventually(t, cond, 30*time.Second, 20*time.Millisecond, append([]any{what}, args...)...) {
			mu.Lock()
			defer mu.Unlock()
			require.FailNow(t, "the swap stopped", "%d failures: %v", len(failures), failures[:min(len(failures), 5)])
		}
	}
	passThrough := func(what string) {
		t.Helper()
		r0, h0 := requests.Load(), handshakes.Load()
		waitSwap(func() bool { return requests.Load() >= r0+10 && handshakes.Load() >= h0+10 }, "admission requests go on %s", what)
	}
	var probe *configProbe
	// trusted waits until the API server admits requests with the
	// configurations as the caBundle step just made them: the probe is moved
	// to the step's path, then called there from both configurations 10
	// times (each call a request of the loop, which goes on succeeding),
	// and the loop's new connections go on too.
	trusted := func(step string) {
		t.Helper()
		probe.moveTo(t, step)
		h0 := handshakes.Load()
		waitSwap(func() bool {
			v, m := probe.callsAt(step)
			return v >= 10 && m >= 10 && handshakes.Load() >= h0+10
		}, "the API server admits requests with the configurations of step %q", step)
	}
	begin := time.Now()
	passThrough("with the old certificate") // a baseline
	ca := newCA(t, "rollout-guard-rotated-ca")
	next := ca.issue(t, nil, []net.IP{net.ParseIP("127.0.0.1")})
	require.NotEqual(t, 0, next.serial.Cmp(oldSerial))

	probe = startConfigProbe(t, ca, ns.Name)

	// 1. Trust both CAs.
	require.NoError(t, env.SetGuardCABundle(ctx, append(append([]byte(nil), oldBundle...), ca.pem...)))
	trusted("both-cas")
	// 2. New files.
	written := time.Now()
	require.NoError(t, env.WriteGuardServingCert(next.certPEM, next.keyPEM))
	// 3. The guard serves them, without a restart.
	require.Eventually(t, func() bool { return servedSerial(t, u.Host).Cmp(next.serial) == 0 },
		15*time.Second, 20*time.Millisecond, "the guard serves the new certificate")
	pickedUp := time.Since(written)
	passThrough("with the new certificate served")
	// 4. Trust the new CA only.
	require.NoError(t, env.SetGuardCABundle(ctx, ca.pem))
	trusted("new-ca-only")
	stopLoop()

	mu.Lock()
	defer mu.Unlock()
	bothV, bothM := probe.callsAt("both-cas")
	newV, newM := probe.callsAt("new-ca-only")
	t.Logf("%d admission requests and %d new verified connections, %d failed; new certificate served %s after it was written; whole swap %s; "+
		"requests seen admitted with both CAs trusted: %d validating, %d mutating; with the new CA only: %d validating, %d mutating",
		requests.Load(), handshakes.Load(), len(failures), pickedUp.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond), bothV, bothM, newV, newM)
	assert.Empty(t, failures, "admission requests that failed during the swap")
	assert.Greater(t, requests.Load(), int64(20), "admission requests made during the swap")
	assert.Greater(t, handshakes.Load(), int64(20), "new connections made during the swap")
	assert.Equal(t, guardURL, env.GuardURL(), "the same guard process serves on the same port")
	assert.Equal(t, ca.pem, env.GuardCABundle())
	assert.Equal(t, 0, servedSerial(t, u.Host).Cmp(next.serial))
	// The new serving certificate changed nothing of client authentication.
	requireClientCertificateRequired(t)
	for name, bundle := range registeredCABundles(t) {
		if name != probeWebhook {
			assert.Equal(t, string(ca.pem), string(bundle), "webhook %s trusts the new CA alone", name)
		}
	}

	// And the API server, which admits with the new CA alone (above), still
	// reaches the guard.
	v0, m0 := probe.callsAt("new-ca-only")
	err = env.Client.Patch(ctx, md.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"template":{"spec":{"version":"v1.36.9"}}}}`)), client.DryRunAll)
	assert.NoError(t, err)
	v1, m1 := probe.callsAt("new-ca-only")
	assert.Equal(t, [2]int{v0 + 1, m0 + 1}, [2]int{v1, m1}, "the last request was admitted with the new CA alone")
}

// verifyServed connects to hostPort, presenting the API server's client
// certificate, verifies the served certificate against caBundle for the
// name 127.0.0.1, and makes one HTTP request on the connection: with TLS
// 1.3 the client's side of the handshake ends before the server has
// checked the client's certificate, so only an answer shows that the guard
// accepted it.
func verifyServed(hostPort string, caBundle []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		return fmt.Errorf("no certificate in the CA bundle")
	}
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(dialer, "tcp", hostPort, &tls.Config{
		RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12, Certificates: apiServerClientCertificates(),
	})
	if err != nil {
		return fmt.Errorf("TLS connection to %s: %w", hostPort, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	if _, err := io.WriteString(conn, "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); err != nil {
		return fmt.Errorf("request to %s: %w", hostPort, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return fmt.Errorf("answer from %s: %w", hostPort, err)
	}
	return resp.Body.Close()
}

// servedSerial returns the serial number of the certificate served at
// hostPort (not verified: it is what the guard serves that is asked).
func servedSerial(t *testing.T, hostPort string) *big.Int {
	t.Helper()
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(dialer, "tcp", hostPort, &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // reads the served certificate
		Certificates:       apiServerClientCertificates(),
	})
	require.NoError(t, err)
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	require.NotEmpty(t, certs)
	return certs[0].SerialNumber
}

// orphanMachineDeployment is a MachineDeployment named name, at version,
// of a Cluster of the same name that does not exist: the guard judges its
// edits with a warning, stamps them and keeps their history all the same.
func orphanMachineDeployment(namespace, name, version string) *clusterv1.MachineDeployment {
	return builder.MachineDeployment(namespace, name).WithClusterName(name).WithReplicas(0).
		WithSelector(map[string]string{"pool": name}).WithVersion(version).
		WithBootstrapDataSecret(name).WithInfrastructureTemplate(name).Build()
}

// probeWebhook is the name of the test's probe webhook in both of the
// guard's configurations.
const probeWebhook = "rotation-probe.install.rollout-guard.io"

// configProbe is an admission webhook of the test's own, served over TLS
// with a certificate of the new CA (so it verifies under every caBundle the
// rotation sets) and added to both of the guard's webhook configurations,
// for the UPDATEs of MachineDeployments in one namespace. It allows every
// request and counts the calls by URL path: a call at a path proves the
// API server dispatched that request with a configuration carrying that
// path.
type configProbe struct {
	server    *httptest.Server
	caBundle  []byte
	namespace string
	mu        sync.Mutex
	calls     map[string]int
}

// startConfigProbe starts the probe's server; it is registered by moveTo,
// and taken out of the configurations and stopped when the test ends.
func startConfigProbe(t *testing.T, ca *testCA, namespace string) *configProbe {
	t.Helper()
	serving := ca.issue(t, nil, []net.IP{net.ParseIP("127.0.0.1")})
	pair, err := tls.X509KeyPair(serving.certPEM, serving.keyPEM)
	require.NoError(t, err)
	p := &configProbe{caBundle: ca.pem, namespace: namespace, calls: map[string]int{}}
	p.server = httptest.NewUnstartedServer(p)
	p.server.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	p.server.Config.ErrorLog = log.New(io.Discard, "", 0)
	p.server.StartTLS()
	t.Cleanup(p.server.Close)
	t.Cleanup(func() { p.unregister(t) }) // runs before the server stops
	return p
}

// ServeHTTP allows the review and counts the call.
func (p *configProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review := admissionv1.AdmissionReview{}
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview request", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.calls[r.URL.Path]++
	p.mu.Unlock()
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

// callsAt returns how many times the validating and the mutating
// configuration called the probe at step's path.
func (p *configProbe) callsAt(step string) (validating, mutating int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls["/validating/"+step], p.calls["/mutating/"+step]
}

// probeClientConfig is the probe's client configuration at path.
func (p *configProbe) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{
		URL:      ptr.To(p.server.URL + path),
		CABundle: p.caBundle,
	}
}

// moveTo registers the probe in both of the guard's configurations (or
// moves it) at the path of step, one update of each configuration.
func (p *configProbe) moveTo(t *testing.T, step string) {
	t.Helper()
	ctx := t.Context()
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{clusterv1.GroupVersion.Group}, APIVersions: []string{clusterv1.GroupVersion.Version},
			Resources: []string{"machinedeployments"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
	inNamespace := &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: p.namespace}}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: validatingName}, cfg); err != nil {
			return err
		}
		w := admissionregistrationv1.ValidatingWebhook{
			Name: probeWebhook, ClientConfig: p.clientConfig("/validating/" + step), Rules: rules,
			FailurePolicy: ptr.To(admissionregistrationv1.Ignore), MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
			NamespaceSelector: inNamespace, ObjectSelector: &metav1.LabelSelector{},
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), TimeoutSeconds: ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
		}
		cfg.Webhooks = append(slices.DeleteFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == probeWebhook }), w)
		return env.Client.Update(ctx, cfg)
	}), "registering the probe in %s", validatingName)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: mutatingName}, cfg); err != nil {
			return err
		}
		w := admissionregistrationv1.MutatingWebhook{
			Name: probeWebhook, ClientConfig: p.clientConfig("/mutating/" + step), Rules: rules,
			FailurePolicy: ptr.To(admissionregistrationv1.Ignore), MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
			NamespaceSelector: inNamespace, ObjectSelector: &metav1.LabelSelector{},
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), TimeoutSeconds: ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}
		cfg.Webhooks = append(slices.DeleteFunc(cfg.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == probeWebhook }), w)
		return env.Client.Update(ctx, cfg)
	}), "registering the probe in %s", mutatingName)
}

// unregister takes the probe out of both configurations.
func (p *configProbe) unregister(t *testing.T) {
	ctx := context.Background()
	assert.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: validatingName}, cfg); err != nil {
			return err
		}
		n := len(cfg.Webhooks)
		if cfg.Webhooks = slices.DeleteFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == probeWebhook }); len(cfg.Webhooks) == n {
			return nil
		}
		return env.Client.Update(ctx, cfg)
	}), "taking the probe out of %s", validatingName)
	assert.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: mutatingName}, cfg); err != nil {
			return err
		}
		n := len(cfg.Webhooks)
		if cfg.Webhooks = slices.DeleteFunc(cfg.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == probeWebhook }); len(cfg.Webhooks) == n {
			return nil
		}
		return env.Client.Update(ctx, cfg)
	}), "taking the probe out of %s", mutatingName)
}

// registeredCABundles returns the caBundle of every webhook of the guard's
// two configurations as the API server stores them, by "configuration/webhook"
// name (the probe by probeWebhook).
func registeredCABundles(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, env.Client.Get(t.Context(), client.ObjectKey{Name: validatingName}, v))
	for _, w := range v.Webhooks {
		key := validatingName + "/" + w.Name
		if w.Name == probeWebhook {
			key = probeWebhook
		}
		out[key] = w.ClientConfig.CABundle
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	require.NoError(t, env.Client.Get(t.Context(), client.ObjectKey{Name: mutatingName}, m))
	for _, w := range m.Webhooks {
		key := mutatingName + "/" + w.Name
		if w.Name == probeWebhook {
			key = probeWebhook
		}
		out[key] = w.ClientConfig.CABundle
	}
	return out
}
