package runtimesdk

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/cert"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/exp/runtime/server"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

const (
	// extensionName is the ExtensionConfig that registers the test's
	// Runtime Extension.
	extensionName = "upgrade-gate"
	// handlerName is the extension's BeforeClusterUpgrade handler; Cluster
	// API registers it as handlerName.extensionName.
	handlerName = "hold-upgrades"
	// holdMessage is what the handler answers while it holds an upgrade.
	holdMessage = "upgrades are held by the test's upgrade gate"
	// retryAfterSeconds is the handler's retryAfterSeconds while it holds:
	// the topology controller calls it again after so many seconds.
	retryAfterSeconds = 2
	// heldCallsToWatch is how many calls after the first hold the test
	// watches the control plane keep its version through.
	heldCallsToWatch = 3
)

// TestBeforeClusterUpgradeHoldsTheTopology serves a Runtime Extension whose
// BeforeClusterUpgrade handler holds every upgrade while a flag is set,
// registers it with an ExtensionConfig (its URL and the caBundle of a test
// CA: Cluster API calls it over TLS), and upgrades a cluster by one minor
// through spec.topology.version (the package's last class cluster, demo-cc-3). While the handler holds, the topology
// controller in bin/capi-core calls it again and again, the Cluster's
// TopologyReconciled condition carries its message, and neither the
// KubeadmControlPlane's nor the MachineDeployment's version moves; once the
// flag is cleared, the control plane moves to the new version, then the
// workers, and every machine is replaced at it.
func TestBeforeClusterUpgradeHoldsTheTopology(t *testing.T) {
	require.NotNil(t, sb.Core, "the sandbox runs bin/capi-core")
	require.True(t, sb.Core.Running(), "bin/capi-core runs")
	// The last class cluster: the wave tests after this one start from
	// the others at their first version.
	cc := sb.ClassClusters[len(sb.ClassClusters)-1]
	ns, name := cc.Namespace, cc.Name
	from := cc.KubernetesVersion
	i := slices.Index(sandbox.ClassKubernetesVersions, from)
	require.True(t, i >= 0 && i+1 < len(sandbox.ClassKubernetesVersions), "%s has a next minor in the class", from)
	to := sandbox.ClassKubernetesVersions[i+1]
	ctx := context.Background()

	// Cluster API's cluster cache in bin/capi-core reached the in-memory
	// workload cluster through its kubeconfig Secret.
	cluster := &clusterv1.Cluster{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster))
	assert.True(t, conditions.IsTrue(cluster, clusterv1.ClusterRemoteConnectionProbeCondition),
		"RemoteConnectionProbe: %+v", conditions.Get(cluster, clusterv1.ClusterRemoteConnectionProbeCondition))

	gate := &upgradeGate{}
	gate.held.Store(true)
	url, caBundle := serveUpgradeGate(t, gate)

	begin := time.Now()
	ext := &runtimev1.ExtensionConfig{
		ObjectMeta: metav1.ObjectMeta{Name: extensionName},
		Spec:       runtimev1.ExtensionConfigSpec{ClientConfig: runtimev1.ClientConfig{URL: url, CABundle: caBundle}},
	}
	require.NoError(t, sb.Client.Create(ctx, ext))
	t.Cleanup(func() { assert.NoError(t, client.IgnoreNotFound(sb.Client.Delete(context.Background(), ext))) })
	wantHandler := handlerName + "." + extensionName
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &runtimev1.ExtensionConfig{}
		require.NoError(c, sb.Client.Get(ctx, client.ObjectKeyFromObject(ext), got))
		require.True(c, conditions.IsTrue(got, runtimev1.ExtensionConfigDiscoveredCondition),
			"Discovered: %+v", conditions.Get(got, runtimev1.ExtensionConfigDiscoveredCondition))
		var names []string
		for _, h := range got.Status.Handlers {
			names = append(names, h.Name+" ("+h.RequestHook.Hook+")")
		}
		require.Contains(c, names, wantHandler+" (BeforeClusterUpgrade)")
	}, time.Minute, 500*time.Millisecond, "ExtensionConfig %s discovered by Cluster API", extensionName)
	timings.Add("%-58s %s", "ExtensionConfig discovered", time.Since(begin).Round(100*time.Millisecond))

	kcpKey := client.ObjectKey{Namespace: ns, Name: cc.ControlPlaneName()}
	mdKey := client.ObjectKey{Namespace: ns, Name: cc.MachineDeploymentName()}
	kcp := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, sb.Client.Get(ctx, kcpKey, kcp))
	require.Equal(t, from, kcp.Spec.Version)

	// Upgrade by one minor.
	begin = time.Now()
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Spec.Topology.Version = to
	require.NoError(t, sb.Client.Patch(ctx, cluster, patch), "upgrading %s to %s", name, to)

	// Held: the hook is called with the upgrade, and the topology
	// controller says so on the Cluster.
	wantMessage := "Following hooks are blocking upgrade: BeforeClusterUpgrade: " + holdMessage
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NotEmpty(c, gate.calls(name, from, to, true), "a held call of the hook for %s %s → %s", name, from, to)
		got := &clusterv1.Cluster{}
		require.NoError(c, sb.Client.Get(ctx, client.ObjectKeyFromObject(cluster), got))
		cond := conditions.Get(got, clusterv1.ClusterTopologyReconciledCondition)
		require.NotNil(c, cond)
		require.Equal(c, metav1.ConditionFalse, cond.Status, "%+v", cond)
		// Cluster API v1.14 reports a blocking hook under ClusterUpgrading;
		// LifecycleHookBlocking is deprecated and no longer set.
		require.Equal(c, clusterv1.ClusterTopologyReconciledClusterUpgradingReason, cond.Reason, "%+v", cond)
		require.Contains(c, cond.Message, wantMessage)
	}, 2*time.Minute, 500*time.Millisecond, "the Cluster's TopologyReconciled condition names the held hook")
	timings.Add("%-58s %s", "upgrade held by BeforeClusterUpgrade (condition set)", time.Since(begin).Round(100*time.Millisecond))
	got := &clusterv1.Cluster{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKeyFromObject(cluster), got))
	t.Logf("TopologyReconciled while held: %s: %s", conditions.Get(got, clusterv1.ClusterTopologyReconciledCondition).Reason,
		conditions.Get(got, clusterv1.ClusterTopologyReconciledCondition).Message)

	// Through several more held calls, neither the control plane nor the
	// workers move.
	firstHeld := len(gate.calls(name, from, to, true))
	framework.WaitFor(t, 2*time.Minute, 500*time.Millisecond, fmt.Sprintf("%d more held calls of the hook", heldCallsToWatch), func() (bool, string) {
		kcp := &controlplanev1.KubeadmControlPlane{}
		md := &clusterv1.MachineDeployment{}
		if err := sb.Client.Get(ctx, kcpKey, kcp); err != nil {
			return false, err.Error()
		}
		if err := sb.Client.Get(ctx, mdKey, md); err != nil {
			return false, err.Error()
		}
		if !assert.Equal(t, from, kcp.Spec.Version, "KubeadmControlPlane %s's version while the hook holds", kcpKey.Name) ||
			!assert.Equal(t, from, md.Spec.Template.Spec.Version, "MachineDeployment %s's version while the hook holds", mdKey.Name) {
			return true, "a version moved"
		}
		n := len(gate.calls(name, from, to, true)) - firstHeld
		return n >= heldCallsToWatch, fmt.Sprintf("%d more held calls; control plane and workers at %s", n, from)
	})
	if t.Failed() {
		return
	}
	heldFor := time.Since(begin)

	// Released: the control plane moves to the new version.
	gate.held.Store(false)
	released := time.Now()
	framework.WaitFor(t, 2*time.Minute, 500*time.Millisecond, "the control plane's version to move to "+to, func() (bool, string) {
		kcp := &controlplanev1.KubeadmControlPlane{}
		if err := sb.Client.Get(ctx, kcpKey, kcp); err != nil {
			return false, err.Error()
		}
		return kcp.Spec.Version == to, "KubeadmControlPlane at " + kcp.Spec.Version
	})
	require.NotEmpty(t, gate.calls(name, from, to, false), "the hook was called again and let the upgrade through")
	timings.Add("%-58s %s", "control plane's version moved after the release", time.Since(released).Round(100*time.Millisecond))

	// And the whole cluster rolls to it.
	state := sb.RequireClusterReady(t, ns, name, 5*time.Minute)
	assert.Equal(t, to, state.ControlPlane.Version)
	for _, w := range state.Workers {
		assert.Equal(t, to, w.Version, "%s", w.Name)
	}
	machines := &clusterv1.MachineList{}
	require.NoError(t, sb.Client.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels{clusterv1.ClusterNameLabel: name}))
	require.NotEmpty(t, machines.Items)
	for _, m := range machines.Items {
		assert.Equal(t, to, m.Spec.Version, "Machine %s", m.Name)
	}
	timings.Add("%-58s %s", "cluster ready at "+to+" after the release", time.Since(released).Round(100*time.Millisecond))
	t.Logf("hook calls: %d held over %s, then %d letting the upgrade through; cluster ready at %s %s after the release",
		len(gate.calls(name, from, to, true)), heldFor.Round(100*time.Millisecond), len(gate.calls(name, "", "", false)), to,
		time.Since(released).Round(100*time.Millisecond))
}

// upgradeGate is a Runtime Extension with one BeforeClusterUpgrade handler
// that holds every upgrade while held is set, and records every call.
type upgradeGate struct {
	held atomic.Bool

	mu  sync.Mutex
	log []gateCall
}

// gateCall is one call of the handler.
type gateCall struct {
	cluster, from, to string
	held              bool
}

// beforeClusterUpgrade is the handler: success, and while held
// retryAfterSeconds with holdMessage.
func (g *upgradeGate) beforeClusterUpgrade(_ context.Context, req *runtimehooksv1.BeforeClusterUpgradeRequest, resp *runtimehooksv1.BeforeClusterUpgradeResponse) {
	held := g.held.Load()
	g.mu.Lock()
	g.log = append(g.log, gateCall{cluster: req.Cluster.Name, from: req.FromKubernetesVersion, to: req.ToKubernetesVersion, held: held})
	g.mu.Unlock()
	resp.Status = runtimehooksv1.ResponseStatusSuccess
	if held {
		resp.RetryAfterSeconds = retryAfterSeconds
		resp.Message = holdMessage
	}
}

// calls returns the calls for cluster that were held (held) or let
// through (!held), from and to the given versions ("" matches any).
func (g *upgradeGate) calls(cluster, from, to string, held bool) []gateCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []gateCall
	for _, c := range g.log {
		if c.cluster == cluster && c.held == held && (from == "" || c.from == from) && (to == "" || c.to == to) {
			out = append(out, c)
		}
	}
	return out
}

// serveUpgradeGate serves gate with Cluster API's Runtime Extension server
// on a free local port, over TLS with a serving certificate for 127.0.0.1
// signed by a new test CA, until the test ends. It returns the server's URL
// and the CA's PEM, for an ExtensionConfig's clientConfig.
func serveUpgradeGate(t *testing.T, gate *upgradeGate) (url string, caBundle []byte) {
	t.Helper()
	// The certificate file holds the serving certificate, then its CA.
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	require.NoError(t, err)
	leaf, rest := pem.Decode(certPEM)
	require.NotNil(t, leaf)
	ca, _ := pem.Decode(rest)
	require.NotNil(t, ca, "the CA after the serving certificate")
	caBundle = pem.EncodeToMemory(ca)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())

	catalog := runtimecatalog.New()
	require.NoError(t, runtimehooksv1.AddToCatalog(catalog))
	srv, err := server.New(server.Options{Catalog: catalog, Host: "127.0.0.1", Port: port, CertDir: dir})
	require.NoError(t, err)
	require.NoError(t, srv.AddExtensionHandler(server.ExtensionHandler{
		Hook:        runtimehooksv1.BeforeClusterUpgrade,
		Name:        handlerName,
		HandlerFunc: gate.beforeClusterUpgrade,
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done, "the Runtime Extension server")
	})
	started := srv.StartedChecker()
	framework.WaitFor(t, 30*time.Second, 100*time.Millisecond, "the Runtime Extension server", func() (bool, string) {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the Runtime Extension server stopped: %v", err)
		default:
		}
		if err := started(nil); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), caBundle
}
