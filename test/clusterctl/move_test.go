package clusterctl

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// target is a second sandbox, run as its own process (one environment per
// process): the management cluster clusters are moved to.
type target struct {
	client     client.Client
	kubeconfig string
	stdout     *sandbox.SyncBuffer
}

// startTarget builds test/cmd/sandbox (make run's command) and starts it
// with --clusters 0 --class-cluster=false, as docs/sandbox.md says to start
// an empty management cluster, and waits until it says it is ready. The
// test's cleanup interrupts it and checks it stopped clean.
func startTarget(t *testing.T) *target {
	t.Helper()
	work := t.TempDir()
	bin := filepath.Join(work, "sandbox")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sandbox")
	build.Dir = ".."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/sandbox: %s", out)

	tg := &target{stdout: &sandbox.SyncBuffer{}, kubeconfig: filepath.Join(work, "state", "kubeconfig")}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--dir", filepath.Join(work, "state"), "--bin-dir", sb.Env.BinDir, "--clusters", "0", "--class-cluster=false")
	cmd.Stdout, cmd.Stderr = tg.stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		require.NoError(t, cmd.Process.Signal(os.Interrupt))
		select {
		case err := <-exited:
			assert.NoError(t, err, "the target sandbox's exit after an interrupt; stdout:\n%s\nstderr:\n%s", tg.stdout.String(), stderr.String())
			assert.Contains(t, tg.stdout.String(), "sandbox stopped", "the target sandbox's output")
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			t.Errorf("the target sandbox did not stop within 2 minutes of an interrupt; stdout:\n%s", tg.stdout.String())
		}
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		select {
		case err := <-exited:
			exited <- err
			require.Fail(c, "the target sandbox ended", "%v; stdout:\n%s\nstderr:\n%s", err, tg.stdout.String(), stderr.String())
		default:
		}
		assert.Contains(c, tg.stdout.String(), "sandbox ready in", "the target sandbox's output")
	}, 3*time.Minute, time.Second)

	cfg, err := clientcmd.BuildConfigFromFlags("", tg.kubeconfig)
	require.NoError(t, err)
	tg.client, err = client.New(cfg, client.Options{Scheme: sb.Scheme})
	require.NoError(t, err)
	return tg
}

// `sandbox --clusters 0 --class-cluster=false` is an empty management
// cluster with its providers in clusterctl's inventory as `clusterctl init`
// leaves them, and `clusterctl move` carries a cluster to it through both
// guards: the cluster runs there, is gone from the source, and the target's
// guard polices it (a downgrade refused with the guard's rule, a template
// switch allowed).
func TestMoveToAnEmptySandbox(t *testing.T) {
	ctx := context.Background()
	moved := sandbox.ClusterSpec{
		Name: "moved", Namespace: "move", ControlPlaneMachines: 1, WorkerMachines: 1,
		KubernetesVersion: sandbox.DefaultKubernetesVersion, MachineStartup: machineStartup,
	}
	require.NoError(t, sb.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: moved.Namespace}}))
	require.NoError(t, sb.CreateCluster(ctx, moved))
	tg := startTarget(t)
	assert.Contains(t, tg.stdout.String(), "a management cluster with the Cluster API controllers", "the tour of an empty sandbox")

	clusters := &clusterv1.ClusterList{}
	require.NoError(t, tg.client.List(ctx, clusters))
	assert.Empty(t, clusters.Items, "Clusters in the empty sandbox")
	providers := &unstructured.UnstructuredList{}
	providers.SetAPIVersion("clusterctl.cluster.x-k8s.io/v1alpha3")
	providers.SetKind("ProviderList")
	require.NoError(t, tg.client.List(ctx, providers))
	var got []string
	for _, p := range providers.Items {
		typ, _, _ := unstructured.NestedString(p.Object, "type")
		version, _, _ := unstructured.NestedString(p.Object, "version")
		got = append(got, p.GetNamespace()+"/"+p.GetName()+" "+typ+" "+version)
	}
	_, capiVersion, _ := strings.Cut(filepath.Base(sb.Env.ClusterAPIDir), "@")
	assert.ElementsMatch(t, []string{
		"capi-system/cluster-api CoreProvider " + capiVersion,
		"capi-kubeadm-bootstrap-system/bootstrap-kubeadm BootstrapProvider " + capiVersion,
		"capi-kubeadm-control-plane-system/control-plane-kubeadm ControlPlaneProvider " + capiVersion,
		"capd-system/infrastructure-docker InfrastructureProvider " + capiVersion,
	}, got, "clusterctl's provider inventory")

	// clusterctl refuses to move a cluster still provisioning.
	sb.RequireClusterReady(t, moved.Namespace, moved.Name, rolloutTimeout)
	requireClusterctl(t, "move", "-n", moved.Namespace, "--to-kubeconfig", tg.kubeconfig)

	err := sb.Client.Get(ctx, types.NamespacedName{Namespace: moved.Namespace, Name: moved.Name}, &clusterv1.Cluster{})
	assert.True(t, apierrors.IsNotFound(err), "Cluster %s/%s on the source after the move: %v", moved.Namespace, moved.Name, err)
	waitCtx, cancel := context.WithTimeout(ctx, rolloutTimeout)
	defer cancel()
	var state sandbox.ClusterState
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		state, err = sandbox.ReadClusterState(waitCtx, tg.client, moved.Namespace, moved.Name)
		require.NoError(c, err)
		assert.True(c, state.Ready(), "the moved cluster ready on the target: %s", state)
	}, rolloutTimeout, time.Second)

	kcp := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, tg.client.Get(ctx, types.NamespacedName{Namespace: moved.Namespace, Name: moved.ControlPlaneName()}, kcp))
	downgrade := client.MergeFrom(kcp.DeepCopy())
	kcp.Spec.Version = "v1.34.2"
	err = tg.client.Patch(ctx, kcp, downgrade)
	require.Error(t, err, "a control-plane downgrade on the target")
	assert.Contains(t, err.Error(), "rollout-guard", "the refusal comes from the target's guard")
	assert.Contains(t, err.Error(), "[rule ControlPlaneDowngrade]", "the refusal names the rule")

	md := &clusterv1.MachineDeployment{}
	require.NoError(t, tg.client.Get(ctx, types.NamespacedName{Namespace: moved.Namespace, Name: moved.MachineDeploymentName()}, md))
	switchTemplate := client.MergeFrom(md.DeepCopy())
	md.Spec.Template.Spec.InfrastructureRef.Name = moved.SpareWorkerTemplate()
	require.NoError(t, tg.client.Patch(ctx, md, switchTemplate), "a template switch on the target")
}
