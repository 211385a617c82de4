package policy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// An etcd image tag bump of a KubeadmControlPlane (its version unchanged)
// may be taken back while no control-plane Machine was created since the
// bump (a new etcd tag rolls out only through new Machines) and the recorded
// history shows the new tag's minor never ran.
func TestRevertOfAnEtcdImageTagBump(t *testing.T) {
	bumpedAt := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	before := bumpedAt.Add(-time.Hour)
	stamp := &revisions.Record{Revision: 4, History: []int64{4}, ChangedBy: "alice", ChangedAt: bumpedAt, ChangeType: revisions.ChangeRollout}
	// Revision 4 pinned etcd 3.7.0-0 on v1.35.2; revisions up to 3 ran
	// kubeadm's default for v1.35.2, etcd 3.6.6.
	ranBefore := &revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 3, Etcd: "3.6.6", EtcdRevision: 3}
	highest := &revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 3, Etcd: "3.7.0", EtcdRevision: 4, Before: ranBefore, BeforeRevision: 4}
	// The same bump, but an earlier revision had already run etcd 3.7.
	ranEarlier := &revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 3, Etcd: "3.7.0", EtcdRevision: 2}
	highestRanEarlier := &revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 3, Etcd: "3.7.0", EtcdRevision: 4, Before: ranEarlier, BeforeRevision: 4}
	world := func(h *revisions.HighestRun, machines ...client.Object) topologyWorld {
		return topologyWorld{kcpVersion: "v1.35.2", etcdTag: "3.7.0-0", kcpStamp: stamp, highest: h, running: []string{"v1.35.2"}, objects: machines}
	}
	tests := []struct {
		name      string
		world     topologyWorld
		toTag     string
		wantRules []skew.RuleID
		wantText  []string // substrings of the one violation
	}{
		{name: "no machine made since the tag bump, back to the tag before: allowed", toTag: "3.6.6-0",
			world: world(highest, cpMachine("cp-1", "v1.35.2", before))},
		{name: "no machine made since the tag bump, back to kubeadm's default: allowed", toTag: "",
			world: world(highest, cpMachine("cp-1", "v1.35.2", before), cpMachine("cp-2", "v1.35.2", before.Add(time.Minute)))},
		{name: "a machine made with the new tag: refused", toTag: "3.6.6-0",
			world:     world(highest, cpMachine("cp-1", "v1.35.2", before), cpMachine("cp-2", "v1.35.2", bumpedAt.Add(5*time.Second))),
			wantRules: []skew.RuleID{skew.RuleEtcdDowngrade},
			wantText:  []string{"KubeadmControlPlane demo-control-plane: etcd downgrade from 3.7.0 (imageTag 3.7.0-0) to 3.6.6 (imageTag 3.6.6-0) is not supported", "keep etcd at 3.7"}},
		{name: "back to kubeadm's default once a machine was made with the new tag: refused", toTag: "",
			world:     world(highest, cpMachine("cp-1", "v1.35.2", before), cpMachine("cp-2", "v1.35.2", bumpedAt.Add(5*time.Second))),
			wantRules: []skew.RuleID{skew.RuleEtcdDowngrade},
			wantText:  []string{"etcd downgrade from 3.7.0 (imageTag 3.7.0-0) to 3.6.6 (kubeadm's default for v1.35.2) is not supported"}},
		{name: "a machine made in the tag bump's second counts as made with it", toTag: "3.6.6-0",
			world:     world(highest, cpMachine("cp-1", "v1.35.2", bumpedAt)),
			wantRules: []skew.RuleID{skew.RuleEtcdDowngrade},
			wantText:  []string{"etcd downgrade from 3.7.0 (imageTag 3.7.0-0) to 3.6.6 (imageTag 3.6.6-0)"}},
		{name: "the history shows the new tag's minor ran before the bump: refused", toTag: "3.6.6-0",
			world:     world(highestRanEarlier, cpMachine("cp-1", "v1.35.2", before)),
			wantRules: []skew.RuleID{skew.RuleEtcdDowngrade},
			wantText:  []string{"etcd downgrade from 3.7.0 (revision 2) to 3.6.6 (imageTag 3.6.6-0) is not supported"}},
		{name: "below what ran before the tag bump: refused", toTag: "3.5.24-0",
			world:     world(highest, cpMachine("cp-1", "v1.35.2", before)),
			wantRules: []skew.RuleID{skew.RuleEtcdDowngrade},
			wantText:  []string{"etcd downgrade from 3.6.6 (revision 3) to 3.5.24 (imageTag 3.5.24-0) is not supported", "keep etcd at 3.6"}},
		{name: "a stamp that does not know what ran before: refused as before", toTag: "3.6.6-0",
			world:     world(&revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 3, Etcd: "3.7.0", EtcdRevision: 4}, cpMachine("cp-1", "v1.35.2", before)),
			wantRules: []skew.RuleID{skew.RuleEtcdDowngrade},
			wantText:  []string{"etcd downgrade from 3.7.0 (imageTag 3.7.0-0) to 3.6.6 (imageTag 3.6.6-0)"}},
		{name: "no control-plane machine at all: nothing shows what runs, refused", toTag: "3.6.6-0",
			world:     world(highest),
			wantRules: []skew.RuleID{skew.RuleEtcdDowngrade},
			wantText:  []string{"etcd downgrade from 3.7.0 (imageTag 3.7.0-0) to 3.6.6 (imageTag 3.6.6-0)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.world.policy(t)
			oldKCP, newKCP := tt.world.kcp(), tt.world.kcp()
			newKCP.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = tt.toTag
			d, _, err := p.Decide(context.Background(), oldKCP, newKCP)
			require.NoError(t, err)
			require.ElementsMatch(t, tt.wantRules, rulesOf(d), "violations: %v", d.Violations)
			if len(tt.wantRules) == 0 {
				// What the revision stamp then records as run: what ran
				// before the tag bump, so 3.7 stops counting.
				run, err := p.RevertedRun(context.Background(), oldKCP, newKCP)
				require.NoError(t, err)
				require.NotNil(t, run)
				assert.Equal(t, *ranBefore, *run)
				return
			}
			assert.Equal(t, etcdImageTagField, d.Violations[0].Field)
			assert.Equal(t, tt.toTag, d.Violations[0].Value)
			for _, want := range tt.wantText {
				assert.Contains(t, d.Violations[0].String(), want)
			}
		})
	}
}

// Reverting spec.topology.version (with Cluster API's bypass annotation, as
// Cluster API itself refuses any decrease) once the topology controller has
// copied the bump, or the first step of a chained upgrade towards it, to
// the KubeadmControlPlane: allowed while no control-plane Machine was made
// with what the control plane was given or runs it, refused once one is.
func TestTopologyRevertOfABumpTheControlPlaneCarries(t *testing.T) {
	givenAt := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	before := givenAt.Add(-time.Hour)
	stamp := &revisions.Record{Revision: 4, History: []int64{4}, ChangedBy: "system:serviceaccount:capi-system:capi-manager", ChangedAt: givenAt, ChangeType: revisions.ChangeRollout}
	// v1.35.2 → v1.36.1: the control plane was given v1.36.1 as revision 4.
	bumped := &revisions.HighestRun{Kubernetes: "v1.36.1", KubernetesRevision: 4, Etcd: "3.6.8", EtcdRevision: 4,
		Before: &revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 3, Etcd: "3.6.6", EtcdRevision: 3}, BeforeRevision: 4}
	carries := func(machines ...client.Object) topologyWorld {
		return topologyWorld{classVersions: sandboxClass, kcpVersion: "v1.36.1", kcpStamp: stamp, highest: bumped, running: []string{"v1.35.2"}, objects: machines}
	}
	// v1.33.5 → v1.36.1 through the class's list: the control plane was
	// given the first step, v1.34.3, as revision 4.
	stepped := &revisions.HighestRun{Kubernetes: "v1.34.3", KubernetesRevision: 4, Etcd: "3.6.5", EtcdRevision: 4,
		Before: &revisions.HighestRun{Kubernetes: "v1.33.5", KubernetesRevision: 3, Etcd: "3.5.24", EtcdRevision: 3}, BeforeRevision: 4}
	firstStep := func(machines ...client.Object) topologyWorld {
		return topologyWorld{classVersions: sandboxClass, kcpVersion: "v1.34.3", kcpStamp: stamp, highest: stepped, running: []string{"v1.33.5"}, objects: machines}
	}
	updatedInPlace := cpMachine("cp-1", "v1.35.2", before)
	updatedInPlace.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: "v1.36.1"}

	tests := []struct {
		name       string
		world      topologyWorld
		old, new   string
		wantRules  []skew.RuleID
		wantText   []string // substrings of the violations
		wantWarned string   // substring of the decision's warnings
	}{
		{name: "control plane given the bump, no machine made with it: allowed", old: "v1.36.1", new: "v1.35.2",
			world:      carries(cpMachine("cp-1", "v1.35.2", before)),
			wantWarned: "Cluster demo: spec.topology.version goes back from v1.36.1 to v1.35.2; allowed as a revert only because no control-plane machine was created with v1.36.1 or runs it"},
		{name: "control plane given the bump, a machine made with it: refused", old: "v1.36.1", new: "v1.35.2",
			world:     carries(cpMachine("cp-1", "v1.35.2", before), cpMachine("cp-2", "v1.36.1", givenAt.Add(5*time.Second))),
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade},
			wantText:  []string{"Cluster demo: Kubernetes downgrade from v1.36.1 to v1.35.2 is not supported by kubeadm", "keep spec.topology.version at v1.36.x or later"}},
		{name: "control plane given the bump, a machine made in its second counts as made with it", old: "v1.36.1", new: "v1.35.2",
			world:     carries(cpMachine("cp-1", "v1.35.2", givenAt)),
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade},
			wantText:  []string{"Cluster demo: Kubernetes downgrade from v1.36.1 to v1.35.2"}},
		{name: "control plane given the bump, a machine updated in place runs it: refused", old: "v1.36.1", new: "v1.35.2",
			world:     carries(updatedInPlace),
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade},
			wantText:  []string{"Cluster demo: Kubernetes downgrade from v1.36.1 to v1.35.2"}},
		{name: "control plane given the bump, reverted below what ran before it: refused", old: "v1.36.1", new: "v1.34.3",
			world:     carries(cpMachine("cp-1", "v1.35.2", before)),
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade},
			wantText:  []string{"Cluster demo: Kubernetes downgrade from v1.35.2 (run by a control-plane machine) to v1.34.3"}},
		{name: "chained upgrade, control plane given its first step, no machine made with it: allowed", old: "v1.36.1", new: "v1.33.5",
			world:      firstStep(cpMachine("cp-1", "v1.33.5", before)),
			wantWarned: "Cluster demo: spec.topology.version goes back from v1.36.1 to v1.33.5; allowed as a revert only because no control-plane machine was created with v1.36.1 or runs it"},
		{name: "chained upgrade, control plane given its first step, a machine made with it: refused", old: "v1.36.1", new: "v1.33.5",
			world:     firstStep(cpMachine("cp-1", "v1.33.5", before), cpMachine("cp-2", "v1.34.3", givenAt.Add(5*time.Second))),
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade, skew.RuleEtcdDowngrade},
			wantText: []string{"Cluster demo: Kubernetes downgrade from v1.34.3 (run by a control-plane machine) to v1.33.5",
				"Cluster demo: etcd downgrade from 3.6.5 (revision 4) to 3.5.24 (kubeadm's default for v1.33.5)"}},
		{name: "chained upgrade, back to the first step the control plane was given: allowed", old: "v1.36.1", new: "v1.34.3",
			world:      firstStep(cpMachine("cp-1", "v1.33.5", before), cpMachine("cp-2", "v1.34.3", givenAt.Add(5*time.Second))),
			wantWarned: "Cluster demo: spec.topology.version goes back from v1.36.1 to v1.34.3; allowed as a revert only because no control-plane machine was created with v1.36.1 or runs it"},
	}
	bypass := map[string]string{SkipTopologyVersionCheckAnnotation: ""}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.world.policy(t)
			d, own, err := p.Decide(context.Background(), topologyCluster(tt.old, bypass), topologyCluster(tt.new, bypass))
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.wantRules, rulesOf(d), "violations: %v", d.Violations)
			for _, want := range tt.wantText {
				assert.True(t, containsIn(violationTexts(d), want), "no violation contains %q: %v", want, d.Violations)
			}
			if tt.wantWarned != "" {
				assert.True(t, containsIn(d.Warnings, tt.wantWarned), "no warning contains %q: %v", tt.wantWarned, d.Warnings)
			}
			assert.True(t, containsIn(own, "skips Cluster API's checks only; rollout-guard's rules still apply"), "%v", own)
		})
	}
}

// TestVersionsReadOnce: the helpers of the revert rule judge versions read
// once, a text that is not a version as "cannot tell".
func TestVersionsReadOnce(t *testing.T) {
	v := skew.ReadVersion
	t.Run("bumpOf", func(t *testing.T) {
		cases := []struct{ old, new, want string }{
			{"v1.36.1", "v1.35.2", "v1.36.1"},
			{"v1.36.1", "v1.36.0", "v1.36.1"},
			{"v1.35.2", "v1.36.1", ""},
			{"v1.35.2", "v1.35.2+vmware.1", ""},
			{"garbage", "v1.35.2", ""},
			{"v1.36.1", "", ""},
		}
		for _, c := range cases {
			assert.Equal(t, c.want, bumpOf(v(c.old), v(c.new)).Text(), "%s → %s", c.old, c.new)
		}
	})
	t.Run("crossesMinors", func(t *testing.T) {
		cases := []struct {
			from, to string
			want     bool
		}{
			{"v1.33.5", "v1.35.2", true},
			{"v1.34.3", "v1.35.2", false},
			{"v1.35.2", "v2.0.0", true},
			{"v1.33", "v1.36.1", false},
			{"v1.33.5", "", false},
		}
		for _, c := range cases {
			assert.Equal(t, c.want, crossesMinors(v(c.from), v(c.to)), "%s → %s", c.from, c.to)
		}
	})
	t.Run("unrolledIfNoneRuns", func(t *testing.T) {
		machine := func(versions ...string) controlPlaneMachine {
			return controlPlaneMachine{name: "cp-1", versions: skew.ReadVersions(versions)}
		}
		cases := []struct {
			name        string
			running     []string
			machines    []controlPlaneMachine
			bump        skew.Version
			wantRunning []string // nil: the bump ran, or it cannot be told
		}{
			{name: "none runs the bump", running: []string{"v1.35.2"}, machines: []controlPlaneMachine{machine("v1.35.2", "v1.35.3")}, bump: v("v1.36.1"), wantRunning: []string{"v1.35.2", "v1.35.3"}},
			{name: "a machine runs it", running: []string{"v1.35.2"}, machines: []controlPlaneMachine{machine("v1.36.1")}, bump: v("v1.36.1")},
			{name: "a kubelet that is no version", running: []string{"v1.35.2"}, machines: []controlPlaneMachine{machine("v1.35.2", "1.35")}, bump: v("v1.36.1")},
			{name: "a bump that is no version", running: []string{"v1.35.2"}, bump: v("1.36")},
			{name: "an etcd bump only", running: []string{"v1.35.2", "1.35"}, bump: skew.Version{}, wantRunning: []string{"v1.35.2", "1.35"}},
			{name: "a machine being updated in place, its spec not updated yet", running: []string{"v1.35.2"},
				machines: []controlPlaneMachine{{name: "cp-1", versions: skew.ReadVersions([]string{"v1.35.2"}), updating: true}}, bump: v("v1.36.1")},
			{name: "an etcd bump only, a machine being updated in place", running: []string{"v1.35.2"},
				machines: []controlPlaneMachine{{name: "cp-1", versions: skew.ReadVersions([]string{"v1.35.2"}), updating: true}}, bump: skew.Version{}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				u := unrolledIfNoneRuns(skew.History{}, skew.ReadVersions(c.running), c.machines, c.bump)
				if c.wantRunning == nil {
					assert.Nil(t, u)
					return
				}
				require.NotNil(t, u)
				var got []string
				for _, r := range u.running {
					got = append(got, r.Text())
				}
				assert.Equal(t, c.wantRunning, got)
			})
		}
	})
}

// A topology version bump the control plane was never given is judged by
// what the control plane holds — its spec, its Machines, the versions its
// status reports and its recorded history — not by the topology's old
// value: taken back while none of them has the bump (with Cluster API's
// bypass annotation, the Cluster paused so the topology controller does not
// pass the bump on), also when no control-plane Machine is listed (the
// guard's cache behind its status); refused once one of them has it.
func TestTopologyRevertJudgedByWhatTheControlPlaneHolds(t *testing.T) {
	createdAt := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	stamp := &revisions.Record{Revision: 2, History: []int64{2}, ChangedBy: "system:serviceaccount:capi-system:capi-manager", ChangedAt: createdAt, ChangeType: revisions.ChangeRollout}
	// The control plane was upgraded to v1.34.3 (revision 2) and rolled out.
	ran := &revisions.HighestRun{Kubernetes: "v1.34.3", KubernetesRevision: 2, Etcd: "3.6.5", EtcdRevision: 2,
		Before: &revisions.HighestRun{Kubernetes: "v1.33.5", KubernetesRevision: 1, Etcd: "3.5.24", EtcdRevision: 1}, BeforeRevision: 2}
	// Its history says v1.35.2 ran once (a spec that had it, rolled out).
	ranBump := &revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 2, Etcd: "3.6.6", EtcdRevision: 2}
	running := func(k *controlplanev1.KubeadmControlPlane) {
		k.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
		k.Status.Replicas = ptr.To(int32(1))
	}
	world := func(h *revisions.HighestRun, status []string, machines ...client.Object) topologyWorld {
		return topologyWorld{classVersions: sandboxClass, kcpVersion: "v1.34.3", kcpStamp: stamp, highest: h, running: status, objects: machines, kcpStatus: running}
	}
	ranAt := createdAt.Add(time.Minute)
	tests := []struct {
		name      string
		world     topologyWorld
		to        string
		wantRules []skew.RuleID
		wantText  string // a substring of the violations
	}{
		{name: "spec, Machine, status and history below the bump: allowed", to: "v1.34.3",
			world: world(ran, []string{"v1.34.3"}, cpMachine("cp-1", "v1.34.3", ranAt))},
		{name: "no Machine listed, spec, status and history below the bump: allowed", to: "v1.34.3",
			world: world(ran, []string{"v1.34.3"})},
		{name: "no Machine listed and no recorded history: nothing shows what runs, refused", to: "v1.34.3",
			world:     world(nil, []string{"v1.34.3"}),
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: "Cluster demo: Kubernetes downgrade from v1.35.2 to v1.34.3"},
		{name: "the history holds the bump: refused", to: "v1.34.3",
			world:     world(ranBump, []string{"v1.34.3"}, cpMachine("cp-1", "v1.34.3", ranAt)),
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: "Cluster demo: Kubernetes downgrade from v1.35.2 (the highest version it has run"},
		{name: "the status reports a machine running the bump: refused", to: "v1.34.3",
			world:     world(ran, []string{"v1.34.3", "v1.35.2"}),
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: "Cluster demo: Kubernetes downgrade from v1.35.2 to v1.34.3"},
		{name: "a Machine has the bump: refused", to: "v1.34.3",
			world:     world(ran, []string{"v1.34.3"}, cpMachine("cp-1", "v1.34.3", ranAt), cpMachine("cp-2", "v1.35.2", ranAt.Add(time.Hour))),
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: "Cluster demo: Kubernetes downgrade from v1.35.2 to v1.34.3"},
		{name: "below what the control plane runs: refused", to: "v1.33.5",
			world:     world(ran, []string{"v1.34.3"}),
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade, skew.RuleEtcdDowngrade}, wantText: "Cluster demo: Kubernetes downgrade from v1.34.3"},
	}
	bypass := func(version string) *clusterv1.Cluster {
		c := demoCluster(pausedSpec)
		c.Annotations = map[string]string{SkipTopologyVersionCheckAnnotation: ""}
		c.Spec.Topology.Version = version
		return c
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.world.policy(t)
			d, _, err := p.Decide(context.Background(), bypass("v1.35.2"), bypass(tt.to))
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.wantRules, rulesOf(d), "violations: %v", d.Violations)
			if len(tt.wantRules) == 0 {
				assert.True(t, containsIn(d.Warnings, "Cluster demo: spec.topology.version goes back from v1.35.2 to "+tt.to+"; allowed as a revert only because no control-plane machine was created with v1.35.2 or runs it"), "%v", d.Warnings)
				return
			}
			assert.True(t, containsIn(violationTexts(d), tt.wantText), "no violation contains %q: %v", tt.wantText, d.Violations)
		})
	}
}
