package runtimesdk

import (
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
	"github.com/rollout-guard/rollout-guard/waves"
)

const (
	// waveSoak is the guard's --wave-soak: how long wave 0 stays done
	// before wave 1 may start.
	waveSoak = 40 * time.Second
	// guardExtension is the ExtensionConfig that registers the guard's
	// extension, as config/wave-hold names it.
	guardExtension = "rollout-guard"
	// upgradeTimeout bounds a wave's upgrade in the sandbox.
	upgradeTimeout = 6 * time.Minute
)

// extensionProxy forwards TCP connections from its own port to the
// guard's: Cluster API reaches the guard's extension through it, and
// closing it cuts the extension off (its port refuses connections) while
// the guard's admission webhooks keep serving the API server.
type extensionProxy struct {
	t      *testing.T
	addr   string // 127.0.0.1:PORT, kept across Close and Open
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newExtensionProxy(t *testing.T, target string) *extensionProxy {
	p := &extensionProxy{t: t, addr: "127.0.0.1:0", target: target}
	p.Open()
	t.Cleanup(p.Close)
	return p
}

// Open listens again on the proxy's port.
func (p *extensionProxy) Open() {
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(p.t, err)
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *extensionProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, up)
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

// Close stops listening and cuts every connection.
func (p *extensionProxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// registerGuardExtension registers the guard's extension, reached through
// proxy, as config/wave-hold does with the guard's Service, and waits for
// Cluster API to discover its handler.
func registerGuardExtension(t *testing.T, proxy *extensionProxy) {
	ctx := context.Background()
	ext := &runtimev1.ExtensionConfig{
		ObjectMeta: metav1.ObjectMeta{Name: guardExtension},
		Spec:       runtimev1.ExtensionConfigSpec{ClientConfig: runtimev1.ClientConfig{URL: "https://" + proxy.addr, CABundle: sb.Env.GuardCABundle()}},
	}
	require.NoError(t, sb.Client.Create(ctx, ext))
	t.Cleanup(func() { assert.NoError(t, client.IgnoreNotFound(sb.Client.Delete(context.Background(), ext))) })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &runtimev1.ExtensionConfig{}
		require.NoError(c, sb.Client.Get(ctx, client.ObjectKeyFromObject(ext), got))
		require.True(c, conditions.IsTrue(got, runtimev1.ExtensionConfigDiscoveredCondition), "Discovered: %+v", conditions.Get(got, runtimev1.ExtensionConfigDiscoveredCondition))
		var names []string
		for _, h := range got.Status.Handlers {
			names = append(names, h.Name)
		}
		require.Contains(c, names, "wave-hold."+guardExtension)
	}, time.Minute, 500*time.Millisecond, "the guard's extension discovered by Cluster API")
}

// labelWave puts the cluster in wave w.
func labelWave(t *testing.T, name, w string) {
	c := getCluster(t, name)
	patch := client.MergeFrom(c.DeepCopy())
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Labels[waves.Label] = w
	require.NoError(t, sb.Client.Patch(context.Background(), c, patch))
}

func getCluster(t require.TestingT, name string) *clusterv1.Cluster {
	c := &clusterv1.Cluster{}
	require.NoError(t, sb.Client.Get(context.Background(), client.ObjectKey{Namespace: sandbox.DefaultNamespace, Name: name}, c))
	return c
}

// applyVersion bumps the clusters' spec.topology.version in one kubectl
// apply, as a GitOps controller applies a commit: one file, server-side
// apply with a field manager of its own.
func applyVersion(t *testing.T, version string, names ...string) {
	var docs []string
	for _, n := range names {
		c := getCluster(t, n)
		docs = append(docs, strings.Join([]string{
			"apiVersion: cluster.x-k8s.io/v1beta2", "kind: Cluster", "metadata:", "  name: " + n, "  namespace: " + c.Namespace,
			"spec:", "  topology:", "    classRef:", "      name: " + c.Spec.Topology.ClassRef.Name, "    version: " + version}, "\n"))
	}
	path := filepath.Join(t.TempDir(), "clusters.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o600))
	out, err := exec.Command(filepath.Join(sb.Env.BinDir, "kubectl"), "--kubeconfig", sb.Kubeconfig, "apply", "--server-side", "--force-conflicts", "--field-manager=gitops", "-f", path).CombinedOutput()
	require.NoError(t, err, "kubectl apply: %s", out)
	t.Logf("kubectl apply --server-side -f clusters.yaml (%s):\n%s", version, out)
}

// heldMessage is the hold the topology controller wrote into the
// Cluster's TopologyReconciled condition, "" when none.
func heldMessage(c *clusterv1.Cluster) string {
	cond := apimeta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterTopologyReconciledCondition)
	if cond == nil || !strings.Contains(cond.Message, "held by rollout-guard") {
		return ""
	}
	return cond.Message
}

// controlPlaneVersion is the KubeadmControlPlane's spec.version.
func controlPlaneVersion(t require.TestingT, cc sandbox.ClassClusterSpec) string {
	kcp := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, sb.Client.Get(context.Background(), client.ObjectKey{Namespace: cc.Namespace, Name: cc.ControlPlaneName()}, kcp))
	return kcp.Spec.Version
}

// controlPlaneChangedAt is when the topology controller set the control
// plane's spec.version to version: the guard's revision of that
// KubeadmControlPlane at it.
func controlPlaneChangedAt(t *testing.T, cc sandbox.ClassClusterSpec, version string) time.Time {
	kcp := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, sb.Client.Get(context.Background(), client.ObjectKey{Namespace: cc.Namespace, Name: cc.ControlPlaneName()}, kcp))
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, sb.Client.List(context.Background(), list, client.InNamespace(cc.Namespace), client.MatchingLabels{revisions.LabelOwnerUID: string(kcp.UID)}))
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) })
	require.NotEmpty(t, list.Items, "KubeadmControlPlane %s has revisions", kcp.Name)
	at := list.Items[len(list.Items)-1].CreationTimestamp.Time
	require.Equal(t, version, kcp.Spec.Version)
	return at
}

// rolledOutAt is when the last of the cluster's machines became ready.
func rolledOutAt(t *testing.T, name string) time.Time {
	at, err := sb.RolledOutAt(context.Background(), sandbox.DefaultNamespace, name)
	require.NoError(t, err)
	return at
}

// TestWaveHoldThroughClusterAPI registers the guard's BeforeClusterUpgrade
// extension with Cluster API (bin/capi-core, RuntimeSDK on) and puts demo-cc
// in wave 0, demo-cc-2 and demo-cc-3 in wave 1.
//
// Cut off mid-way: demo-cc and demo-cc-2 are upgraded together; demo-cc-2
// is held while demo-cc upgrades, then the extension's port is closed
// (the guard's admission webhooks keep serving): Cluster API calls it, fails,
// and, the handler failing open (failurePolicy Ignore), demo-cc-2 goes on
// before demo-cc has soaked; both end at the version, every machine
// replaced and ready.
//
// Back: the port open again, the three clusters are bumped in one kubectl
// apply: wave 1's are held, the condition naming wave 0's cluster, and
// their control planes start only once demo-cc is rolled out and has
// soaked for --wave-soak.
func TestWaveHoldThroughClusterAPI(t *testing.T) {
	ctx := context.Background()
	guard, err := url.Parse(sb.Env.GuardURL())
	require.NoError(t, err)
	proxy := newExtensionProxy(t, guard.Host)
	registerGuardExtension(t, proxy)
	cc := sb.ClassClusters
	wave0, wave1 := cc[0], cc[1:]
	labelWave(t, wave0.Name, "0")
	for _, c := range wave1 {
		labelWave(t, c.Name, "1")
	}
	v1 := nextVersion(t, getCluster(t, wave0.Name).Spec.Topology.Version)

	// Cut off mid-way.
	applyVersion(t, v1, wave0.Name, wave1[0].Name)
	var held string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		held = heldMessage(getCluster(c, wave1[0].Name))
		require.NotEmpty(c, held, "%s held", wave1[0].Name)
	}, 2*time.Minute, 250*time.Millisecond)
	t.Logf("%s's TopologyReconciled condition while held:\n%s", wave1[0].Name, held)
	assert.Contains(t, held, "Following hooks are blocking upgrade: BeforeClusterUpgrade: held by rollout-guard: wave 0 is not done upgrading to "+v1+": cluster "+wave0.Name)
	assert.NotEqual(t, v1, controlPlaneVersion(t, wave1[0]), "held: its control plane is not upgraded")
	proxy.Close()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, v1, controlPlaneVersion(c, wave1[0]), "%s goes on without the extension", wave1[0].Name)
	}, 2*time.Minute, 250*time.Millisecond)
	for _, c := range []sandbox.ClassClusterSpec{wave0, wave1[0]} {
		waitRolledOut(t, c.Name, v1)
	}
	released := controlPlaneChangedAt(t, wave1[0], v1)
	done0 := rolledOutAt(t, wave0.Name)
	assert.True(t, released.Before(done0.Add(waveSoak)), "%s started at %s, before %s had soaked (rolled out at %s, soak %s): the extension was cut off, Cluster API went on",
		wave1[0].Name, released.Format(time.RFC3339), wave0.Name, done0.Format(time.RFC3339), waveSoak)

	// Back: the extension holds again.
	proxy.Open()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &runtimev1.ExtensionConfig{}
		require.NoError(c, sb.Client.Get(ctx, client.ObjectKey{Name: guardExtension}, got))
		require.True(c, conditions.IsTrue(got, runtimev1.ExtensionConfigDiscoveredCondition))
	}, time.Minute, 500*time.Millisecond)
	v2 := nextVersion(t, v1)
	names := []string{wave0.Name}
	for _, c := range wave1 {
		names = append(names, c.Name)
	}
	applyVersion(t, v2, names...)
	for _, c := range wave1 {
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			msg := heldMessage(getCluster(ct, c.Name))
			require.Contains(ct, msg, "held by rollout-guard: wave 0", "%s held", c.Name)
			held = msg
		}, 2*time.Minute, 250*time.Millisecond)
	}
	t.Logf("a wave 1 cluster's TopologyReconciled condition while held:\n%s", held)
	// Once wave 0 is rolled out, wave 1 is held for the soak.
	var seen []string
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		msg := heldMessage(getCluster(ct, wave1[0].Name))
		if msg != "" && !slices.Contains(seen, msg) {
			seen = append(seen, msg)
		}
		require.Contains(ct, msg, "held by rollout-guard: wave 0 has not soaked yet at "+v2+": cluster "+wave0.Name+": done ")
	}, upgradeTimeout, 250*time.Millisecond, "%s held while %s soaks", wave1[0].Name, wave0.Name)
	t.Logf("%s's TopologyReconciled conditions while held, as they changed:\n%s", wave1[0].Name, strings.Join(seen, "\n"))
	for _, c := range append([]sandbox.ClassClusterSpec{wave0}, wave1...) {
		waitRolledOut(t, c.Name, v2)
	}
	done0 = rolledOutAt(t, wave0.Name)
	for _, c := range wave1 {
		started := controlPlaneChangedAt(t, c, v2)
		// Timestamps are stored to the second.
		assert.GreaterOrEqual(t, started.Sub(done0), waveSoak-time.Second,
			"%s's control plane started at %s, %s after %s was rolled out (%s); the soak is %s", c.Name, started.Format(time.RFC3339), started.Sub(done0), wave0.Name, done0.Format(time.RFC3339), waveSoak)
	}
}

// nextVersion is the class's version after v.
func nextVersion(t *testing.T, v string) string {
	i := slices.Index(sandbox.ClassKubernetesVersions, v)
	require.True(t, i >= 0 && i+1 < len(sandbox.ClassKubernetesVersions), "%s has a next version in the class", v)
	return sandbox.ClassKubernetesVersions[i+1]
}

// waitRolledOut waits until every machine of the cluster runs version and
// is ready, none is being deleted, and the topology controller is done
// with the upgrade: its TopologyReconciled condition True, and no
// AfterClusterUpgrade hook pending (until it is called, Cluster API's
// webhook refuses the next version: "version cannot be changed when the
// "AfterClusterUpgrade" hook is still blocking").
func waitRolledOut(t *testing.T, name, version string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cl := getCluster(c, name)
		require.True(c, conditions.IsTrue(cl, clusterv1.ClusterTopologyReconciledCondition), "cluster %s: TopologyReconciled", name)
		require.NotContains(c, cl.Annotations[runtimev1.PendingHooksAnnotation], "AfterClusterUpgrade", "cluster %s: the AfterClusterUpgrade hook is pending", name)
		list := &clusterv1.MachineList{}
		require.NoError(c, sb.Client.List(context.Background(), list, client.InNamespace(sandbox.DefaultNamespace), client.MatchingLabels{clusterv1.ClusterNameLabel: name}))
		require.Len(c, list.Items, 2, "cluster %s: one control-plane and one worker machine", name)
		for _, m := range list.Items {
			require.True(c, m.DeletionTimestamp.IsZero(), "machine %s is being deleted", m.Name)
			require.Equal(c, version, m.Spec.Version, "machine %s", m.Name)
			require.True(c, conditions.IsTrue(&m, clusterv1.MachineReadyCondition), "machine %s is ready", m.Name)
		}
	}, upgradeTimeout, time.Second, "cluster %s rolled out to %s", name, version)
}
