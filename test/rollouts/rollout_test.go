package rollouts

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// The tests below run in this order (see the package documentation).

// TestMachineDeploymentRollsToSpareTemplate switches the worker pool to its
// spare DevMachineTemplate: Cluster API replaces every machine with one
// cloned from the new template, and the guard stamps the change with the
// next revision and the user who made it, and records both revisions.
func TestMachineDeploymentRollsToSpareTemplate(t *testing.T) {
	requireClusterReady(t)
	ctx := context.Background()
	old := machines(t, workerLabels())
	require.Len(t, old, workerMachines)

	md := &clusterv1.MachineDeployment{}
	key := client.ObjectKey{Namespace: demo.Namespace, Name: demo.MachineDeploymentName()}
	require.NoError(t, sb.Client.Get(ctx, key, md))
	from, to := md.Spec.Template.Spec.InfrastructureRef.Name, demo.SpareWorkerTemplate()
	if from == to { // run again in the same sandbox: switch back
		to = demo.MachineDeploymentName()
	}
	prev, err := strconv.ParseInt(md.Annotations[revisions.AnnotationRevision], 10, 64)
	require.NoError(t, err, "the guard stamped no revision on %s when it was created", key)

	const user = "alice@example.com"
	base := md.DeepCopy()
	md.Spec.Template.Spec.InfrastructureRef.Name = to
	begin := time.Now()
	require.NoError(t, framework.UserClient(t, sb, user).Patch(ctx, md, client.MergeFrom(base)))

	ann := md.Annotations
	assert.Equal(t, strconv.FormatInt(prev+1, 10), ann[revisions.AnnotationRevision], "revision stamp")
	assert.Equal(t, user, ann[revisions.AnnotationChangedBy], "changed-by stamp")
	assert.Equal(t, revisions.ChangeRollout, ann[revisions.AnnotationChangeType], "change-type stamp")
	assert.Contains(t, ann[revisions.AnnotationChangeCause], fmt.Sprintf("infrastructureRef %s → %s", from, to), "change-cause stamp")

	doneAt := waitReplaced(t, replaced{
		what:     "MachineDeployment " + md.Name,
		labels:   workerLabels(),
		old:      old,
		replicas: workerMachines,
		check:    clonedFrom(to),
		progress: func() (sandbox.RolloutState, error) {
			fresh := &clusterv1.MachineDeployment{}
			err := sb.Client.Get(ctx, key, fresh)
			return sandbox.MachineDeploymentState(fresh), err
		},
	})
	took := doneAt.Sub(begin)
	t.Logf("MachineDeployment %s rolled %d machines to %s in %s", md.Name, workerMachines, to, took.Round(100*time.Millisecond))
	recordTiming(fmt.Sprintf("MachineDeployment template switch (%d machines replaced)", workerMachines), took)

	// History: the replaced revision was recorded at admission, the live
	// one (with its user) by the guard's reconciler.
	requireHistory(t, md.UID, map[int64]string{prev + 1: user}, prev)
	requireClusterReady(t)
}

// TestControlPlaneUpgradeRefusesDowngrade upgrades the control plane by one
// minor. While its machines are being replaced, an edit back to the old
// version is refused by the guard (rule ControlPlaneDowngrade) and the
// rollout carries on; once done, every control-plane machine runs the new
// version and the same downgrade through the real kubectl is refused too.
func TestControlPlaneUpgradeRefusesDowngrade(t *testing.T) {
	requireClusterReady(t)
	ctx := context.Background()
	old := machines(t, controlPlaneLabels())
	require.Len(t, old, controlPlaneMachines)

	kcp := &controlplanev1.KubeadmControlPlane{}
	key := client.ObjectKey{Namespace: demo.Namespace, Name: demo.ControlPlaneName()}
	require.NoError(t, sb.Client.Get(ctx, key, kcp))
	from := kcp.Spec.Version
	current, err := semver.ParseTolerant(from)
	require.NoError(t, err)
	to := fmt.Sprintf("v%d.%d.1", current.Major, current.Minor+1)
	prev, err := strconv.ParseInt(kcp.Annotations[revisions.AnnotationRevision], 10, 64)
	require.NoError(t, err, "the guard stamped no revision on %s when it was created", key)

	const user = "bob@example.com"
	bob := framework.UserClient(t, sb, user)
	base := kcp.DeepCopy()
	kcp.Spec.Version = to
	begin := time.Now()
	require.NoError(t, bob.Patch(ctx, kcp, client.MergeFrom(base)))
	assert.Equal(t, strconv.FormatInt(prev+1, 10), kcp.Annotations[revisions.AnnotationRevision], "revision stamp")
	assert.Equal(t, user, kcp.Annotations[revisions.AnnotationChangedBy], "changed-by stamp")

	// Mid-rollout: wait for the first machine at the new version, then try
	// to go back.
	framework.WaitFor(t, rolloutTimeout, pollInterval, "a control-plane machine at "+to, func() (bool, string) {
		current := machines(t, controlPlaneLabels())
		for name, m := range current {
			if _, isOld := old[name]; !isOld && m.Spec.Version == to {
				return true, ""
			}
		}
		return false, fmt.Sprintf("control-plane machines %v", names(current))
	})
	refused := kcp.DeepCopy()
	refused.Spec.Version = from
	err = bob.Patch(ctx, refused, client.MergeFrom(kcp))
	require.Error(t, err, "a downgrade from %s to %s mid-rollout was let through", to, from)
	assert.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "want a refusal, got %v", err)
	assert.Contains(t, err.Error(), "[rule ControlPlaneDowngrade]")
	assert.Contains(t, err.Error(), fmt.Sprintf("Kubernetes downgrade from %s to %s", to, from))
	t.Logf("refused mid-rollout: %v", err)

	doneAt := waitReplaced(t, replaced{
		what:     "KubeadmControlPlane " + kcp.Name,
		labels:   controlPlaneLabels(),
		old:      old,
		replicas: controlPlaneMachines,
		check: func(m *clusterv1.Machine) error {
			if m.Spec.Version != to {
				return fmt.Errorf("version %s", m.Spec.Version)
			}
			if m.Status.NodeInfo == nil || m.Status.NodeInfo.KubeletVersion != to {
				return fmt.Errorf("node not reporting %s yet", to)
			}
			return nil
		},
		progress: func() (sandbox.RolloutState, error) {
			fresh := &controlplanev1.KubeadmControlPlane{}
			err := sb.Client.Get(ctx, key, fresh)
			return sandbox.ControlPlaneState(fresh), err
		},
	})
	took := doneAt.Sub(begin)
	t.Logf("KubeadmControlPlane %s upgraded %s → %s (%d control-plane machine(s) replaced) in %s", kcp.Name, from, to, controlPlaneMachines, took.Round(100*time.Millisecond))
	recordTiming(fmt.Sprintf("KubeadmControlPlane upgrade %s → %s (%d machine replaced)", from, to, controlPlaneMachines), took)

	fresh := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, sb.Client.Get(ctx, key, fresh))
	assert.Equal(t, to, fresh.Spec.Version, "the refused downgrade changed spec.version")
	assert.Equal(t, strconv.FormatInt(prev+1, 10), fresh.Annotations[revisions.AnnotationRevision], "the refused downgrade consumed a revision")

	// After the rollout, through the real kubectl as a user would.
	out, err := kubectl("patch", "kcp", kcp.Name, "-n", demo.Namespace, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"version":%q}}`, from))
	require.Error(t, err, "kubectl downgrade was let through: %s", out)
	assert.Contains(t, out, "[rule ControlPlaneDowngrade]")
	requireHistory(t, kcp.UID, map[int64]string{prev + 1: user}, prev)
	requireClusterReady(t)
}

// clonedFrom checks that a machine's DevMachine was cloned from template.
func clonedFrom(template string) func(*clusterv1.Machine) error {
	return func(m *clusterv1.Machine) error {
		dm := &infrav1.DevMachine{}
		key := client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.InfrastructureRef.Name}
		if err := sb.Client.Get(context.Background(), key, dm); err != nil {
			return fmt.Errorf("reading DevMachine %s: %w", key.Name, err)
		}
		if got := dm.Annotations[clusterv1.TemplateClonedFromNameAnnotation]; got != template {
			return fmt.Errorf("cloned from %q, want %q", got, template)
		}
		return nil
	}
}

// requireHistory waits until the guard's RolloutRevisions of the object
// with uid record every revision of live with its user, and revision
// replaced (without checking its user: the demo was created by the admin).
func requireHistory(t *testing.T, uid types.UID, live map[int64]string, replaced int64) {
	t.Helper()
	var last string
	framework.WaitFor(t, rolloutTimeout, pollInterval, "the revisions in the guard's history", func() (bool, string) {
		list := &rgv1alpha1.RolloutRevisionList{}
		require.NoError(t, sb.Client.List(context.Background(), list,
			client.InNamespace(demo.Namespace), client.MatchingLabels{revisions.LabelOwnerUID: string(uid)}))
		byRevision := map[int64]string{} // revision → user
		for i := range list.Items {
			rev, err := revisions.FromRolloutRevision(&list.Items[i])
			require.NoError(t, err)
			for _, n := range rev.Record.History {
				byRevision[n] = rev.Record.ChangedBy
			}
		}
		last = fmt.Sprintf("%d RolloutRevisions, revision → user: %v", len(list.Items), byRevision)
		if _, ok := byRevision[replaced]; !ok {
			return false, last
		}
		for n, user := range live {
			if got, ok := byRevision[n]; !ok || got != user {
				return false, last
			}
		}
		return true, last
	})
	t.Logf("history: %s", last)
}

// kubectl runs the repository's bin/kubectl against the sandbox and returns
// its combined output.
func kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(sb.Env.BinDir, "kubectl"), append([]string{"--kubeconfig", sb.Kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
