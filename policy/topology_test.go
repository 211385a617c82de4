package policy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// The facts of a topology cluster "demo" in namespace "ns", built for one case.
type topologyWorld struct {
	classVersions []string
	extension     string
	kcpVersion    string
	etcdTag       string // the KubeadmControlPlane's etcd imageTag, "" for kubeadm's default
	kcpStamp      *revisions.Record
	highest       *revisions.HighestRun
	running       []string
	objects       []client.Object
	// kcpStatus, when set, changes the KubeadmControlPlane built.
	kcpStatus func(*controlplanev1.KubeadmControlPlane)
}

func (w topologyWorld) policy(t *testing.T) Policy {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clusterv1.AddToScheme(s))
	require.NoError(t, controlplanev1.AddToScheme(s))
	class := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-class"}}
	class.Spec.KubernetesVersions = w.classVersions
	class.Spec.Upgrade.External.GenerateUpgradePlanExtension = w.extension
	objs := append([]client.Object{class, w.kcp()}, w.objects...)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	return Policy{Reader: c, Mapper: c.RESTMapper()}
}

func (w topologyWorld) kcp() *controlplanev1.KubeadmControlPlane {
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "demo-control-plane", Labels: map[string]string{clusterv1.ClusterNameLabel: "demo", clusterv1.ClusterTopologyOwnedLabel: ""},
		Annotations: map[string]string{},
	}}
	kcp.Spec.Version = w.kcpVersion
	kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = w.etcdTag
	for _, v := range w.running {
		kcp.Status.Versions = append(kcp.Status.Versions, clusterv1.StatusVersion{Version: v})
	}
	if w.kcpStamp != nil {
		for k, v := range w.kcpStamp.Annotations() {
			kcp.Annotations[k] = v
		}
	}
	if w.highest != nil {
		raw, _ := json.Marshal(w.highest)
		kcp.Annotations[revisions.AnnotationHighestRun] = string(raw)
	}
	if w.kcpStatus != nil {
		w.kcpStatus(kcp)
	}
	return kcp
}

func topologyCluster(version string, annotations map[string]string) *clusterv1.Cluster {
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo", Annotations: annotations}}
	c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "demo-control-plane"}
	c.Spec.Topology.ClassRef.Name = "demo-class"
	c.Spec.Topology.Version = version
	return c
}

func pool(name, version string, topologyOwned bool) *clusterv1.MachineDeployment {
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}}}
	if topologyOwned {
		md.Labels[clusterv1.ClusterTopologyOwnedLabel] = ""
	}
	md.Spec.ClusterName = "demo"
	md.Spec.Template.Spec.Version = version
	return md
}

func cpMachine(name, version string, created time.Time) *clusterv1.Machine {
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(created),
		Labels: map[string]string{clusterv1.ClusterNameLabel: "demo", clusterv1.MachineControlPlaneLabel: ""}}}
	m.Spec.ClusterName = "demo"
	m.Spec.Version = version
	m.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: version}
	return m
}

// updatingInPlace marks m as being updated in place by Cluster API.
func updatingInPlace(m *clusterv1.Machine) *clusterv1.Machine {
	m.Annotations = map[string]string{clusterv1.UpdateInProgressAnnotation: ""}
	return m
}

var sandboxClass = []string{"v1.32.4", "v1.33.5", "v1.34.3", "v1.35.2", "v1.36.1"}

func TestTopologyVersionChanges(t *testing.T) {
	tests := []struct {
		name       string
		world      topologyWorld
		old, new   string
		wantRules  []skew.RuleID
		wantText   []string // substrings of the violations
		wantWarned []string // substrings of the decision's warnings
	}{
		{
			name:  "three minors through the class's list, topology workers behind",
			world: topologyWorld{classVersions: sandboxClass, kcpVersion: "v1.33.5", running: []string{"v1.33.5"}, objects: []client.Object{pool("demo-md-0", "v1.33.5", true)}},
			old:   "v1.33.5", new: "v1.36.1",
			wantWarned: []string{"through v1.34.3, v1.35.2, v1.36.1 (steps from ClusterClass demo-class spec.kubernetesVersions)"},
		},
		{
			name:  "four minors with topology workers four behind: Cluster API upgrades them on the way",
			world: topologyWorld{classVersions: sandboxClass, kcpVersion: "v1.32.4", running: []string{"v1.32.4"}, objects: []client.Object{pool("demo-md-0", "v1.32.4", true)}},
			old:   "v1.32.4", new: "v1.36.1",
		},
		{
			name:  "a hand-made pool four minors behind still counts",
			world: topologyWorld{classVersions: sandboxClass, kcpVersion: "v1.32.4", running: []string{"v1.32.4"}, objects: []client.Object{pool("demo-md-0", "v1.32.4", true), pool("extra", "v1.32.4", false)}},
			old:   "v1.32.4", new: "v1.36.1",
			wantRules: []skew.RuleID{skew.RuleControlPlaneLeavesWorkerTooOld},
			wantText:  []string{"Cluster demo: MachineDeployment extra runs v1.32.4, 4 minors older than v1.36.1"},
		},
		{
			name:  "three minors on a class without a list",
			world: topologyWorld{kcpVersion: "v1.33.5", running: []string{"v1.33.5"}},
			old:   "v1.33.5", new: "v1.36.1",
			wantRules: []skew.RuleID{skew.RuleControlPlaneMinorSkip},
			wantText:  []string{"skips v1.34 through v1.35", "spec.kubernetesVersions"},
		},
		{
			name:  "a list with a hole",
			world: topologyWorld{classVersions: []string{"v1.33.5", "v1.34.3", "v1.36.1"}, kcpVersion: "v1.33.5", running: []string{"v1.33.5"}},
			old:   "v1.33.5", new: "v1.36.1",
			wantRules: []skew.RuleID{skew.RuleControlPlaneMinorSkip},
			wantText:  []string{"steps from v1.34.3 to v1.36.1, skipping v1.35"},
		},
		{
			name:  "an upgrade-plan extension decides",
			world: topologyWorld{extension: "plan.demo", kcpVersion: "v1.33.5", running: []string{"v1.33.5"}},
			old:   "v1.33.5", new: "v1.36.1",
			wantWarned: []string{"the upgrade-plan extension plan.demo decides the steps"},
		},
		{
			name: "revert of a bump the control plane was not given yet",
			world: topologyWorld{classVersions: sandboxClass, kcpVersion: "v1.35.2", running: []string{"v1.35.2"},
				objects: []client.Object{cpMachine("cp-1", "v1.35.2", time.Now().Add(-time.Hour))}},
			old: "v1.36.1", new: "v1.35.2",
			wantWarned: []string{"spec.topology.version goes back from v1.36.1 to v1.35.2; allowed as a revert"},
		},
		{
			name: "revert once a control-plane machine runs the bump",
			world: topologyWorld{classVersions: sandboxClass, kcpVersion: "v1.35.2", running: []string{"v1.35.2"},
				objects: []client.Object{cpMachine("cp-1", "v1.35.2", time.Now().Add(-time.Hour)), cpMachine("cp-2", "v1.36.1", time.Now())}},
			old: "v1.36.1", new: "v1.35.2",
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade},
			wantText:  []string{"Cluster demo: Kubernetes downgrade from v1.36.1 to v1.35.2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.world.policy(t)
			d, _, err := p.Decide(context.Background(), topologyCluster(tt.old, nil), topologyCluster(tt.new, nil))
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.wantRules, rulesOf(d), "violations: %v", d.Violations)
			for _, want := range tt.wantText {
				assert.True(t, containsIn(violationTexts(d), want), "no violation contains %q: %v", want, d.Violations)
			}
			for _, want := range tt.wantWarned {
				assert.True(t, containsIn(d.Warnings, want), "no warning contains %q: %v", want, d.Warnings)
			}
		})
	}
}

func TestRevertOfAKubeadmControlPlaneBump(t *testing.T) {
	bumpedAt := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	stamp := &revisions.Record{Revision: 4, History: []int64{4}, ChangedBy: "alice", ChangedAt: bumpedAt, ChangeType: revisions.ChangeRollout}
	highest := &revisions.HighestRun{Kubernetes: "v1.36.1", KubernetesRevision: 4, Etcd: "3.6.8", EtcdRevision: 4,
		Before: &revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 3, Etcd: "3.6.6", EtcdRevision: 3}, BeforeRevision: 4}
	old := func(w topologyWorld) *controlplanev1.KubeadmControlPlane { return w.kcp() }
	reverted := func(w topologyWorld, version string) *controlplanev1.KubeadmControlPlane {
		k := w.kcp()
		k.Spec.Version = version
		return k
	}
	before := bumpedAt.Add(-time.Hour)
	tests := []struct {
		name      string
		world     topologyWorld
		to        string
		wantRules []skew.RuleID
		wantText  string
	}{
		{name: "no machine made since the bump: allowed", to: "v1.35.2",
			world: topologyWorld{kcpVersion: "v1.36.1", kcpStamp: stamp, highest: highest, running: []string{"v1.35.2"}, objects: []client.Object{cpMachine("cp-1", "v1.35.2", before)}}},
		{name: "a machine made with the bump: refused", to: "v1.35.2",
			world: topologyWorld{kcpVersion: "v1.36.1", kcpStamp: stamp, highest: highest, running: []string{"v1.35.2"},
				objects: []client.Object{cpMachine("cp-1", "v1.35.2", before), cpMachine("cp-2", "v1.36.1", bumpedAt.Add(5*time.Second))}},
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: "Kubernetes downgrade from v1.36.1 to v1.35.2"},
		{name: "a machine made in the bump's second counts as made with it", to: "v1.35.2",
			world: topologyWorld{kcpVersion: "v1.36.1", kcpStamp: stamp, highest: highest, running: []string{"v1.35.2"},
				objects: []client.Object{cpMachine("cp-1", "v1.35.2", bumpedAt)}},
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}},
		{name: "below what ran before the bump: refused", to: "v1.34.3",
			world:     topologyWorld{kcpVersion: "v1.36.1", kcpStamp: stamp, highest: highest, running: []string{"v1.35.2"}, objects: []client.Object{cpMachine("cp-1", "v1.35.2", before)}},
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: "Kubernetes downgrade from v1.35.2"},
		{name: "no control-plane machine listed, Cluster provisioned and unpaused: the first may not be seen yet, refused", to: "v1.35.2",
			world:     topologyWorld{kcpVersion: "v1.36.1", kcpStamp: stamp, highest: highest, objects: []client.Object{demoCluster(provisioned)}},
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}},
		{name: "a machine made before the bump, updated in place to it: refused", to: "v1.35.2",
			world: topologyWorld{kcpVersion: "v1.36.1", kcpStamp: stamp, highest: highest, running: []string{"v1.35.2"},
				objects: []client.Object{cpMachine("cp-1", "v1.36.1", before)}},
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: "Kubernetes downgrade from v1.36.1 to v1.35.2"},
		{name: "a machine made before the bump, its in-place update begun: refused", to: "v1.35.2",
			world: topologyWorld{kcpVersion: "v1.36.1", kcpStamp: stamp, highest: highest, running: []string{"v1.35.2"},
				objects: []client.Object{updatingInPlace(cpMachine("cp-1", "v1.35.2", before))}},
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}, wantText: "Kubernetes downgrade from v1.36.1 to v1.35.2"},
		{name: "a stamp that does not know what ran before: refused as before", to: "v1.35.2",
			world: topologyWorld{kcpVersion: "v1.36.1", kcpStamp: stamp, highest: &revisions.HighestRun{Kubernetes: "v1.36.1", KubernetesRevision: 4}, running: []string{"v1.35.2"},
				objects: []client.Object{cpMachine("cp-1", "v1.35.2", before)}},
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.world.policy(t)
			d, _, err := p.Decide(context.Background(), old(tt.world), reverted(tt.world, tt.to))
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.wantRules, rulesOf(d), "violations: %v", d.Violations)
			if tt.wantText != "" {
				assert.True(t, containsIn(violationTexts(d), tt.wantText), "no violation contains %q: %v", tt.wantText, d.Violations)
			}
			if len(tt.wantRules) == 0 {
				assert.True(t, containsIn(d.Warnings, "allowed as a revert only because no control-plane machine was created with v1.36.1 or runs it"), "%v", d.Warnings)
			}
		})
	}
}

func TestClassUpgradePlan(t *testing.T) {
	tests := []struct {
		versions         []string
		desired, current string
		want             []string
	}{
		{sandboxClass, "v1.36.1", "v1.33.5", []string{"v1.34.3", "v1.35.2", "v1.36.1"}},
		{sandboxClass, "v1.34.3", "v1.33.5", []string{"v1.34.3"}},
		{sandboxClass, "v1.33.5", "v1.33.5", nil},
		{[]string{"v1.33.1", "v1.33.5", "v1.34.0", "v1.34.3", "v1.35.2"}, "v1.35.2", "v1.33.1", []string{"v1.34.3", "v1.35.2"}},
		{[]string{"v1.33.1", "v1.33.5"}, "v1.33.5", "v1.33.1", []string{"v1.33.5"}},
		{[]string{"v1.33.5", "v1.35.2"}, "v1.35.2", "v1.33.5", []string{"v1.35.2"}},
	}
	for _, tt := range tests {
		got, err := ClassUpgradePlan(tt.versions, tt.desired, tt.current)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, "%v from %s to %s", tt.versions, tt.current, tt.desired)
	}
	_, err := ClassUpgradePlan([]string{"v1.33.5", "banana"}, "v1.35.2", "v1.33.5")
	assert.ErrorContains(t, err, `ClusterClass version "banana"`)
}

func rulesOf(d skew.Decision) []skew.RuleID {
	var out []skew.RuleID
	for _, v := range d.Violations {
		out = append(out, v.Rule)
	}
	return out
}

func violationTexts(d skew.Decision) []string {
	var out []string
	for _, v := range d.Violations {
		out = append(out, v.String())
	}
	return out
}

func containsIn(list []string, sub string) bool {
	for _, s := range list {
		if len(sub) > 0 && len(s) >= len(sub) && contains(s, sub) {
			return true
		}
	}
	return false
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
