package rollout

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/status"
)

// statusPool is MachinePool mp-0 wanting 3 instances, with its status counts.
func statusPool(current, ready, upToDate, available int32) *clusterv1.MachinePool {
	mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mp-0", Generation: 2}}
	mp.Spec.Replicas = ptr.To[int32](3)
	mp.Status.ObservedGeneration = 2
	mp.Status.Replicas, mp.Status.ReadyReplicas = ptr.To(current), ptr.To(ready)
	mp.Status.UpToDateReplicas, mp.Status.AvailableReplicas = ptr.To(upToDate), ptr.To(available)
	return mp
}

// poolMachine is a Machine of MachinePool mp-0, ready and up to date or not.
func poolMachine(name string, good bool) clusterv1.Machine {
	status := metav1.ConditionFalse
	if good {
		status = metav1.ConditionTrue
	}
	m := clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{clusterv1.MachinePoolNameLabel: "mp-0"}}}
	m.Status.Phase = "Running"
	m.Status.Conditions = []metav1.Condition{
		{Type: clusterv1.MachineReadyCondition, Status: status, Reason: "R"},
		{Type: clusterv1.MachineUpToDateCondition, Status: status, Reason: "U"},
	}
	return m
}

// TestMachinePoolStatus: a MachinePool's rollout is judged on its status
// counts, and on its Machines when its provider gives it any.
func TestMachinePoolStatus(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		mp       *clusterv1.MachinePool
		machines []clusterv1.Machine
		complete bool
	}{
		{name: "counts all caught up, no Machines (most providers)", mp: statusPool(3, 3, 3, 3), complete: true},
		{name: "one instance not up to date, no Machines", mp: statusPool(3, 3, 2, 3)},
		{name: "one instance missing, no Machines", mp: statusPool(2, 2, 2, 2)},
		{name: "generation not observed yet", mp: func() *clusterv1.MachinePool { m := statusPool(3, 3, 3, 3); m.Generation = 3; return m }()},
		{name: "counts caught up, every Machine good", mp: statusPool(3, 3, 3, 3),
			machines: []clusterv1.Machine{poolMachine("mp-0-a", true), poolMachine("mp-0-b", true), poolMachine("mp-0-c", true)}, complete: true},
		{name: "counts caught up, one Machine not ready", mp: statusPool(3, 3, 3, 3),
			machines: []clusterv1.Machine{poolMachine("mp-0-a", true), poolMachine("mp-0-b", false), poolMachine("mp-0-c", true)}},
		{name: "counts caught up, a Machine short", mp: statusPool(3, 3, 3, 3),
			machines: []clusterv1.Machine{poolMachine("mp-0-a", true), poolMachine("mp-0-b", true)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := status.EvaluateStatusAt(tc.mp, tc.machines, nil, now)
			assert.Equal(t, "machinepool/mp-0", s.Object)
			assert.Equal(t, tc.complete, s.Complete, "%+v", s)
			assert.Len(t, s.Machines, len(tc.machines))
			// Without Machines the counts are of the provider's
			// instances, and no Machine is missing.
			if !s.Observed {
				assert.Contains(t, s.Summary(), "waiting for generation")
			} else if len(tc.machines) == 0 {
				assert.Contains(t, s.Summary(), " instances up to date")
				assert.NotContains(t, s.Summary(), "exist")
			} else {
				assert.Contains(t, s.Summary(), " machines up to date")
			}
		})
	}
}

// TestMachinePoolMachineLabels selects a pool's Machines by the label value
// Cluster API writes, hashed for a name that is no label value.
func TestMachinePoolMachineLabels(t *testing.T) {
	short := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "mp-0"}}
	assert.Equal(t, client.MatchingLabels{clusterv1.MachinePoolNameLabel: "mp-0"}, core.MachineLabels(short))
	long := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "pool-" + strings.Repeat("x", 70)}}
	assert.Equal(t, client.MatchingLabels{clusterv1.MachinePoolNameLabel: "hash_YSBc6g_z"}, core.MachineLabels(long))
	assert.Nil(t, core.MachineSetLabels(short), "a MachinePool has no MachineSets")
}

// TestMachinePoolKind: "mp" names MachinePools, whose objects the registry
// makes typed.
func TestMachinePoolKind(t *testing.T) {
	k, err := core.ParseKind("mp")
	require.NoError(t, err)
	assert.Equal(t, core.MachinePool.GVK, k.GVK)
	assert.Equal(t, core.MachinePool.GVK, core.KindOf(&clusterv1.MachinePool{}).GVK)
	assert.IsType(t, &clusterv1.MachinePool{}, core.MachinePool.New())
	assert.IsType(t, &clusterv1.MachinePoolList{}, core.MachinePool.NewList())
}

// TestClusterIncludesMachinePools: `history cluster/NAME` and `status
// cluster/NAME` cover the cluster's MachinePools after its control plane
// and MachineDeployments; another cluster's pool is not among them.
func TestClusterIncludesMachinePools(t *testing.T) {
	pool := func(name, cluster string) *clusterv1.MachinePool {
		mp := statusPool(3, 3, 3, 3)
		mp.Namespace, mp.Name, mp.UID = topoNS, name, types.UID("uid-"+name)
		mp.Spec.ClusterName = cluster
		mp.Spec.Template.Spec.Version = "v1.35.0"
		rec := revisions.Record{Revision: 1, History: []int64{1}, ChangedBy: "alice", ChangedAt: historyNow.Add(-time.Hour), ChangeCause: "created", ChangeType: revisions.ChangeCreated}
		mp.Annotations = rec.Annotations()
		return mp
	}
	mine, other := pool("mp-0", "c1"), pool("mp-other", "c2")
	snap, err := revisions.ForMachinePool(mine)
	require.NoError(t, err)
	rec, err := revisions.RecordFromAnnotations(mine.Annotations)
	require.NoError(t, err)
	objs := append(chainHistory(t), mine, other, revisions.RolloutRevision(mine, core.MachinePool.GVK, snap, rec))

	out, errOut, code := runFake(t, newFakeClient(objs...), historyNow, "history", "cluster/c1")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Regexp(t, `(?m)^mp/mp-0\s+1\s`, out, "the pool's revision among the cluster's")
	assert.NotContains(t, out, "mp-other")

	// A cluster without spec.topology is watched object by object.
	plain := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: "c2"}}
	out, errOut, code = runFake(t, newFakeClient(plain, other), historyNow, "status", "cluster/c2", "--watch=false")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "machinepool/mp-other: 3 of 3 instances up to date, 3 available\n", out)
}

// TestClusterPoolsReadOnlyWhereShown: a user who may not list MachinePools
// is told so by `history cluster/NAME`, which shows them, while `restart
// cluster/NAME` and `plan cluster/NAME --restart`, which leave pools alone,
// do not list them at all.
func TestClusterPoolsReadOnlyWhereShown(t *testing.T) {
	cl := withNameIndexes(fake.NewClientBuilder().WithScheme(core.Scheme()).WithObjects(objectsOf(chainDone)...)).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*clusterv1.MachinePoolList); ok {
				return apierrors.NewForbidden(core.MachinePool.GroupResource(), "", errors.New(`User "viewer" cannot list resource "machinepools"`))
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	_, errOut, code := runFake(t, cl, historyNow, "history", "cluster/c1")
	assert.Equal(t, core.ExitError, code)
	assert.Contains(t, errOut, `may not list machinepools.cluster.x-k8s.io in namespace "demo"`)

	for _, args := range [][]string{{"plan", "cluster/c1", "--restart"}, {"restart", "cluster/c1", "--yes"}} {
		_, errOut, code = runFake(t, cl, historyNow, args...)
		assert.Equal(t, core.ExitOK, code, "%v: %s", args, errOut)
	}
}
