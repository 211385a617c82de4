package node

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/arming"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

const (
	guardNamespace  = "rollout-guard-system"
	guardDeployment = "rollout-guard-controller-manager"
	servingSecret   = "rollout-guard-webhook-server-cert"
	// refusedVersion is a control-plane downgrade the guard refuses, and
	// refusal how it says so.
	refusedVersion = "v1.33.1"
	refusal        = `admission webhook "validate.kubeadmcontrolplane.rollout-guard.io" denied the request`
)

// documented runs command, which docs/install.md must quote word for
// word, through bash in the repository's root as a user runs it: kubectl
// and make from bin/ and PATH, the environment's admin kubeconfig, ctr
// talking to the node's containerd. It returns the command's output.
func documented(ctx context.Context, t *testing.T, command string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(env.RepoRoot, "docs", "install.md"))
	require.NoError(t, err)
	require.Contains(t, string(doc), command, "docs/install.md no longer says this; the install test runs what it says")
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", command)
	cmd.Dir = env.RepoRoot
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+env.Kubeconfig,
		"PATH="+env.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"CONTAINERD_ADDRESS="+node.ContainerdAddress(),
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	begin := time.Now()
	err = cmd.Run()
	t.Logf("$ %s (%s)\n%s", command, time.Since(begin).Round(100*time.Millisecond), out.String())
	require.NoError(t, err, "%s:\n%s", command, out.String())
	return out.String()
}

// servedCertificate returns the DER of the leaf certificate the guard's
// webhook server at podIP presents.
func servedCertificate(podIP string) ([]byte, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", net.JoinHostPort(podIP, "9443"),
		&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the certificate served, trusts nothing
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, fmt.Errorf("no certificate served")
	}
	return certs[0].Raw, nil
}

// guardPods returns the guard's Pods.
func guardPods(ctx context.Context, t *testing.T) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	require.NoError(t, env.Client.List(ctx, &pods, client.InNamespace(guardNamespace), client.MatchingLabels{"app.kubernetes.io/name": "rollout-guard"}))
	return pods.Items
}

func isArmed(ctx context.Context) bool {
	rb := &rbacv1.RoleBinding{}
	return env.Client.Get(ctx, types.NamespacedName{Namespace: guardNamespace, Name: arming.Name}, rb) == nil
}

// TestInstallAsDocumented installs the guard on the environment's node
// exactly as docs/install.md says, with cert-manager's own controller and
// CA injector issuing its certificates:
//   - applied before its image is on the node (a wrong image), its Pods
//     cannot pull, the Deployment has no available replica, its webhooks are
//     not armed, and a control-plane downgrade it would refuse goes through:
//     the install blocks nothing;
//   - the image built with make image and imported with ctr, both replicas
//     become Ready in the restricted namespace, cert-manager has issued the
//     serving certificate and injected its CA into every webhook, the
//     webhooks are armed, and the guard refuses a downgrade through its
//     Service;
//   - a replica deleted (as a drain evicts it), then the guard upgraded to
//     another image with a rolling update, then its serving certificate
//     renewed by cert-manager (until every replica serves the new one),
//     each while policed dry-run edits go on: every one is answered by the
//     guard, none fails;
//   - uninstalled as documented: no webhook configuration, admission
//     policy, RBAC object or namespace is left, and policed edits go
//     through again.
func TestInstallAsDocumented(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	ctx := t.Context()
	cm, err := env.StartCertManager(ctx, framework.CertManagerOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := cm.Stop(); err != nil {
			t.Errorf("stopping cert-manager: %v", err)
		}
	})
	const ns = "install-node"
	w := env.NewWorld(t, ns, framework.WorldSpec{Version: "v1.35.2", Running: []string{"v1.35.2"}, WorkerVersion: "v1.34.3"})
	setVersion := func(ctx context.Context, version string, opts ...client.PatchOption) error {
		kcp := w.KCP.DeepCopy()
		return env.Client.Patch(ctx, kcp, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"version":%q}}`, version)), opts...)
	}

	// A wrong image: the install applied before its image is on the node.
	documented(ctx, t, "kubectl apply -k config/default")
	require.Eventually(t, func() bool {
		for _, p := range guardPods(ctx, t) {
			for _, s := range p.Status.ContainerStatuses {
				if s.State.Waiting != nil && (s.State.Waiting.Reason == "ErrImagePull" || s.State.Waiting.Reason == "ImagePullBackOff") {
					return true
				}
			}
		}
		return false
	}, 2*time.Minute, time.Second, "the guard's Pods never failed to pull an image that is nowhere")
	dep := &appsv1.Deployment{}
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: guardNamespace, Name: guardDeployment}, dep))
	assert.Zero(t, dep.Status.AvailableReplicas, "the Deployment says no replica is available")
	assert.False(t, isArmed(ctx), "nothing armed the webhooks")
	require.NoError(t, setVersion(ctx, "v1.34.1"), "a guard that never started must block nothing, not even a downgrade it would refuse")

	// The image, built and imported as install.md says.
	documented(ctx, t, "make image VERSION=dev")
	imported := "ctr -n k8s.io images import bin/image/webhook-image_dev_linux_amd64.tar"
	if goruntime.GOARCH != "amd64" {
		t.Skipf("install.md's import command names the linux/amd64 tarball; this node is %s", goruntime.GOARCH)
	}
	documented(ctx, t, imported)
	// The kubelet retries a failed pull after a back-off of up to five
	// minutes; new Pods find the image at once.
	require.NoError(t, env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(guardNamespace), client.MatchingLabels{"app.kubernetes.io/name": "rollout-guard"}))
	rolledOut, cancel := context.WithTimeout(ctx, 4*time.Minute)
	documented(rolledOut, t, "kubectl -n rollout-guard-system rollout status deploy/rollout-guard-controller-manager")
	cancel()

	pods := guardPods(ctx, t)
	ready := 0
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				ready++
			}
		}
	}
	assert.Equal(t, 2, ready, "both replicas Ready")
	nsObj := &corev1.Namespace{}
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Name: guardNamespace}, nsObj))
	assert.Equal(t, "restricted", nsObj.Labels["pod-security.kubernetes.io/enforce"], "the Pods were admitted under the restricted profile")
	assert.True(t, isArmed(ctx), "a ready replica armed the webhooks")

	// cert-manager issued the serving certificate and injected its CA.
	secret := &corev1.Secret{}
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: guardNamespace, Name: servingSecret}, secret))
	require.NotEmpty(t, secret.Data["ca.crt"])
	for _, name := range []string{"rollout-guard-validating", "rollout-guard-mutating"} {
		var bundles [][]byte
		if name == "rollout-guard-validating" {
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Name: name}, c))
			for _, h := range c.Webhooks {
				bundles = append(bundles, h.ClientConfig.CABundle)
			}
		} else {
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Name: name}, c))
			for _, h := range c.Webhooks {
				bundles = append(bundles, h.ClientConfig.CABundle)
			}
		}
		require.NotEmpty(t, bundles, name)
		for _, b := range bundles {
			assert.Equal(t, base64.StdEncoding.EncodeToString(secret.Data["ca.crt"]), base64.StdEncoding.EncodeToString(b), "%s: caBundle is the serving certificate's CA", name)
		}
	}

	// The guard refuses through its Service.
	err = setVersion(ctx, refusedVersion)
	require.Error(t, err)
	assert.Contains(t, err.Error(), refusal)

	// whileEditing runs change while policed dry-run edits go on, and
	// checks that the guard answered every one of them.
	whileEditing := func(what string, change func()) {
		t.Helper()
		var answered atomic.Int64
		var failures sync.Map
		editing, stopEditing := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for editing.Err() == nil {
				err := setVersion(editing, refusedVersion, client.DryRunAll)
				switch {
				case editing.Err() != nil:
				case err != nil && strings.Contains(err.Error(), refusal):
					answered.Add(1)
				default:
					failures.Store(fmt.Sprint(err), true)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		change()
		stopEditing()
		wg.Wait()
		t.Logf("policed dry-run edits while %s: %d answered by the guard", what, answered.Load())
		assert.Positive(t, answered.Load())
		failures.Range(func(k, _ any) bool { t.Errorf("a policed edit failed while %s: %s", what, k); return true })
	}
	settled := func(image string) func() bool {
		return func() bool {
			d := &appsv1.Deployment{}
			if env.Client.Get(ctx, types.NamespacedName{Namespace: guardNamespace, Name: guardDeployment}, d) != nil {
				return false
			}
			if d.Spec.Template.Spec.Containers[0].Image != image || d.Status.ObservedGeneration != d.Generation {
				return false
			}
			return d.Status.ReadyReplicas == 2 && d.Status.UpdatedReplicas == 2 && d.Status.Replicas == 2
		}
	}
	installed := "rollout-guard/webhook:dev"

	// A replica deleted, as a drain evicts it.
	whileEditing("a replica was deleted and replaced", func() {
		victim := guardPods(ctx, t)[0]
		require.NoError(t, env.Client.Delete(ctx, &victim))
		require.Eventually(t, func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(&victim), &corev1.Pod{})) && settled(installed)()
		}, 3*time.Minute, 500*time.Millisecond, "the deleted replica was never replaced")
	})

	// The guard upgraded to a new image: a rolling update.
	upgraded := "rollout-guard/webhook:dev-next"
	_, err = node.Ctr(ctx, "images", "tag", "docker.io/"+installed, "docker.io/"+upgraded)
	require.NoError(t, err)
	whileEditing("the guard was upgraded with a rolling update", func() {
		d := &appsv1.Deployment{}
		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: guardNamespace, Name: guardDeployment}, d))
		old := map[string]bool{}
		for _, p := range guardPods(ctx, t) {
			old[p.Name] = true
		}
		d.Spec.Template.Spec.Containers[0].Image = upgraded
		require.NoError(t, env.Client.Update(ctx, d))
		require.Eventually(t, func() bool {
			for _, p := range guardPods(ctx, t) {
				if old[p.Name] {
					return false
				}
			}
			return settled(upgraded)()
		}, 4*time.Minute, 500*time.Millisecond, "the rolling update never finished")
	})

	// The serving certificate renewed by cert-manager: every replica serves
	// the new one without a restart.
	whileEditing("cert-manager renewed the serving certificate", func() {
		before := &corev1.Secret{}
		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: guardNamespace, Name: servingSecret}, before))
		require.NoError(t, framework.RenewCertificate(ctx, env.Client, guardNamespace, "rollout-guard-serving-cert"))
		var last string
		require.Eventually(t, func() bool {
			now := &corev1.Secret{}
			if err := env.Client.Get(ctx, types.NamespacedName{Namespace: guardNamespace, Name: servingSecret}, now); err != nil {
				last = err.Error()
				return false
			}
			if bytes.Equal(now.Data["tls.crt"], before.Data["tls.crt"]) {
				last = "the Secret still holds the old certificate"
				return false
			}
			block, _ := pem.Decode(now.Data["tls.crt"])
			if block == nil {
				last = "the Secret's tls.crt holds no PEM block"
				return false
			}
			for _, p := range guardPods(ctx, t) {
				served, err := servedCertificate(p.Status.PodIP)
				if err != nil || !bytes.Equal(served, block.Bytes) {
					last = fmt.Sprintf("Pod %s does not serve the new certificate yet (%v)", p.Name, err)
					return false
				}
			}
			return true
		}, 4*time.Minute, time.Second, "the renewed certificate never served by every replica: %s", &last)
	})

	// Uninstalled as documented.
	documented(ctx, t, "kubectl delete mutatingwebhookconfiguration rollout-guard-mutating")
	documented(ctx, t, "kubectl delete validatingwebhookconfiguration rollout-guard-validating")
	uninstall, cancel := context.WithTimeout(ctx, 3*time.Minute)
	documented(uninstall, t, "kubectl delete -k config/default --ignore-not-found")
	cancel()
	var vwcs admissionregistrationv1.ValidatingWebhookConfigurationList
	require.NoError(t, env.Client.List(ctx, &vwcs))
	var mwcs admissionregistrationv1.MutatingWebhookConfigurationList
	require.NoError(t, env.Client.List(ctx, &mwcs))
	for _, c := range vwcs.Items {
		assert.NotContains(t, c.Name, "rollout-guard", "left behind")
	}
	for _, c := range mwcs.Items {
		assert.NotContains(t, c.Name, "rollout-guard", "left behind")
	}
	var crs rbacv1.ClusterRoleList
	require.NoError(t, env.Client.List(ctx, &crs))
	for _, c := range crs.Items {
		assert.NotContains(t, c.Name, "rollout-guard", "ClusterRole left behind")
	}
	var crbs rbacv1.ClusterRoleBindingList
	require.NoError(t, env.Client.List(ctx, &crbs))
	for _, c := range crbs.Items {
		assert.NotContains(t, c.Name, "rollout-guard", "ClusterRoleBinding left behind")
	}
	var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
	require.NoError(t, env.Client.List(ctx, &vaps))
	for _, p := range vaps.Items {
		assert.NotContains(t, p.Name, "rollout-guard", "ValidatingAdmissionPolicy left behind")
	}
	var vapbs admissionregistrationv1.ValidatingAdmissionPolicyBindingList
	require.NoError(t, env.Client.List(ctx, &vapbs))
	for _, b := range vapbs.Items {
		assert.NotContains(t, b.Name, "rollout-guard", "ValidatingAdmissionPolicyBinding left behind")
	}
	err = env.Client.Get(ctx, types.NamespacedName{Name: guardNamespace}, &corev1.Namespace{})
	assert.True(t, apierrors.IsNotFound(err), "namespace %s left behind: %v", guardNamespace, err)
	require.NoError(t, setVersion(ctx, refusedVersion), "uninstalled, the guard blocks nothing")
}
