package policy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// The states of a Cluster "demo" for the rule of a control plane that never
// had a Machine.
func demoCluster(mutate func(*clusterv1.Cluster)) *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo"}}
	c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "demo-control-plane"}
	c.Spec.Topology.ClassRef.Name = "demo-class"
	if mutate != nil {
		mutate(c)
	}
	return c
}

// provisioned: infrastructure ready and an endpoint, unpaused: the
// control-plane controller creates the first Machine now.
func provisioned(c *clusterv1.Cluster) {
	c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.0.1", Port: 6443}
}

func pausedSpec(c *clusterv1.Cluster) { provisioned(c); c.Spec.Paused = ptr.To(true) }

func pausedAnnotation(c *clusterv1.Cluster) {
	provisioned(c)
	c.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
}

// A KubeadmControlPlane that has never had a Machine may be set back after a
// version bump, and to any version: it has run nothing. It must be a fact
// that it never had one, and that it cannot get its first one while the
// change is admitted; otherwise the bump counts as run.
func TestControlPlaneThatNeverHadAMachine(t *testing.T) {
	bumpedAt := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	// v1.35.2 (revision 1) → v1.36.1 (revision 2), both stamped as run.
	stamp := &revisions.Record{Revision: 2, History: []int64{2}, ChangedBy: "alice", ChangedAt: bumpedAt, ChangeType: revisions.ChangeRollout}
	highest := &revisions.HighestRun{Kubernetes: "v1.36.1", KubernetesRevision: 2, Etcd: "3.6.8", EtcdRevision: 2,
		Before: &revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 1, Etcd: "3.6.6", EtcdRevision: 1}, BeforeRevision: 2}
	initialized := func(k *controlplanev1.KubeadmControlPlane) {
		k.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	}
	oneReplica := func(k *controlplanev1.KubeadmControlPlane) { k.Status.Replicas = ptr.To[int32](1) }
	remediated := func(k *controlplanev1.KubeadmControlPlane) { k.Status.LastRemediation.Machine = "cp-0" }
	kcpPaused := func(k *controlplanev1.KubeadmControlPlane) { k.Annotations[clusterv1.PausedAnnotation] = "" }
	movedAt := func(created time.Time) func(*controlplanev1.KubeadmControlPlane) {
		return func(k *controlplanev1.KubeadmControlPlane) { k.CreationTimestamp = metav1.NewTime(created) }
	}
	world := func(kcpStatus func(*controlplanev1.KubeadmControlPlane), objs ...client.Object) topologyWorld {
		return topologyWorld{kcpVersion: "v1.36.1", kcpStamp: stamp, highest: highest, objects: objs, kcpStatus: kcpStatus}
	}
	downgrade := []string{"KubeadmControlPlane demo-control-plane: Kubernetes downgrade from v1.36.1 to v1.35.2 is not supported by kubeadm"}
	tests := []struct {
		name      string
		world     topologyWorld
		to        string
		wantRules []skew.RuleID
		wantText  []string
	}{
		{name: "Cluster paused (spec.paused): allowed", to: "v1.35.2", world: world(nil, demoCluster(pausedSpec))},
		{name: "Cluster paused by annotation only, which the guard's cache does not keep: refused", to: "v1.35.2",
			world: world(nil, demoCluster(pausedAnnotation)), wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: downgrade},
		{name: "KubeadmControlPlane paused, Cluster provisioned: allowed", to: "v1.35.2", world: world(kcpPaused, demoCluster(provisioned))},
		{name: "Cluster not paused, infrastructure not provisioned yet: it may be any moment, refused", to: "v1.35.2",
			world: world(nil, demoCluster(nil)), wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: downgrade},
		{name: "no Cluster yet: allowed", to: "v1.35.2", world: world(nil)},
		{name: "nothing ran, so two minors back is allowed too", to: "v1.34.3", world: world(nil, demoCluster(pausedSpec))},
		{name: "Cluster provisioned and unpaused, the first Machine is due: refused", to: "v1.35.2",
			world: world(nil, demoCluster(provisioned)), wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: downgrade},
		{name: "a Machine created with the new version exists: refused", to: "v1.35.2",
			world:     world(nil, demoCluster(pausedSpec), cpMachine("cp-1", "v1.36.1", bumpedAt.Add(time.Minute))),
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: downgrade},
		{name: "initialized control plane: refused", to: "v1.35.2",
			world: world(initialized, demoCluster(pausedSpec)), wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: downgrade},
		{name: "a replica reported that is not listed: refused", to: "v1.35.2",
			world: world(oneReplica, demoCluster(pausedSpec)), wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: downgrade},
		{name: "created by a move with its history (stamped an hour before it was created), Cluster paused, Machines not created yet: refused", to: "v1.35.2",
			world: world(movedAt(bumpedAt.Add(time.Hour)), demoCluster(pausedSpec)), wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: downgrade},
		{name: "stored in the second after the guard stamped its create: never had a Machine, allowed", to: "v1.35.2",
			world: world(movedAt(bumpedAt.Add(time.Second)), demoCluster(pausedSpec))},
		{name: "a Machine remediated once: refused", to: "v1.35.2",
			world: world(remediated, demoCluster(pausedSpec)), wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: downgrade},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.world.policy(t)
			oldKCP, newKCP := tt.world.kcp(), tt.world.kcp()
			newKCP.Spec.Version = tt.to
			d, _, err := p.Decide(context.Background(), oldKCP, newKCP)
			require.NoError(t, err)
			require.ElementsMatch(t, tt.wantRules, rulesOf(d), "violations: %v", d.Violations)
			run, err := p.RevertedRun(context.Background(), oldKCP, newKCP)
			require.NoError(t, err)
			if len(tt.wantRules) > 0 {
				for _, want := range tt.wantText {
					assert.True(t, containsIn(violationTexts(d), want), "no violation contains %q: %v", want, d.Violations)
				}
				assert.Nil(t, run, "a refused change reverts nothing")
				return
			}
			// The stamp then records that nothing ran: the next change is
			// judged from the new version on.
			require.NotNil(t, run)
			assert.Equal(t, revisions.HighestRun{}, *run)
		})
	}
}

// The same for a topology Cluster with Cluster API's bypass annotation,
// whether or not the topology controller gave the bump to the control plane.
func TestTopologyRevertOfAControlPlaneThatNeverHadAMachine(t *testing.T) {
	givenAt := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	stamp := &revisions.Record{Revision: 2, History: []int64{2}, ChangedBy: "system:serviceaccount:capi-system:capi-manager", ChangedAt: givenAt, ChangeType: revisions.ChangeRollout}
	given := &revisions.HighestRun{Kubernetes: "v1.36.1", KubernetesRevision: 2, Etcd: "3.6.8", EtcdRevision: 2,
		Before: &revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 1, Etcd: "3.6.6", EtcdRevision: 1}, BeforeRevision: 2}
	notGiven := &revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 1, Etcd: "3.6.6", EtcdRevision: 1}
	world := func(kcpVersion string, h *revisions.HighestRun, kcpStatus func(*controlplanev1.KubeadmControlPlane), objs ...client.Object) topologyWorld {
		return topologyWorld{classVersions: sandboxClass, kcpVersion: kcpVersion, kcpStamp: stamp, highest: h, objects: objs, kcpStatus: kcpStatus}
	}
	initialized := func(k *controlplanev1.KubeadmControlPlane) {
		k.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	}
	tests := []struct {
		name      string
		world     topologyWorld
		cluster   func(*clusterv1.Cluster)
		wantRules []skew.RuleID
	}{
		{name: "control plane given the bump, Cluster paused: allowed", cluster: pausedSpec, world: world("v1.36.1", given, nil)},
		{name: "control plane not given the bump yet, Cluster paused: allowed", cluster: pausedAnnotation, world: world("v1.35.2", notGiven, nil)},
		{name: "control plane not given the bump yet, Cluster not paused: refused",
			world: world("v1.35.2", notGiven, nil), wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}},
		{name: "control plane given the bump, the first Machine is due: refused", cluster: provisioned,
			world: world("v1.36.1", given, nil), wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}},
		{name: "a Machine created with the new version: refused", cluster: pausedSpec,
			world: world("v1.36.1", given, nil, cpMachine("cp-1", "v1.36.1", givenAt.Add(time.Minute))), wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}},
		{name: "initialized control plane: refused", cluster: pausedSpec,
			world: world("v1.36.1", given, initialized), wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}},
		{name: "control plane paused, but it is read, not judged, and the Cluster is not paused: refused",
			world:     world("v1.36.1", given, func(k *controlplanev1.KubeadmControlPlane) { k.Annotations[clusterv1.PausedAnnotation] = "" }),
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}},
	}
	bypass := func(version string, mutate func(*clusterv1.Cluster)) *clusterv1.Cluster {
		c := demoCluster(mutate)
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[SkipTopologyVersionCheckAnnotation] = ""
		c.Spec.Topology.Version = version
		return c
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.world.policy(t)
			d, _, err := p.Decide(context.Background(), bypass("v1.36.1", tt.cluster), bypass("v1.35.2", tt.cluster))
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.wantRules, rulesOf(d), "violations: %v", d.Violations)
			if len(tt.wantRules) > 0 {
				assert.True(t, containsIn(violationTexts(d), "Cluster demo: Kubernetes downgrade from v1.36.1 to v1.35.2"), "%v", d.Violations)
			}
		})
	}
}
