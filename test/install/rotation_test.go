package install

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
// certificate from the same process.
//
// The API server keeps its connections to a webhook open and makes new
// ones only when the webhook's client configuration changes, so requests
// through it alone would not notice a certificate its CA bundle does not
// trust until the next reconnect. A second loop therefore makes a new TLS
// connection to the guard again and again and verifies the served
// certificate against the CA bundle registered at that moment, as a new
// connection of the API server (or of another API server) would.
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
	// gone on through a step of the swap: 10 more of each, each admitted
	// only through a webhook configuration the API server has read again,
	// rather than a fixed time that may be too short on a busy machine.
	passThrough := func(what string) {
		t.Helper()
		r0, h0 := requests.Load(), handshakes.Load()
		require.Eventually(t, func() bool { return requests.Load() >= r0+10 && handshakes.Load() >= h0+10 },
			30*time.Second, 20*time.Millisecond, "admission requests go on %s", what)
	}
	begin := time.Now()
	passThrough("with the old certificate") // a baseline
	ca := newCA(t, "rollout-guard-rotated-ca")
	next := ca.issue(t, nil, []net.IP{net.ParseIP("127.0.0.1")})
	require.NotEqual(t, 0, next.serial.Cmp(oldSerial))

	// 1. Trust both CAs.
	require.NoError(t, env.SetGuardCABundle(ctx, append(append([]byte(nil), oldBundle...), ca.pem...)))
	passThrough("once both CAs are trusted")
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
	passThrough("once the new CA alone is trusted")
	stopLoop()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d admission requests and %d new verified connections, %d failed; new certificate served %s after it was written; whole swap %s",
		requests.Load(), handshakes.Load(), len(failures), pickedUp.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))
	assert.Empty(t, failures, "admission requests that failed during the swap")
	assert.Greater(t, requests.Load(), int64(20), "admission requests made during the swap")
	assert.Greater(t, handshakes.Load(), int64(20), "new connections made during the swap")
	assert.Equal(t, guardURL, env.GuardURL(), "the same guard process serves on the same port")
	assert.Equal(t, ca.pem, env.GuardCABundle())
	assert.Equal(t, 0, servedSerial(t, u.Host).Cmp(next.serial))

	// And the API server now trusts the new CA alone: a request still
	// reaches the guard.
	err = env.Client.Patch(ctx, md.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"template":{"spec":{"version":"v1.36.9"}}}}`)), client.DryRunAll)
	assert.NoError(t, err)
}

// verifyServed connects to hostPort and verifies the served certificate
// against caBundle for the name 127.0.0.1.
func verifyServed(hostPort string, caBundle []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		return fmt.Errorf("no certificate in the CA bundle")
	}
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(dialer, "tcp", hostPort, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err != nil {
		return fmt.Errorf("TLS connection to %s: %w", hostPort, err)
	}
	return conn.Close()
}

// servedSerial returns the serial number of the certificate served at
// hostPort (not verified: it is what the guard serves that is asked).
func servedSerial(t *testing.T, hostPort string) *big.Int {
	t.Helper()
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(dialer, "tcp", hostPort, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate
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
	labels := map[string]string{"pool": name}
	return &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: name,
			Replicas:    ptr.To[int32](0),
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{
					ClusterName: name,
					Version:     version,
					Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(name)},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: name,
					},
				},
			},
		},
	}
}
