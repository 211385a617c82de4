package clusterctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
	historyv1 "github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// target is a second sandbox, run as its own process (one environment per
// process): the management cluster clusters are moved to.
type target struct {
	client     client.Client
	kubeconfig string
	stdout     *sandbox.SyncBuffer
	// stop interrupts it and checks it stopped clean; the test's cleanup
	// calls it too.
	stop func()
}

// startTarget builds test/cmd/sandbox (make run's command) and starts it
// with --clusters 0 --class-cluster=false, as docs/sandbox.md says to start
// an empty management cluster, and waits until it says it is ready. Its
// stop, or else the test's cleanup, interrupts it and checks it stopped
// clean.
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
	var once sync.Once
	tg.stop = func() {
		once.Do(func() {
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
	}
	t.Cleanup(tg.stop)
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
// guards, its history with it: the cluster runs there and is gone from the
// source; `rollout history -o json` of its control plane and worker pool is
// what it was (numbers, authors, times, field managers, causes, restarts);
// the target recorded nothing for the move and kept the objects' stamps;
// its guard judges an undo to revision 1 with the versions the control
// plane ran before the move, numbers the next edit after the moved
// revisions, and allows a template switch. A directory backup of the target
// (`clusterctl move --to-directory`) restored into a fresh sandbox
// (`--from-directory`) brings that history back the same.
func TestMoveToAnEmptySandbox(t *testing.T) {
	ctx := context.Background()
	moved := sandbox.ClusterSpec{
		Name: "moved", Namespace: "move", ControlPlaneMachines: 1, WorkerMachines: 1,
		KubernetesVersion: sandbox.DefaultKubernetesVersion, MachineStartup: machineStartup,
	}
	require.NoError(t, sb.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: moved.Namespace}}))
	require.NoError(t, sb.CreateCluster(ctx, moved))
	sb.RequireClusterReady(t, moved.Namespace, moved.Name, rolloutTimeout)
	refs := makeHistory(t, moved)
	// clusterctl refuses to move a cluster still provisioning.
	sb.RequireClusterReady(t, moved.Namespace, moved.Name, rolloutTimeout)
	before := requireHistories(t, sb.Kubeconfig, moved.Namespace, refs)
	beforeRecords := recordsIn(t, sb.Client, moved.Namespace)
	beforeStamps := stampsIn(t, sb.Client, moved)
	require.Len(t, before["md/"+moved.MachineDeploymentName()].Revisions, 2, "the pool's history before the move")
	require.Len(t, before["kcp/"+moved.ControlPlaneName()].Revisions, 2, "the control plane's history before the move")

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

	requireClusterctl(t, "move", "-n", moved.Namespace, "--to-kubeconfig", tg.kubeconfig)

	err := sb.Client.Get(ctx, types.NamespacedName{Namespace: moved.Namespace, Name: moved.Name}, &clusterv1.Cluster{})
	assert.True(t, apierrors.IsNotFound(err), "Cluster %s/%s on the source after the move: %v", moved.Namespace, moved.Name, err)
	assert.Empty(t, recordsIn(t, sb.Client, moved.Namespace), "RolloutRevisions left on the source after the move")
	waitCtx, cancel := context.WithTimeout(ctx, rolloutTimeout)
	defer cancel()
	var state sandbox.ClusterState
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		state, err = sandbox.ReadClusterState(waitCtx, tg.client, moved.Namespace, moved.Name)
		require.NoError(c, err)
		assert.True(c, state.Ready(), "the moved cluster ready on the target: %s", state)
	}, rolloutTimeout, time.Second)

	requireSameHistory(t, tg.kubeconfig, tg.client, moved, refs, before, beforeRecords, beforeStamps, "on the target after the move")

	// The policy's memory moved too: an undo of the control plane to
	// revision 1 is a downgrade from what it ran, refused by the target's
	// guard, which changes nothing.
	undo := rolloutIn(t, tg.kubeconfig, moved.Namespace, "undo", "kcp/"+moved.ControlPlaneName(), "--to-revision", "1")
	assert.NotEqual(t, 0, undo.Code, "rollout undo to revision 1 on the target; stdout:\n%s", undo.Stdout)
	assert.Contains(t, undo.Stderr, "ControlPlaneDowngrade", "the refusal names the rule")
	assert.Contains(t, undo.Stderr, upgradeVersion, "the refusal names the version the control plane ran")
	kcp := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, tg.client.Get(ctx, types.NamespacedName{Namespace: moved.Namespace, Name: moved.ControlPlaneName()}, kcp))
	assert.Equal(t, upgradeVersion, kcp.Spec.Version, "the control plane's version after the refused undo")

	// The next edit is numbered after the moved revisions.
	highest := int64(0)
	for _, rev := range before["md/"+moved.MachineDeploymentName()].Revisions {
		highest = max(highest, rev.Revision)
	}
	sw := rolloutIn(t, tg.kubeconfig, moved.Namespace, "md/"+moved.MachineDeploymentName(), "--template", "devmachinetemplate/"+moved.MachineDeploymentName())
	require.Equal(t, 0, sw.Code, "a template switch on the target; stderr:\n%s", sw.Stderr)
	md := &clusterv1.MachineDeployment{}
	require.NoError(t, tg.client.Get(ctx, types.NamespacedName{Namespace: moved.Namespace, Name: moved.MachineDeploymentName()}, md))
	assert.Equal(t, fmt.Sprint(highest+1), md.Annotations[revisions.AnnotationRevision], "the number of the first revision made on the target")
	afterSwitch := requireHistories(t, tg.kubeconfig, moved.Namespace, refs)
	live := afterSwitch["md/"+moved.MachineDeploymentName()]
	require.NotEmpty(t, live.Revisions)
	assert.Equal(t, highest+1, live.LiveRevision, "the live revision after the switch")
	// The switch went back to revision 1's template: that content is live
	// again under the next number, and keeps its first.
	first := before["md/"+moved.MachineDeploymentName()].Revisions[0]
	var numbers []int64
	for _, rev := range live.Revisions {
		if rev.Hash == first.Hash {
			numbers = rev.History
		}
	}
	assert.Equal(t, []int64{first.Revision, highest + 1}, numbers, "the numbers of revision 1's content after the switch back to it")

	// A directory backup of the target, restored into a fresh sandbox.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		state, err = sandbox.ReadClusterState(waitCtx, tg.client, moved.Namespace, moved.Name)
		require.NoError(c, err)
		assert.True(c, state.Ready(), "the moved cluster ready on the target after the switch: %s", state)
	}, rolloutTimeout, time.Second)
	backup := requireHistories(t, tg.kubeconfig, moved.Namespace, refs)
	backupRecords := recordsIn(t, tg.client, moved.Namespace)
	backupStamps := stampsIn(t, tg.client, moved)
	dir := t.TempDir()
	r := clusterctlRun(t, "move", "--kubeconfig", tg.kubeconfig, "-n", moved.Namespace, "--to-directory", dir)
	require.Equal(t, 0, r.code, "clusterctl move --to-directory; stderr:\n%s", r.stderr)
	tg.stop()
	fresh := startTarget(t)
	r = clusterctlRun(t, "move", "--from-directory", dir, "--to-kubeconfig", fresh.kubeconfig)
	require.Equal(t, 0, r.code, "clusterctl move --from-directory; stderr:\n%s", r.stderr)
	requireSameHistory(t, fresh.kubeconfig, fresh.client, moved, refs, backup, backupRecords, backupStamps, "in a fresh sandbox restored from the target's backup")
}

// upgradeVersion is the version makeHistory upgrades the control plane to.
const upgradeVersion = "v1.36.1"

// makeHistory gives the cluster's worker pool a restart and a template
// switch and its control plane an upgrade to upgradeVersion, with the
// rollout CLI and a client, each rolled out; it returns the objects'
// references for `rollout history`.
func makeHistory(t *testing.T, spec sandbox.ClusterSpec) []string {
	t.Helper()
	ctx := context.Background()
	md, kcp := "md/"+spec.MachineDeploymentName(), "kcp/"+spec.ControlPlaneName()
	for _, args := range [][]string{
		{"restart", md},
		{md, "--template", "devmachinetemplate/" + spec.SpareWorkerTemplate()},
	} {
		r := rolloutIn(t, sb.Kubeconfig, spec.Namespace, args...)
		require.Equal(t, 0, r.Code, "rollout %v; stderr:\n%s", args, r.Stderr)
		sb.RequireClusterReady(t, spec.Namespace, spec.Name, rolloutTimeout)
	}
	cp := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, sb.Client.Get(ctx, types.NamespacedName{Namespace: spec.Namespace, Name: spec.ControlPlaneName()}, cp))
	upgrade := client.MergeFromWithOptions(cp.DeepCopy(), client.MergeFromWithOptimisticLock{})
	cp.Spec.Version = upgradeVersion
	require.NoError(t, sb.Client.Patch(ctx, cp, upgrade), "upgrading the control plane to %s", upgradeVersion)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &controlplanev1.KubeadmControlPlane{}
		require.NoError(c, sb.Client.Get(ctx, types.NamespacedName{Namespace: spec.Namespace, Name: spec.ControlPlaneName()}, got))
		assert.Equal(c, upgradeVersion, got.Status.Version, "the control plane's lowest running version")
	}, rolloutTimeout, time.Second)
	return []string{md, kcp}
}

// rolloutIn runs the rollout CLI in-process against the management cluster
// of kubeconfig, in namespace.
func rolloutIn(t *testing.T, kubeconfig, namespace string, args ...string) sandbox.CLIRun {
	t.Helper()
	var stdout, stderr sandbox.SyncBuffer
	code := framework.RunRollout(context.Background(), kubeconfig, t.TempDir(), &stdout, &stderr, append(append([]string(nil), args...), "-n", namespace)...)
	return sandbox.CLIRun{Code: code, Stdout: stdout.String(), Stderr: stderr.String()}
}

// historiesIn reads `rollout history REF -o json` of refs, the object's
// UID left out: a move creates the object anew, under a new UID.
func historiesIn(t *testing.T, kubeconfig, namespace string, refs []string) (map[string]historyv1.RolloutHistory, error) {
	out := map[string]historyv1.RolloutHistory{}
	for _, ref := range refs {
		r := rolloutIn(t, kubeconfig, namespace, "history", ref, "-o", "json")
		if r.Code != 0 {
			return nil, fmt.Errorf("rollout history %s: exit %d: %s", ref, r.Code, r.Stderr)
		}
		var h historyv1.RolloutHistory
		if err := json.Unmarshal([]byte(r.Stdout), &h); err != nil {
			return nil, fmt.Errorf("rollout history %s -o json: %w:\n%s", ref, err, r.Stdout)
		}
		h.Object.UID = ""
		out[ref] = h
	}
	return out, nil
}

func requireHistories(t *testing.T, kubeconfig, namespace string, refs []string) map[string]historyv1.RolloutHistory {
	t.Helper()
	h, err := historiesIn(t, kubeconfig, namespace, refs)
	require.NoError(t, err)
	return h
}

// recordsIn returns the RolloutRevisions of namespace, by name: their
// number, labels and annotations, the owner label checked against the
// owner reference and left out (a move gives the owner a new UID).
func recordsIn(t *testing.T, c client.Client, namespace string) map[string]string {
	t.Helper()
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, c.List(context.Background(), list, client.InNamespace(namespace)))
	out := map[string]string{}
	for _, rr := range list.Items {
		assert.Equal(t, string(revisions.OwnerUID(&rr)), rr.Labels[revisions.LabelOwnerUID], "the owner label of RolloutRevision %s", rr.Name)
		labels := maps.Clone(rr.Labels)
		delete(labels, revisions.LabelOwnerUID)
		ref := metav1.GetControllerOf(&rr)
		require.NotNil(t, ref, "RolloutRevision %s has no controller owner", rr.Name)
		out[rr.Name] = fmt.Sprintf("revision %d of %s/%s, labels %v, annotations %v", rr.Revision, ref.Kind, ref.Name, labels, rr.Annotations)
	}
	return out
}

// stampsIn returns the project's annotations of the cluster's control
// plane and worker pool, but their signature: each management cluster's
// guard signs the stamps it keeps with its own key (the target's signs
// what a move carries, once it knows its user may restore history), so
// the signature is whether it is there, not its value.
func stampsIn(t *testing.T, c client.Client, spec sandbox.ClusterSpec) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, obj := range []client.Object{&controlplanev1.KubeadmControlPlane{}, &clusterv1.MachineDeployment{}} {
		name := spec.ControlPlaneName()
		if _, ok := obj.(*clusterv1.MachineDeployment); ok {
			name = spec.MachineDeploymentName()
		}
		require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: spec.Namespace, Name: name}, obj))
		for k, v := range obj.GetAnnotations() {
			if k == revisions.AnnotationSignature {
				v = "signed"
			}
			if strings.HasPrefix(k, revisions.Prefix) {
				out[fmt.Sprintf("%T %s", obj, k)] = v
			}
		}
	}
	return out
}

// requireSameHistory waits until the history of the cluster's objects in
// the management cluster of kubeconfig is want, then checks that it
// recorded nothing more (its RolloutRevisions are wantRecords) and kept the
// objects' stamps (wantStamps); where names the management cluster.
func requireSameHistory(t *testing.T, kubeconfig string, c client.Client, spec sandbox.ClusterSpec, refs []string, want map[string]historyv1.RolloutHistory,
	wantRecords, wantStamps map[string]string, where string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got, err := historiesIn(t, kubeconfig, spec.Namespace, refs)
		require.NoError(ct, err)
		for _, ref := range refs {
			assert.Equal(ct, want[ref], got[ref], "rollout history %s -o json %s", ref, where)
		}
	}, rolloutTimeout, 2*time.Second)
	assert.Equal(t, wantRecords, recordsIn(t, c, spec.Namespace), "the RolloutRevisions %s: none recorded for the move itself", where)
	assert.Equal(t, wantStamps, stampsIn(t, c, spec), "the objects' stamps %s", where)
}
