package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/history"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// classWorld is ClusterClass demo-class and three Clusters with their
// recorded histories:
//   - alice created the class 4 days ago; bob rotated its workers'
//     infrastructure template 55 minutes ago;
//   - c7 and c9 are on the class (created by dave 3 days ago); the
//     topology controller rotated the template of c9's pool 50 minutes
//     ago, and of c7's pool 40 minutes ago — after erin set a variable of
//     c7's topology 45 minutes ago, which is what that step carried out;
//   - c8 is on another class, its pool rotated 50 minutes ago too.
func classWorld(t *testing.T) []client.Object {
	t.Helper()
	at := func(d time.Duration) time.Time { return historyNow.Add(-d) }
	stamp := func(obj client.Object, rec revisions.Record) {
		ann := map[string]string{}
		for k, v := range rec.Annotations() {
			if v != "" {
				ann[k] = v
			}
		}
		obj.SetAnnotations(ann)
	}
	rec := func(n int64, by, manager string, when time.Time, cause, ctype string) revisions.Record {
		return revisions.Record{Revision: n, History: []int64{n}, ChangedBy: by, ChangedAt: when, FieldManager: manager, ChangeCause: cause, ChangeType: ctype}
	}
	var objs []client.Object

	class := func(infra string) *clusterv1.ClusterClass {
		cc := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: "demo-class", UID: "uid-demo-class"}}
		cc.Spec.Infrastructure.TemplateRef = clusterv1.ClusterClassTemplateReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta2", Kind: "DevClusterTemplate", Name: "demo"}
		cc.Spec.Workers.MachineDeployments = []clusterv1.MachineDeploymentClass{{Class: "default-worker",
			Infrastructure: clusterv1.MachineDeploymentClassInfrastructureTemplate{TemplateRef: clusterv1.ClusterClassTemplateReference{
				APIVersion: "infrastructure.cluster.x-k8s.io/v1beta2", Kind: "DevMachineTemplate", Name: infra}}}}
		return cc
	}
	ccSnap := func(infra string) revisions.Snapshot {
		s, err := revisions.ForClusterClass(class(infra))
		require.NoError(t, err)
		return s
	}
	cause, err := revisions.ChangeCause(ccSnap("demo-md"), ccSnap("demo-md-v2"))
	require.NoError(t, err)
	live := class("demo-md-v2")
	classCreated := rec(1, "alice", "kubectl-create", at(96*time.Hour), "created", revisions.ChangeCreated)
	classRotated := rec(2, "bob", "kubectl-edit", at(55*time.Minute), cause, revisions.ChangeRollout)
	stamp(live, classRotated)
	objs = append(objs, live,
		revisions.RolloutRevision(live, core.ClusterClass.GVK, ccSnap("demo-md"), classCreated),
		revisions.RolloutRevision(live, core.ClusterClass.GVK, ccSnap("demo-md-v2"), classRotated))

	cluster := func(name, className string, variable string) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: name, UID: types.UID("uid-" + name)}}
		c.Spec.Topology.ClassRef.Name = className
		c.Spec.Topology.Version = "v1.35.0"
		c.Spec.Topology.Workers.MachineDeployments = []clusterv1.MachineDeploymentTopology{{Class: "default-worker", Name: "md-0"}}
		if variable != "" {
			c.Spec.Topology.Variables = []clusterv1.ClusterVariable{{Name: "workerImage", Value: apiextensionsv1.JSON{Raw: []byte(`"` + variable + `"`)}}}
		}
		return c
	}
	topSnap := func(c *clusterv1.Cluster) revisions.Snapshot {
		s, err := revisions.ForClusterTopology(c)
		require.NoError(t, err)
		return s
	}
	md := func(c *clusterv1.Cluster, infra string) *clusterv1.MachineDeployment {
		m := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: c.Name + "-md-0", UID: types.UID("uid-" + c.Name + "-md-0"),
			Labels: map[string]string{clusterv1.ClusterNameLabel: c.Name, clusterv1.ClusterTopologyOwnedLabel: ""}}}
		m.Spec.ClusterName = c.Name
		m.Spec.Template.Spec.Version = "v1.35.0"
		m.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: infra}
		return m
	}
	mdSnap := func(m *clusterv1.MachineDeployment) revisions.Snapshot {
		s, err := revisions.ForMachineDeployment(m)
		require.NoError(t, err)
		return s
	}
	for _, tc := range []struct {
		name, class, variable string
		edited                time.Duration // erin's topology edit, 0 for none
		rotated               time.Duration
	}{
		{name: "c7", class: "demo-class", variable: "img:v2", edited: 45 * time.Minute, rotated: 40 * time.Minute},
		{name: "c8", class: "other-class", rotated: 50 * time.Minute},
		{name: "c9", class: "demo-class", rotated: 50 * time.Minute},
	} {
		c := cluster(tc.name, tc.class, tc.variable)
		created := cluster(tc.name, tc.class, "")
		topologyCreated := rec(1, "dave", "kubectl-create", at(72*time.Hour), "created", revisions.ChangeCreated)
		objs = append(objs, revisions.RolloutRevision(c, core.Cluster.GVK, topSnap(created), topologyCreated))
		liveTopology := topologyCreated
		if tc.edited > 0 {
			cause, err := revisions.ChangeCause(topSnap(created), topSnap(c))
			require.NoError(t, err)
			liveTopology = rec(2, "erin", "kubectl-patch", at(tc.edited), cause, revisions.ChangeRollout)
			objs = append(objs, revisions.RolloutRevision(c, core.Cluster.GVK, topSnap(c), liveTopology))
		}
		stamp(c, liveTopology)
		old, rotated := md(c, "demo-md"), md(c, "demo-md-v2")
		mdCause, err := revisions.ChangeCause(mdSnap(old), mdSnap(rotated))
		require.NoError(t, err)
		mdRotated := rec(2, capiManager, history.TopologyFieldManager, at(tc.rotated), mdCause, revisions.ChangeRollout)
		stamp(rotated, mdRotated)
		objs = append(objs, c, rotated,
			revisions.RolloutRevision(rotated, core.MachineDeployment.GVK, mdSnap(old), rec(1, capiManager, history.TopologyFieldManager, at(72*time.Hour-time.Minute), "created", revisions.ChangeCreated)),
			revisions.RolloutRevision(rotated, core.MachineDeployment.GVK, mdSnap(rotated), mdRotated))
	}
	return objs
}

// TestHistoryClusterClass pins `rollout history clusterclass/demo-class`:
// the class's revisions with who, when, through which field manager and
// why, and what each rolled — c9's pool rotated by bob's class revision;
// c7's step follows erin's later topology edit, c8 is on another class,
// and the pools' creation followed their Clusters' creation, so none of
// them is the class's.
func TestHistoryClusterClass(t *testing.T) {
	cl := newFakeClient(classWorld(t)...)
	for _, name := range []string{"clusterclass/demo-class", "cc/demo-class", "clusterclasses/demo-class"} {
		out, errOut, code := runFake(t, cl, historyNow, "history", name)
		require.Equal(t, core.ExitOK, code, errOut)
		assert.Empty(t, errOut)
		golden(t, "history-clusterclass.txt", out)
	}

	out, errOut, code := runFake(t, cl, historyNow, "history", "cc/demo-class", "-o", "yaml")
	require.Equal(t, core.ExitOK, code, errOut)
	golden(t, "history-clusterclass.yaml", out)

	out, errOut, code = runFake(t, cl, historyNow, "history", "cc/demo-class", "--revision", "2", "-o", "yaml")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Contains(t, out, "kind: ClusterClass")
	assert.Contains(t, out, "name: demo-md-v2")

	out, errOut, code = runFake(t, cl, historyNow, "history", "cc/demo-class", "--diff", "--revision", "1")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Contains(t, out, "demo-md")
}

// TestHistoryClusterInterleavesTopologyEdits: `rollout history cluster/c7`
// shows erin's topology edit before the topology controller's step it
// caused, and who created the Cluster.
func TestHistoryClusterInterleavesTopologyEdits(t *testing.T) {
	cl := newFakeClient(classWorld(t)...)
	out, errOut, code := runFake(t, cl, historyNow, "history", "cluster/c7")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Empty(t, errOut)
	golden(t, "history-cluster-topology.txt", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5)
	assert.True(t, strings.HasPrefix(lines[3], "cluster/c7"), lines[3])
	assert.True(t, strings.HasPrefix(lines[4], "md/c7-md-0"), lines[4])
}

// TestUndoClusterClass: a ClusterClass is rolled back like any object with
// revisions — to its spec of revision 1 here —, shown field by field; a
// server dry run and --emit yaml change nothing, and the policy, which
// judges no class, warns of nothing.
func TestUndoClusterClass(t *testing.T) {
	cl := newFakeClient(classWorld(t)...)
	before := &clusterv1.ClusterClass{}
	require.NoError(t, cl.Get(t.Context(), client.ObjectKey{Namespace: topoNS, Name: "demo-class"}, before))

	out, errOut, code := runFake(t, cl, historyNow, "undo", "cc/demo-class", "--to-revision", "1", "--dry-run=server")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Empty(t, errOut)
	assert.Contains(t, out, "ClusterClass demo/demo-class: would roll back from revision 2 to revision 1 (server dry run: nothing stored)")
	assert.Contains(t, out, "workers.machineDeployments[default-worker].infrastructure.templateRef.name   demo-md-v2          demo-md")

	out, errOut, code = runFake(t, cl, historyNow, "undo", "cc/demo-class", "--to-revision", "1", "--emit", "yaml")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Contains(t, out, "kind: ClusterClass")
	assert.Contains(t, out, "name: demo-md\n")
	assert.NotContains(t, errOut, "Warning")

	after := &clusterv1.ClusterClass{}
	require.NoError(t, cl.Get(t.Context(), client.ObjectKey{Namespace: topoNS, Name: "demo-class"}, after))
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "nothing was changed")

}
