package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// TestHistoryDiffAndRevision: --diff compares a revision (the previous one
// by default) with the live object; --revision N prints its record and
// content; an unknown number is refused with the numbers there are.
func TestHistoryDiffAndRevision(t *testing.T) {
	cl := newFakeClient(gitOpsWorld(t, nil)...)
	out, errOut, code := runFake(t, cl, gitOpsNow, "history", "md/c1-md-0", "--diff")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "FIELD     LIVE (REVISION 3)   REVISION 2\nversion   v1.34.2             v1.34.1   (rolls out)\n", out)

	out, errOut, code = runFake(t, cl, gitOpsNow, "history", "md/c1-md-0", "--diff", "--revision", "3")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "MachineDeployment demo/c1-md-0: revision 3 matches the live object\n", out)

	out, errOut, code = runFake(t, cl, gitOpsNow, "history", "kcp/c1-control-plane", "--revision", "1")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.True(t, strings.HasPrefix(out, "# KubeadmControlPlane demo/c1-control-plane, revision 1\n"), out)
	assert.True(t, strings.HasSuffix(out, "\nrevision: 1\nversion: v1.34.2\ncontent: # spec.version, spec.machineTemplate and spec.kubeadmConfigSpec\n"+
		"  machineTemplate:\n    metadata:\n      labels:\n        tier: old\n  version: v1.34.2\n"), out)

	_, errOut, code = runFake(t, cl, gitOpsNow, "history", "md/c1-md-0", "--revision", "7")
	assert.Equal(t, core.ExitError, code)
	assert.Equal(t, "error: MachineDeployment demo/c1-md-0 has no revision 7; recorded revisions: 1, 2, 3\n", errOut)
}

// TestHistoryUntracked: without the guard's records, history shows what
// the cluster keeps: a MachineDeployment's MachineSets (its own, by their
// revision), and of a KubeadmControlPlane only the live revision.
func TestHistoryUntracked(t *testing.T) {
	created := metav1.NewTime(gitOpsNow.Add(-48 * time.Hour))
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: "md", UID: "md-uid"}}
	md.Spec.ClusterName = "c1"
	set := func(name, rev, version string, replicas int32, owner string) *clusterv1.MachineSet {
		ms := &clusterv1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: name, CreationTimestamp: created,
			Labels:          map[string]string{clusterv1.MachineDeploymentNameLabel: "md"},
			Annotations:     map[string]string{clusterv1.RevisionAnnotation: rev},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Name: "md", UID: "md-uid"}}}}
		if owner != "" {
			ms.OwnerReferences[0].UID = "other"
		}
		ms.Spec.Replicas = ptr.To(replicas)
		ms.Spec.Template.Spec.Version = version
		ms.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{Kind: "DevMachineTemplate", Name: name}
		return ms
	}
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: "cp", CreationTimestamp: created}}
	kcp.Spec.Version = "v1.34.2"
	cl := newFakeClient(md, kcp, set("md-b", "10", "v1.34.2", 3, ""), set("md-a", "9", "v1.34.1", 0, ""), set("other", "1", "v1.30.0", 1, "other"))

	out, errOut, code := runFake(t, cl, gitOpsNow, "history", "md/md")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, `No revision history recorded for MachineDeployment demo/md: no RolloutRevisions and no rollout-guard.io/ stamps. Is rollout-guard installed? It records every change from the moment it is.
What the cluster still has: the machinedeployment.clusters.x-k8s.io/revision annotations of its MachineSets (Cluster API deletes old MachineSets, and records no author or cause):
REVISION   MACHINESET   VERSION   INFRASTRUCTURE            BOOTSTRAP   REPLICAS   AGE
9          md-a         v1.34.1   DevMachineTemplate/md-a   <none>      0          2d
10         md-b         v1.34.2   DevMachineTemplate/md-b   <none>      3          2d
`, out)

	out, errOut, code = runFake(t, cl, gitOpsNow, "history", "kcp/cp")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, `No revision history recorded for KubeadmControlPlane demo/cp: no RolloutRevisions and no rollout-guard.io/ stamps. Is rollout-guard installed? It records every change from the moment it is.
A KubeadmControlPlane keeps no history of its own; only the live revision is known:
REVISION   VERSION   INFRASTRUCTURE   BOOTSTRAP   AGE
live       v1.34.2   <none>           inline      2d
`, out)

	out, errOut, code = runFake(t, cl, gitOpsNow, "history", "md/md", "-o", "json")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Contains(t, out, `"recorded": false`)
	assert.Contains(t, out, `"machineSet": "md-b"`)
}
