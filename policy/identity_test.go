package policy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// identityKCP is KubeadmControlPlane demo-control-plane at version, owned
// by Cluster owner ("" for none) and labelled with label ("" for none).
func identityKCP(owner, label, version string) *controlplanev1.KubeadmControlPlane {
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-control-plane"}}
	if owner != "" {
		kcp.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: owner, UID: types.UID("u-" + owner)}}
	}
	if label != "" {
		kcp.Labels = map[string]string{clusterv1.ClusterNameLabel: label}
	}
	kcp.Spec.Version = version
	return kcp
}

func TestIdentityOf(t *testing.T) {
	tests := []struct {
		name      string
		old, new  client.Object
		naming    string
		wantNames []string
		wantMoved bool
	}{
		{name: "as Cluster API keeps it: one Cluster", old: identityKCP("demo", "demo", "v1"), new: identityKCP("demo", "demo", "v1"), naming: "demo", wantNames: []string{"demo"}},
		{name: "label re-pointed in the edit: both, the owner first", old: identityKCP("demo", "demo", "v1"), new: identityKCP("demo", "nope", "v1"), naming: "demo",
			wantNames: []string{"demo", "nope"}, wantMoved: true},
		{name: "label re-pointed earlier: the stored owner still names it", old: identityKCP("demo", "nope", "v1"), new: identityKCP("demo", "nope", "v1"),
			wantNames: []string{"demo", "nope"}},
		{name: "owner and label gone earlier: the Cluster naming it", old: identityKCP("", "", "v1"), new: identityKCP("", "", "v1"), naming: "demo", wantNames: []string{"demo"}},
		{name: "owner and label taken away in the edit: the stored ones", old: identityKCP("demo", "demo", "v1"), new: identityKCP("", "", "v1"),
			wantNames: []string{"demo"}, wantMoved: true},
		{name: "create: the Cluster naming it, then its own owner and label", new: identityKCP("", "nope", "v1"), naming: "demo", wantNames: []string{"demo", "nope"}},
		{name: "create of a control plane no Cluster names yet", new: identityKCP("", "", "v1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := identityOf(tt.old, tt.new, tt.naming)
			assert.Equal(t, tt.wantNames, got.names)
			assert.Equal(t, tt.wantMoved, got.moved)
		})
	}
}

// identityPolicy is a Policy reading objs (and a ClusterClass-less world).
func identityPolicy(t *testing.T, objs ...client.Object) Policy {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clusterv1.AddToScheme(s))
	require.NoError(t, controlplanev1.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	return Policy{Reader: c, Mapper: c.RESTMapper()}
}

// A control plane's change is judged against every Cluster it may belong
// to, whatever its label says after (or since) the edit; a label change
// alone is nothing to judge.
func TestControlPlaneJudgedAgainstItsStoredCluster(t *testing.T) {
	demo := demoCluster(nil)
	behind := pool("demo-md-0", "v1.32.4", false) // three minors behind v1.35
	tests := []struct {
		name      string
		old, new  *controlplanev1.KubeadmControlPlane
		objs      []client.Object
		wantRules []skew.RuleID
	}{
		{name: "upgrade with a pool three minors behind: refused", old: identityKCP("demo", "demo", "v1.35.2"), new: identityKCP("demo", "demo", "v1.36.1"),
			objs: []client.Object{demo, behind}, wantRules: []skew.RuleID{skew.RuleControlPlaneLeavesWorkerTooOld}},
		{name: "the same with the label re-pointed in the edit: refused", old: identityKCP("demo", "demo", "v1.35.2"), new: identityKCP("demo", "nope", "v1.36.1"),
			objs: []client.Object{demo, behind}, wantRules: []skew.RuleID{skew.RuleControlPlaneLeavesWorkerTooOld}},
		{name: "the label re-pointed by an earlier edit: refused", old: identityKCP("demo", "nope", "v1.35.2"), new: identityKCP("demo", "nope", "v1.36.1"),
			objs: []client.Object{demo, behind}, wantRules: []skew.RuleID{skew.RuleControlPlaneLeavesWorkerTooOld}},
		{name: "owner reference and label both gone: the Cluster naming it, refused", old: identityKCP("", "", "v1.35.2"), new: identityKCP("", "", "v1.36.1"),
			objs: []client.Object{demo, behind}, wantRules: []skew.RuleID{skew.RuleControlPlaneLeavesWorkerTooOld}},
		{name: "the label re-pointed alone: nothing to judge", old: identityKCP("demo", "demo", "v1.35.2"), new: identityKCP("demo", "nope", "v1.35.2"),
			objs: []client.Object{demo, behind}},
		{name: "upgrade with pools within skew: allowed", old: identityKCP("demo", "demo", "v1.35.2"), new: identityKCP("demo", "nope", "v1.36.1"),
			objs: []client.Object{demo, pool("demo-md-0", "v1.35.2", false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := identityPolicy(t, tt.objs...)
			d, _, err := p.Decide(context.Background(), tt.old, tt.new)
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.wantRules, rulesOf(d), "violations: %v", d.Violations)
		})
	}
}

// A worker pool whose spec.clusterName changed (which Cluster API's own
// webhooks refuse) is judged against both Clusters' control planes.
func TestPoolJudgedAgainstItsStoredCluster(t *testing.T) {
	p := identityPolicy(t, demoCluster(nil), identityKCP("demo", "demo", "v1.35.2"))
	oldMD, newMD := pool("demo-md-0", "v1.35.2", false), pool("demo-md-0", "v1.36.1", false)
	newMD.Spec.ClusterName = "nope"
	d, warnings, err := p.Decide(context.Background(), oldMD, newMD)
	require.NoError(t, err)
	assert.Equal(t, []skew.RuleID{skew.RuleWorkerNewerThanControlPlane}, rulesOf(d), "violations: %v", d.Violations)
	assert.Len(t, warnings, 1, "Cluster nope has no control plane to judge against")
}

// A created control plane is judged as an update from what its Cluster's
// control-plane Machines run; without Machines (a new cluster, or one
// `clusterctl move` is creating) only against its workers.
func TestCreatedControlPlaneJudgedAgainstItsMachines(t *testing.T) {
	at := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	workers := pool("demo-md-0", "v1.33.7", false)
	tests := []struct {
		name      string
		created   *controlplanev1.KubeadmControlPlane
		objs      []client.Object
		wantRules []skew.RuleID
	}{
		{name: "one minor below its Machines, across an etcd minor: refused", created: identityKCP("", "", "v1.33.7"),
			objs:      []client.Object{demoCluster(nil), workers, cpMachine("cp-0", "v1.34.3", at)},
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade, skew.RuleEtcdDowngrade}},
		{name: "labelled for another Cluster: its Cluster's Machines still count, refused", created: identityKCP("", "nope", "v1.33.7"),
			objs:      []client.Object{demoCluster(nil), workers, cpMachine("cp-0", "v1.34.3", at)},
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade, skew.RuleEtcdDowngrade}},
		{name: "at its Machines' version: allowed", created: identityKCP("", "demo", "v1.34.3"),
			objs: []client.Object{demoCluster(nil), workers, cpMachine("cp-0", "v1.34.3", at)}},
		{name: "one minor above its Machines: an upgrade, allowed", created: identityKCP("", "demo", "v1.35.2"),
			objs: []client.Object{demoCluster(nil), pool("demo-md-0", "v1.34.3", false), cpMachine("cp-0", "v1.34.3", at)}},
		{name: "two minors above its Machines: refused", created: identityKCP("", "demo", "v1.36.1"),
			objs:      []client.Object{demoCluster(nil), pool("demo-md-0", "v1.34.3", false), cpMachine("cp-0", "v1.34.3", at)},
			wantRules: []skew.RuleID{skew.RuleControlPlaneMinorSkip}},
		{name: "a new cluster, no Machines: allowed", created: identityKCP("", "", "v1.33.7"),
			objs: []client.Object{demoCluster(nil), workers}},
		{name: "no Cluster yet: allowed", created: identityKCP("", "", "v1.33.7")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := identityPolicy(t, tt.objs...)
			d, _, err := p.Decide(context.Background(), nil, tt.created)
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.wantRules, rulesOf(d), "violations: %v", d.Violations)
		})
	}
}

func TestCarriesHistory(t *testing.T) {
	changedAt := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	obj := func(stamped bool, created time.Time) client.Object {
		kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		if stamped {
			kcp.Annotations = (&revisions.Record{Revision: 3, ChangedBy: "alice", ChangedAt: changedAt, ChangeType: revisions.ChangeRollout}).Annotations()
		}
		return kcp
	}
	assert.False(t, carriesHistory(obj(true, changedAt)), "stamped as it was created")
	assert.False(t, carriesHistory(obj(true, changedAt.Add(time.Second))), "stored in the second after its stamp")
	assert.True(t, carriesHistory(obj(true, changedAt.Add(2*time.Second))), "stamped before it was created: carried")
	assert.True(t, carriesHistory(obj(true, changedAt.Add(30*24*time.Hour))), "moved a month later")
	assert.False(t, carriesHistory(obj(false, changedAt.Add(time.Hour))), "no stamps")
	assert.False(t, carriesHistory(obj(true, time.Time{})), "no creation time (a request's object before it is stored)")
}

// A control plane of another provider is judged against the Clusters it
// may belong to alike: a re-pointed label does not switch the worker
// rules off, and a created one is judged against its Cluster's
// control-plane Machines.
func TestContractControlPlaneIdentity(t *testing.T) {
	behind := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md"}}
	behind.Spec.ClusterName = "c1"
	behind.Spec.Template.Spec.Version = "v1.32.4"
	relabelled := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		u.SetLabels(map[string]string{clusterv1.ClusterNameLabel: "nope"})
		return u
	}
	p := contractWorld(t, behind)
	d, _, err := p.Decide(context.Background(), k3s("v1.35.2", nil, 0, nil), relabelled(k3s("v1.36.1", nil, 0, nil)))
	require.NoError(t, err)
	assert.Equal(t, []skew.RuleID{skew.RuleControlPlaneLeavesWorkerTooOld}, rulesOf(d), "violations: %v", d.Violations)

	machine := cpMachine("cp-0", "v1.35.2", time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC))
	machine.Spec.ClusterName = "c1"
	p = contractWorld(t, machine)
	d, _, err = p.Decide(context.Background(), nil, relabelled(k3s("v1.34.3", nil, 0, nil)))
	require.NoError(t, err)
	assert.Equal(t, []skew.RuleID{skew.RuleControlPlaneDowngrade}, rulesOf(d), "violations: %v", d.Violations)
	d, _, err = p.Decide(context.Background(), nil, k3s("v1.35.2", nil, 0, nil))
	require.NoError(t, err)
	assert.Empty(t, d.Violations, "at its Machines' version")
}
