package faults

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// The guard's webhook configurations, as config/webhook names them.
const (
	validatingConfig = "rollout-guard-validating"
	mutatingConfig   = "rollout-guard-mutating"
)

// TestGuardKilled kills the guard (SIGKILL) and checks, while it is down,
// that the Cluster API controllers keep working — a scale-up of the worker
// pool gets a new machine that becomes ready and the status follows — and
// that a policed edit is refused, from any client, with a message that
// says the guard is unavailable. Then a change slips past the guard the way
// it does in real life (the webhook configurations are absent during an
// upgrade of the guard), the guard comes back, and its reconciler records
// the revision it missed: every earlier revision is still there, no
// revision number is used twice, and the next stamped edit continues the
// numbering.
func TestGuardKilled(t *testing.T) {
	requireClusterReady(t)
	ctx := context.Background()
	md := getMD(t)
	before := historyOf(t, md.UID)
	beforeHashes := byHash(t, before)
	t.Logf("history before:\n%s", framework.DescribeHistory(before))

	require.NoError(t, sb.Env.KillGuard(syscall.SIGKILL))
	downSince := time.Now()
	guardUp := false
	t.Cleanup(func() {
		if !guardUp {
			if err := sb.Env.StartGuard(context.Background()); err != nil {
				t.Errorf("starting the guard again: %v", err)
			}
		}
	})

	t.Run("controllers keep reconciling", func(t *testing.T) {
		// Scaling is not policed: the webhooks' matchConditions leave it alone.
		scale(t, workerMachinesCount+1)
		framework.WaitFor(t, readyTimeout, pollInterval, "a new ready worker and the MachineDeployment's status", func() (bool, string) {
			current := workerList(t)
			ready := int32(0)
			for _, m := range current {
				if sandbox.MachineReady(m) {
					ready++
				}
			}
			fresh := getMD(t)
			readyReplicas := ptr.Deref(fresh.Status.ReadyReplicas, 0)
			return ready == workerMachinesCount+1 && int32(len(current)) == workerMachinesCount+1 && readyReplicas == workerMachinesCount+1,
				fmt.Sprintf("%d machines, %d ready; status.readyReplicas %d", len(current), ready, readyReplicas)
		})
		scale(t, workerMachinesCount)
		framework.WaitFor(t, readyTimeout, pollInterval, "the pool back at its size", func() (bool, string) {
			current := workerList(t)
			fresh := getMD(t)
			return int32(len(current)) == workerMachinesCount && ptr.Deref(fresh.Status.Replicas, 0) == workerMachinesCount,
				fmt.Sprintf("%d machines, status.replicas %d", len(current), ptr.Deref(fresh.Status.Replicas, 0))
		})
	})

	t.Run("policed edits fail closed", func(t *testing.T) {
		fresh := getMD(t)
		edited := fresh.DeepCopy()
		setTemplateLabel(edited, "while-guard-down")
		err := framework.UserClient(t, sb, "dave@example.com").Patch(ctx, edited, client.MergeFrom(fresh))
		require.Error(t, err, "a template edit went through while the guard was down")
		assert.Contains(t, err.Error(), "failed calling webhook")
		assert.Contains(t, err.Error(), "rollout-guard.io")
		t.Logf("the API server's answer: %v", err)

		r := runRollout(t, "restart", "md/"+fresh.Name)
		assert.NotEqual(t, 0, r.Code, "rollout restart succeeded while the guard was down")
		assert.Contains(t, r.Stderr, "rollout-guard is unavailable")
		assert.Contains(t, r.Stderr, "nothing was changed")
		assert.Contains(t, r.Stderr, "kubectl -n rollout-guard-system get pods")
		assert.Equal(t, fresh.Spec.Template, getMD(t).Spec.Template, "the template changed while the guard was down")
	})

	// An upgrade window: the webhook configurations are gone, so a change
	// is admitted without the guard.
	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: validatingConfig}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: mutatingConfig}},
	} {
		require.NoError(t, sb.Client.Delete(ctx, obj))
	}
	var slipped *clusterv1.MachineDeployment
	framework.WaitFor(t, 30*time.Second, pollInterval, "the unregistered guard to stop being called", func() (bool, string) {
		fresh := getMD(t)
		edited := fresh.DeepCopy()
		setTemplateLabel(edited, "slipped-past")
		if err := framework.UserClient(t, sb, "erin@example.com").Patch(ctx, edited, client.MergeFrom(fresh)); err != nil {
			return false, err.Error()
		}
		slipped = edited
		return true, ""
	})
	slippedSnap, err := kinds.MachineDeployment.Snapshot(slipped)
	require.NoError(t, err)
	stamped, err := revisions.RecordFromAnnotations(slipped.Annotations)
	require.NoError(t, err)
	t.Logf("slipped past the guard: content %s, still stamped revision %d", slippedSnap.Hash, stamped.Revision)

	require.NoError(t, sb.Env.StartGuard(ctx))
	guardUp = true
	recordFigure("guard killed: down %s (scale up and down with ready machines, policed edits refused, one change slipped past)", time.Since(downSince).Round(time.Second))

	var after []revisions.Revision
	framework.WaitFor(t, 60*time.Second, pollInterval, "the reconciler to record the missed revision", func() (bool, string) {
		after = historyOf(t, md.UID)
		for _, r := range after {
			if r.Snapshot.Hash == slippedSnap.Hash {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d revisions, none of content %s", len(after), slippedSnap.Hash)
	})
	t.Logf("history after the guard came back:\n%s", framework.DescribeHistory(after))
	afterHashes := byHash(t, after) // fails on a revision number used twice
	for hash, nums := range beforeHashes {
		assert.Contains(t, afterHashes, hash, "revision %v lost", nums)
	}
	missed := afterHashes[slippedSnap.Hash]
	highestBefore := highestOf(before)
	assert.Equal(t, []int64{highestBefore + 1}, missed, "the missed revision's number")
	missedRev := revisionWithHash(after, slippedSnap.Hash)
	assert.Equal(t, revisions.ChangeAdopted, missedRev.Record.ChangeType, "the missed revision's change type")
	assert.Equal(t, history.UnadmittedCause, missedRev.Record.ChangeCause)
	assert.Empty(t, missedRev.Record.ChangedBy, "nobody knows who made the missed change")

	// The next stamped edit continues the numbering.
	require.NoError(t, sb.Env.WaitGuardSees(ctx, getMD(t), getKCP(t)))
	fresh := getMD(t)
	edited := fresh.DeepCopy()
	setTemplateLabel(edited, "after-guard-back")
	require.NoError(t, framework.UserClient(t, sb, "frank@example.com").Patch(ctx, edited, client.MergeFrom(fresh)))
	rec, err := revisions.RecordFromAnnotations(edited.Annotations)
	require.NoError(t, err)
	assert.Equal(t, highestBefore+2, rec.Revision, "the revision stamped after the missed one")
	assert.Equal(t, "frank@example.com", rec.ChangedBy)
	editedSnap, err := kinds.MachineDeployment.Snapshot(edited)
	require.NoError(t, err)
	framework.WaitFor(t, 60*time.Second, pollInterval, "the stamped revision recorded", func() (bool, string) {
		after = historyOf(t, md.UID)
		return revisionWithHash(after, editedSnap.Hash).Record.Revision != 0, fmt.Sprintf("%d revisions", len(after))
	})
	t.Logf("history after the next stamped edit:\n%s", framework.DescribeHistory(after))
	final := byHash(t, after)
	assert.Equal(t, []int64{highestBefore + 1}, final[slippedSnap.Hash], "the missed revision keeps its number")
	assert.Equal(t, []int64{highestBefore + 2}, final[editedSnap.Hash])
	requireClusterReady(t)
}

// workerMachinesCount is the demo's worker pool size, as an int32.
const workerMachinesCount = int32(workerMachines)

// workerList lists the demo's worker Machines by name.
func workerList(t *testing.T) map[string]*clusterv1.Machine {
	t.Helper()
	list := &clusterv1.MachineList{}
	require.NoError(t, sb.Client.List(context.Background(), list, client.InNamespace(demo.Namespace),
		client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: demo.MachineDeploymentName()}))
	out := map[string]*clusterv1.Machine{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// scale sets the demo MachineDeployment's replicas.
func scale(t *testing.T, replicas int32) {
	t.Helper()
	fresh := getMD(t)
	edited := fresh.DeepCopy()
	edited.Spec.Replicas = ptr.To(replicas)
	require.NoError(t, sb.Client.Patch(context.Background(), edited, client.MergeFrom(fresh)), "scaling to %d", replicas)
}

// setTemplateLabel sets a label of the machine template: a new revision
// that Cluster API applies in place, without replacing machines.
func setTemplateLabel(md *clusterv1.MachineDeployment, value string) {
	if md.Spec.Template.ObjectMeta.Labels == nil {
		md.Spec.Template.ObjectMeta.Labels = map[string]string{}
	}
	md.Spec.Template.ObjectMeta.Labels["faults.rollout-guard.io/step"] = value
}

// highestOf is the highest revision number in revs.
func highestOf(revs []revisions.Revision) int64 {
	var highest int64
	for _, r := range revs {
		highest = max(highest, r.Record.Revision)
		for _, n := range r.Record.History {
			highest = max(highest, n)
		}
	}
	return highest
}

// revisionWithHash returns the revision of content hash, or a zero Revision.
func revisionWithHash(revs []revisions.Revision, hash string) revisions.Revision {
	for _, r := range revs {
		if r.Snapshot.Hash == hash {
			return r
		}
	}
	return revisions.Revision{}
}
