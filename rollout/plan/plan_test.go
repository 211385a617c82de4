package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// planEpoch is the clock of the plan fixtures.
var planEpoch = time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)

// planMD is a worker pool md-0 of cluster c1 at version, on template infra.
func planMD(version, infra string) *clusterv1.MachineDeployment {
	return &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md-0", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: "c1",
			Replicas:    ptr.To[int32](3),
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": "a"}},
				Spec: clusterv1.MachineSpec{
					ClusterName: "c1",
					Version:     version,
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfigTemplate", Name: "md-0"}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: infra},
				},
			},
		},
	}
}

// planSet is a MachineSet of md-0 made from md's template, as Cluster API
// makes it (with its own labels on the template).
func planSet(name string, md *clusterv1.MachineDeployment) clusterv1.MachineSet {
	tmpl := *md.Spec.Template.DeepCopy()
	tmpl.Labels[clusterv1.MachineDeploymentUniqueLabel] = name
	return clusterv1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{clusterv1.MachineDeploymentNameLabel: "md-0"}},
		Spec:       clusterv1.MachineSetSpec{ClusterName: "c1", Template: tmpl},
	}
}

// planMachine is a machine of MachineSet set (or of control plane cp when
// set is ""), created ago before planEpoch.
func planMachine(name, set, cp, version string, ago time.Duration) clusterv1.Machine {
	m := clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(planEpoch.Add(-ago)), Labels: map[string]string{}},
		Spec:       clusterv1.MachineSpec{ClusterName: "c1", Version: version},
	}
	if set != "" {
		m.Labels[clusterv1.MachineSetNameLabel] = set
		m.Labels[clusterv1.MachineDeploymentNameLabel] = "md-0"
	}
	if cp != "" {
		m.Labels[clusterv1.MachineControlPlaneNameLabel] = cp
	}
	return m
}

func names(ms []v1alpha1.PlanMachine, action string) []string {
	var out []string
	for _, m := range ms {
		if m.Action == action {
			out = append(out, m.Name)
		}
	}
	return out
}

func mdChange(t *testing.T, live, planned *clusterv1.MachineDeployment, restartAt time.Time) machineChange {
	t.Helper()
	a, err := revisions.ForMachineDeployment(live)
	require.NoError(t, err)
	b, err := revisions.ForMachineDeployment(planned)
	require.NoError(t, err)
	rollout, err := revisions.RolloutChanges(a, b)
	require.NoError(t, err)
	inPlace, err := revisions.IsInPlace(a, b)
	require.NoError(t, err)
	return machineChange{rollout: rollout, inPlace: inPlace, restartAt: restartAt}
}

// TestPlanMachineDeploymentMachines: which worker machines a change
// replaces, updates in place or leaves, judged per MachineSet as Cluster
// API's MachineDeployment controller judges them.
func TestPlanMachineDeploymentMachines(t *testing.T) {
	live := planMD("v1.34.3", "md-0")
	current := planSet("md-0-aaa", live)
	older := planSet("md-0-old", planMD("v1.34.3", "md-0-v2"))
	three := []clusterv1.Machine{
		planMachine("md-0-aaa-1", "md-0-aaa", "", "v1.34.3", time.Hour),
		planMachine("md-0-aaa-2", "md-0-aaa", "", "v1.34.3", time.Hour),
		planMachine("md-0-aaa-3", "md-0-aaa", "", "v1.34.3", time.Hour),
	}
	deleting := planMachine("md-0-aaa-0", "md-0-aaa", "", "v1.34.3", 2*time.Hour)
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(planEpoch))
	deleting.Finalizers = []string{"x"}

	labelled := live.DeepCopy()
	labelled.Spec.Template.Labels["team"] = "b"
	tests := []struct {
		name                        string
		planned                     *clusterv1.MachineDeployment
		restart                     time.Time
		machines                    []clusterv1.Machine
		sets                        []clusterv1.MachineSet
		replace, inPlace, untouched []string
		reason                      string
	}{
		{
			name: "template switch replaces every machine", planned: planMD("v1.34.3", "md-0-v2"),
			machines: three, sets: []clusterv1.MachineSet{current},
			replace: []string{"md-0-aaa-1", "md-0-aaa-2", "md-0-aaa-3"},
			reason:  "infrastructureRef DevMachineTemplate/md-0 → DevMachineTemplate/md-0-v2",
		},
		{
			name: "a label is updated in place", planned: labelled,
			machines: three, sets: []clusterv1.MachineSet{current},
			inPlace: []string{"md-0-aaa-1", "md-0-aaa-2", "md-0-aaa-3"},
		},
		{
			name: "no change leaves them", planned: live,
			machines: three, sets: []clusterv1.MachineSet{current},
			untouched: []string{"md-0-aaa-1", "md-0-aaa-2", "md-0-aaa-3"},
		},
		{
			name: "mid-rollout, switching back leaves the machines of the matching MachineSet", planned: planMD("v1.34.3", "md-0-v2"),
			machines: []clusterv1.Machine{three[0], planMachine("md-0-old-1", "md-0-old", "", "v1.34.3", 3*time.Hour)},
			sets:     []clusterv1.MachineSet{current, older},
			replace:  []string{"md-0-aaa-1"}, untouched: []string{"md-0-old-1"},
		},
		{
			name: "a restart replaces machines created before it", planned: live, restart: planEpoch.Add(-30 * time.Minute),
			machines: []clusterv1.Machine{three[0], planMachine("md-0-aaa-9", "md-0-aaa", "", "v1.34.3", time.Minute)},
			sets:     []clusterv1.MachineSet{current},
			replace:  []string{"md-0-aaa-1"}, untouched: []string{"md-0-aaa-9"},
			reason: "created before spec.rollout.after 2030-01-02T02:30:00Z",
		},
		{
			name: "machines being deleted are left out", planned: planMD("v1.35.2", "md-0"),
			machines: []clusterv1.Machine{deleting, three[0]}, sets: []clusterv1.MachineSet{current},
			replace: []string{"md-0-aaa-1"}, reason: "version v1.34.3 → v1.35.2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := planMachineDeploymentMachines(tt.planned, mdChange(t, live, tt.planned, tt.restart), tt.machines, tt.sets)
			require.NoError(t, err)
			assert.Equal(t, tt.replace, names(got, v1alpha1.ActionReplace), "replaced")
			assert.Equal(t, tt.inPlace, names(got, v1alpha1.ActionInPlace), "in place")
			assert.Equal(t, tt.untouched, names(got, v1alpha1.ActionUntouched), "untouched")
			if tt.reason != "" {
				assert.Equal(t, tt.reason, got[len(got)-len(tt.untouched)-len(tt.inPlace)-1].Reason)
			}
			for _, m := range got {
				assert.Equal(t, "machinedeployment/md-0", m.Object)
			}
		})
	}
}

func planKCP(version string) *controlplanev1.KubeadmControlPlane {
	return &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1-control-plane", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To[int32](3),
			Version:  version,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: "cp"},
			}},
		},
		Status: controlplanev1.KubeadmControlPlaneStatus{Version: version, Versions: []clusterv1.StatusVersion{{Version: version, Replicas: 3}}},
	}
}

func kcpChange(t *testing.T, live, planned *controlplanev1.KubeadmControlPlane) machineChange {
	t.Helper()
	a, err := revisions.ForKubeadmControlPlane(live)
	require.NoError(t, err)
	b, err := revisions.ForKubeadmControlPlane(planned)
	require.NoError(t, err)
	rollout, err := revisions.RolloutChanges(a, b)
	require.NoError(t, err)
	inPlace, err := revisions.IsInPlace(a, b)
	require.NoError(t, err)
	return machineChange{rollout: rollout, inPlace: inPlace}
}

// TestPlanControlPlaneMachines: a version bump replaces every
// control-plane machine, a revert of it leaves one created for the target,
// an in-place change replaces none.
func TestPlanControlPlaneMachines(t *testing.T) {
	live := planKCP("v1.34.3")
	ms := []clusterv1.Machine{
		planMachine("cp-b", "", "c1-control-plane", "v1.34.3", time.Hour),
		planMachine("cp-a", "", "c1-control-plane", "v1.34.3", time.Hour),
		planMachine("cp-c", "", "c1-control-plane", "v1.35.2", time.Minute),
	}
	bump := planKCP("v1.35.2")
	got := planControlPlaneMachines(bump, kcpChange(t, live, bump), ms)
	assert.Equal(t, []string{"cp-a", "cp-b"}, names(got, v1alpha1.ActionReplace), "a machine created for v1.35.2 already runs it")
	assert.Equal(t, []string{"cp-c"}, names(got, v1alpha1.ActionUntouched))
	assert.Equal(t, "version v1.34.3 → v1.35.2", got[0].Reason)

	infra := planKCP("v1.35.2")
	infra.Spec.MachineTemplate.Spec.InfrastructureRef.Name = "cp-v2"
	got = planControlPlaneMachines(infra, kcpChange(t, live, infra), ms)
	assert.Equal(t, []string{"cp-a", "cp-b", "cp-c"}, names(got, v1alpha1.ActionReplace), "a new template replaces every one")

	labels := live.DeepCopy()
	labels.Spec.MachineTemplate.ObjectMeta.Labels = map[string]string{"team": "b"}
	got = planControlPlaneMachines(labels, kcpChange(t, live, labels), ms)
	assert.Equal(t, []string{"cp-a", "cp-b", "cp-c"}, names(got, v1alpha1.ActionInPlace))
	assert.Equal(t, v1alpha1.PlanCounts{InPlace: 3}, countMachines(got))
}

// TestWorkersUpgradePlan: the workers' steps Cluster API computes when no
// one gives them: a step every third minor, then the target.
func TestWorkersUpgradePlan(t *testing.T) {
	tests := []struct {
		name, desired, cp, minWorkers string
		cpPlan, want                  []string
	}{
		{"no workers", "v1.36.1", "v1.33.5", "", []string{"v1.34.3", "v1.35.2", "v1.36.1"}, nil},
		{"three minors: at the end only", "v1.36.1", "v1.33.5", "v1.33.5", []string{"v1.34.3", "v1.35.2", "v1.36.1"}, []string{"v1.36.1"}},
		{"four minors: a step on the way", "v1.34.3", "v1.30.2", "v1.30.2", []string{"v1.31.1", "v1.32.4", "v1.33.5", "v1.34.3"}, []string{"v1.33.5", "v1.34.3"}},
		{"seven minors: two steps on the way", "v1.37.0", "v1.30.2", "v1.30.2",
			[]string{"v1.31.1", "v1.32.4", "v1.33.5", "v1.34.3", "v1.35.2", "v1.36.1", "v1.37.0"}, []string{"v1.33.5", "v1.36.1", "v1.37.0"}},
		{"workers behind a control plane already upgraded", "v1.35.2", "v1.34.3", "v1.31.1", []string{"v1.35.2"}, []string{"v1.34.3", "v1.35.2"}},
		{"workers at the target", "v1.35.2", "v1.34.3", "v1.35.2", []string{"v1.35.2"}, nil},
		{"one patch", "v1.35.3", "v1.35.2", "v1.35.2", []string{"v1.35.3"}, []string{"v1.35.3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := workersUpgradePlan(tt.desired, tt.cp, tt.minWorkers, tt.cpPlan)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := workersUpgradePlan("v1.36.1", "v1.32.4", "v1.32.4", []string{"v1.36.1"})
	require.Error(t, err, "a plan that skips the minor the workers must stop at")
}

// TestUpgradeSteps: the steps in the order Cluster API runs them, with the
// etcd version at each control-plane step.
func TestUpgradeSteps(t *testing.T) {
	steps := upgradeSteps("v1.33.5", []string{"v1.34.3", "v1.35.2", "v1.36.1"}, []string{"v1.36.1"}, "", "kubeadmcontrolplane/cp", []string{"machinedeployment/md-0"}, 1, 2)
	var got []string
	for _, st := range steps {
		got = append(got, fmt.Sprintf("%s %s %d %s (%s)", st.Part, st.Version, st.Machines, st.Etcd, st.EtcdSource))
	}
	assert.Equal(t, []string{
		"controlPlane v1.34.3 1 3.6.5 (kubeadm's default for v1.34.3)",
		"controlPlane v1.35.2 1 3.6.6 (kubeadm's default for v1.35.2)",
		"controlPlane v1.36.1 1 3.6.8 (kubeadm's default for v1.36.1)",
		"workers v1.36.1 2  ()",
	}, got)

	steps = upgradeSteps("v1.30.2", []string{"v1.31.1", "v1.32.4", "v1.33.5", "v1.34.3"}, []string{"v1.30.2", "v1.33.5", "v1.34.3"}, "3.5.24-0", "kubeadmcontrolplane/cp", []string{"machinedeployment/md-0"}, 3, 3)
	got = nil
	for _, st := range steps {
		got = append(got, st.Part+" "+st.Version+" "+st.Etcd)
	}
	assert.Equal(t, []string{"workers v1.30.2 ", "controlPlane v1.31.1 3.5.24-0", "controlPlane v1.32.4 3.5.24-0", "controlPlane v1.33.5 3.5.24-0",
		"workers v1.33.5 ", "controlPlane v1.34.3 3.5.24-0", "workers v1.34.3 "}, got, "a pinned etcd tag holds at every step; workers follow where they must")
}

// TestPreflightHolds: the MachineSet preflight checks that would keep a
// worker pool's new machines from being created, named as Cluster API
// names them, and their skip annotation.
func TestPreflightHolds(t *testing.T) {
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"}}
	topo := cluster.DeepCopy()
	topo.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "class"}, Version: "v1.35.2"}
	upgrading := planKCP("v1.35.2")
	upgrading.Status.Versions = []clusterv1.StatusVersion{{Version: "v1.34.3", Replicas: 2}, {Version: "v1.35.2", Replicas: 1}}
	provisioning := planKCP("v1.34.3")
	provisioning.Status = controlplanev1.KubeadmControlPlaneStatus{}
	skip := func(md *clusterv1.MachineDeployment, v string) *clusterv1.MachineDeployment {
		md.Annotations = map[string]string{clusterv1.MachineSetSkipPreflightChecksAnnotation: v}
		return md
	}
	tests := []struct {
		name          string
		md            *clusterv1.MachineDeployment
		cluster       *clusterv1.Cluster
		cp            *controlplanev1.KubeadmControlPlane
		bootstrapSkip string
		want          []string
	}{
		{"same minor", planMD("v1.34.3", "md-0"), cluster, planKCP("v1.34.3"), "", nil},
		{"newer than the control plane", planMD("v1.35.2", "md-0"), cluster, planKCP("v1.34.3"), "", []string{"KubernetesVersionSkew", "KubeadmVersionSkew"}},
		{"one minor older, kubeadm", planMD("v1.33.5", "md-0"), cluster, planKCP("v1.34.3"), "", []string{"KubeadmVersionSkew"}},
		{"four minors older", planMD("v1.30.2", "md-0"), cluster, planKCP("v1.34.3"), "", []string{"KubernetesVersionSkew", "KubeadmVersionSkew"}},
		{"control plane upgrading", planMD("v1.35.2", "md-0"), cluster, upgrading, "", []string{"ControlPlaneIsStable"}},
		{"control plane provisioning", planMD("v1.34.3", "md-0"), cluster, provisioning, "", []string{"ControlPlaneIsStable"}},
		{"topology version not yet on the control plane", planMD("v1.34.3", "md-0"), topo, planKCP("v1.34.3"), "", []string{"ControlPlaneIsStable"}},
		{"topology pool behind its control plane", planMD("v1.34.3", "md-0"), topo, planKCP("v1.35.2"), "", []string{"KubeadmVersionSkew", "ControlPlaneVersionSkew"}},
		{"skipped by name", skip(planMD("v1.33.5", "md-0"), "KubeadmVersionSkew"), cluster, planKCP("v1.34.3"), "", nil},
		{"skipped all", skip(planMD("v1.35.2", "md-0"), "All"), cluster, planKCP("v1.34.3"), "", nil},
		{"skipped on the bootstrap template", planMD("v1.33.5", "md-0"), cluster, planKCP("v1.34.3"), "ControlPlaneIsStable, KubeadmVersionSkew", nil},
		{"no control plane version", planMD("v1.33.5", "md-0"), cluster, planKCP(""), "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			holds := preflightHolds(tt.md, holdFacts{cluster: tt.cluster, controlPlane: tt.cp, bootstrapSkip: tt.bootstrapSkip, cli: "rollout"})
			var got []string
			for _, h := range holds {
				assert.Equal(t, v1alpha1.HoldPreflightCheck, h.Kind)
				assert.Contains(t, h.Message, "(Cluster API's "+h.Check+" preflight check)", "names Cluster API's check")
				assert.Contains(t, h.Message, clusterv1.MachineSetSkipPreflightChecksAnnotation+"="+h.Check, "names the way out")
				got = append(got, h.Check)
			}
			assert.Equal(t, tt.want, got)
		})
	}
	holds := preflightHolds(planMD("v1.33.5", "md-0"), holdFacts{cluster: cluster, controlPlane: planKCP("v1.34.3")})
	require.Len(t, holds, 1)
	assert.Equal(t, "new machines of machinedeployment/md-0 at v1.33.5 would join KubeadmControlPlane c1-control-plane at v1.34.3 with kubeadm, which joins only machines of the control plane's minor: none is created until machinedeployment/md-0 is at v1.34 (Cluster API's KubeadmVersionSkew preflight check); to skip it, annotate MachineDeployment md-0 with machineset.cluster.x-k8s.io/skip-preflight-checks=KubeadmVersionSkew (rollout-guard lets only a member of an override group set it, with rollout-guard.io/override and the reason)", holds[0].Message)
}

// TestHolds: paused objects and Clusters, OnDelete, a control plane still
// rolling out, its own checks, topology annotations.
func TestHolds(t *testing.T) {
	paused := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	md := planMD("v1.34.3", "md-0")
	md.Spec.Paused = ptr.To(true)
	md.Spec.Rollout.Strategy.Type = clusterv1.OnDeleteMachineDeploymentStrategyType
	f := holdFacts{cluster: paused, controlPlane: planKCP("v1.34.3"), cli: "rollout"}
	holds := machineDeploymentHolds(md, true, f)
	require.Len(t, holds, 3)
	assert.Equal(t, v1alpha1.PlanHold{Kind: v1alpha1.HoldPaused, Check: "spec.paused", Object: "cluster/c1", Message: "Cluster c1 is paused (spec.paused is true): Cluster API reconciles none of its objects until it is resumed; the change is stored and rolls out then"}, holds[0])
	assert.Equal(t, v1alpha1.PlanHold{Kind: v1alpha1.HoldPaused, Check: "spec.paused", Object: "machinedeployment/md-0", Message: "MachineDeployment md-0 is paused (spec.paused is true): the change is stored and rolls out when it is resumed: rollout resume machinedeployment/md-0"}, holds[1])
	assert.Equal(t, v1alpha1.HoldOnDelete, holds[2].Kind)
	assert.Len(t, machineDeploymentHolds(md, false, f), 2, "without new machines only the pauses hold")

	kcp := planKCP("v1.35.2")
	kcp.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	kcp.Status.Versions = []clusterv1.StatusVersion{{Version: "v1.34.3", Replicas: 1}, {Version: "v1.35.2", Replicas: 2}}
	kcp.Status.Conditions = []metav1.Condition{{Type: controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition, Status: metav1.ConditionFalse, Reason: "NotHealthy", Message: "member cp-a is a learner"}}
	gone := planMachine("cp-a", "", kcp.Name, "v1.34.3", time.Hour)
	gone.DeletionTimestamp = ptr.To(metav1.NewTime(planEpoch))
	holds = controlPlaneHolds(kcp, true, holdFacts{controlPlane: kcp, cpMachines: []clusterv1.Machine{gone}, cli: "rollout"})
	var kinds []string
	for _, h := range holds {
		kinds = append(kinds, h.Kind+" "+h.Check)
	}
	assert.Equal(t, []string{"Paused cluster.x-k8s.io/paused", "UpgradeInProgress status.versions", "ControlPlaneChecks EtcdClusterHealthy", "ControlPlaneChecks HasDeletingMachine"}, kinds)
	assert.Equal(t, "KubeadmControlPlane c1-control-plane adds and removes machines only while its condition EtcdClusterHealthy is True; it is False (NotHealthy: member cp-a is a learner)", holds[2].Message)

	topo := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"}, Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
		Version: "v1.35.2",
		Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{Name: "md-0", Class: "w",
			Metadata: clusterv1.ObjectMeta{Annotations: map[string]string{clusterv1.ClusterTopologyDeferUpgradeAnnotation: ""}}}}}}},
		Status: clusterv1.ClusterStatus{ControlPlane: &clusterv1.ClusterControlPlaneStatus{UpgradePlan: []clusterv1.StatusUpgradePlanVersion{{Version: "v1.35.2"}}}}}
	holds = topologyUpgradeHolds(topo, holdFacts{cluster: topo, cli: "rollout"})
	kinds = nil
	for _, h := range holds {
		kinds = append(kinds, h.Kind+" "+h.Check)
	}
	assert.Equal(t, []string{"UpgradeInProgress status.controlPlane.upgradePlan", "Topology topology.cluster.x-k8s.io/defer-upgrade"}, kinds)
}

// TestEstimateDuration: the median time per machine of the last recorded
// rollout, or unknown and why.
func TestEstimateDuration(t *testing.T) {
	start := planEpoch.Add(-time.Hour)
	ready := func(m clusterv1.Machine, after time.Duration) clusterv1.Machine {
		m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineReadyCondition, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(m.CreationTimestamp.Add(after))}}
		return m
	}
	at := func(name string, d time.Duration) clusterv1.Machine {
		return planMachine(name, "md-0-aaa", "", "v1.34.3", time.Hour-d)
	}
	created := revisions.Record{Revision: 1, ChangeType: revisions.ChangeCreated, ChangedAt: start.Add(-time.Hour)}
	rollout := revisions.Record{Revision: 2, ChangeType: revisions.ChangeRollout, ChangedAt: start}
	label := revisions.Record{Revision: 3, ChangeType: revisions.ChangeInPlace, ChangedAt: start.Add(10 * time.Minute)}
	tests := []struct {
		name     string
		records  []revisions.Record
		machines []clusterv1.Machine
		want     v1alpha1.PlanDuration
	}{
		{"three machines", []revisions.Record{created, rollout}, []clusterv1.Machine{at("a", 0), at("b", 40*time.Second), ready(at("c", 90*time.Second), 45*time.Second)},
			v1alpha1.PlanDuration{Known: true, PerMachine: "45s", Estimate: "2m15s", Basis: "median per machine over 3 machines of the rollout of revision 2 (2030-01-02T02:00:00Z)"}},
		{"a label changed since", []revisions.Record{created, rollout, label}, []clusterv1.Machine{at("a", 0), at("b", 40*time.Second), ready(at("c", 90*time.Second), 45*time.Second)},
			v1alpha1.PlanDuration{Known: true, PerMachine: "45s", Estimate: "2m15s", Basis: "median per machine over 3 machines of the rollout of revision 2 (2030-01-02T02:00:00Z)"}},
		{"older machines are not counted", []revisions.Record{rollout}, []clusterv1.Machine{planMachine("old", "x", "", "v1.34.3", 3*time.Hour), at("a", 0), ready(at("b", 30*time.Second), 50*time.Second)},
			v1alpha1.PlanDuration{Known: true, PerMachine: "40s", Estimate: "2m0s", Basis: "median per machine over 2 machines of the rollout of revision 2 (2030-01-02T02:00:00Z)"}},
		{"a restart after the revision", []revisions.Record{{Revision: 1, ChangeType: revisions.ChangeCreated, Restarts: []revisions.Restart{{At: start}}}},
			[]clusterv1.Machine{at("a", 0), at("b", 20*time.Second)},
			v1alpha1.PlanDuration{Known: true, PerMachine: "20s", Estimate: "1m0s", Basis: "median per machine over 1 machine of the restart of revision 1 at 2030-01-02T02:00:00Z (2030-01-02T02:00:00Z)"}},
		{"created, never rolled", []revisions.Record{created, label}, []clusterv1.Machine{at("a", 0)},
			v1alpha1.PlanDuration{Basis: "unknown: the history of machinedeployment/md-0 records no rollout or restart to learn from"}},
		{"no machine of that rollout", []revisions.Record{rollout}, []clusterv1.Machine{planMachine("old", "x", "", "v1.34.3", 3*time.Hour)},
			v1alpha1.PlanDuration{Basis: "unknown: no running machine of machinedeployment/md-0 was created by the rollout of revision 2"}},
		{"one machine, not ready", []revisions.Record{rollout}, []clusterv1.Machine{at("a", 0)},
			v1alpha1.PlanDuration{Basis: "unknown: the one machine the rollout of revision 2 created is not ready yet"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, estimateDuration("machinedeployment/md-0", tt.records, tt.machines, 3))
		})
	}
}

// TestVerdictOf: the API server's answer to the dry run, as a verdict:
// who refused, the webhook, the guard's rules and message; other failures
// stay errors.
func TestVerdictOf(t *testing.T) {
	gk := schema.GroupKind{Group: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane"}
	guard := fmt.Errorf("admission webhook %q denied the request: %w", "validate.kubeadmcontrolplane.rollout-guard.io",
		apierrors.NewInvalid(gk, "cp", field.ErrorList{field.Forbidden(field.NewPath("spec", "version"), "downgrade [rule ControlPlaneDowngrade]; etcd [rule EtcdDowngrade]")}))
	v, err := verdictOf(core.GuardError{Err: apierrors.NewForbidden(schema.GroupResource{}, "", errors.New(guard.Error()))}, []string{"w"})
	require.NoError(t, err)
	assert.False(t, v.Admitted)
	assert.Equal(t, "rollout-guard", v.RefusedBy)
	assert.Equal(t, "validate.kubeadmcontrolplane.rollout-guard.io", v.Webhook)
	assert.Equal(t, []string{"ControlPlaneDowngrade", "EtcdDowngrade"}, v.Rules)
	assert.True(t, strings.HasPrefix(v.Message, `KubeadmControlPlane.controlplane.cluster.x-k8s.io "cp" is invalid: spec.version: Forbidden: downgrade`), v.Message)
	assert.Equal(t, []string{"w"}, v.Warnings)
	assert.Empty(t, v.Causes, "a message without details")

	v, err = verdictOf(fmt.Errorf("cannot undo: %w", &apierrors.StatusError{ErrStatus: metav1.Status{Message: guard.Error(), Reason: metav1.StatusReasonInvalid, Code: 422,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Field: "spec.version", Message: "Forbidden: downgrade [rule ControlPlaneDowngrade]"}, {Field: "spec.version", Message: "Forbidden: etcd [rule EtcdDowngrade]"}}}}}), nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"spec.version: Forbidden: downgrade [rule ControlPlaneDowngrade]", "spec.version: Forbidden: etcd [rule EtcdDowngrade]"}, v.Causes)
	assert.Equal(t, "rollout-guard", v.RefusedBy)

	capi := errors.New(`admission webhook "validation.cluster.cluster.x-k8s.io" denied the request: Cluster.cluster.x-k8s.io "c1" is invalid: spec.topology.version: Invalid value: "v1.30.0": version cannot be decreased`)
	v, err = verdictOf(capi, nil)
	require.NoError(t, err)
	assert.Equal(t, "Cluster API", v.RefusedBy)
	assert.Empty(t, v.Rules)

	v, err = verdictOf(apierrors.NewInvalid(gk, "cp", field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), 2, "must be odd")}), nil)
	require.NoError(t, err)
	assert.Equal(t, "API server", v.RefusedBy)

	v, err = verdictOf(nil, []string{"steps"})
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.PlanVerdict{Admitted: true, Warnings: []string{"steps"}}, v)

	_, err = verdictOf(apierrors.NewForbidden(schema.GroupResource{Resource: "kubeadmcontrolplanes"}, "cp", errors.New("no")), nil)
	require.Error(t, err, "a denied permission is no verdict")
	_, err = verdictOf(errors.New(`Internal error occurred: failed calling webhook "stamp.kubeadmcontrolplane.rollout-guard.io": connection refused`), nil)
	require.Error(t, err, "an unreachable guard is no verdict")
}

// TestPlanExitStatus: 0 admitted, 6 refused (before anything else), 7
// replacing machines with --fail-on-replace.
func TestPlanExitStatus(t *testing.T) {
	admitted := v1alpha1.ObjectPlan{Object: v1alpha1.PlanObjectRef{Kind: "MachineDeployment", Name: "md-0"}, Verdict: v1alpha1.PlanVerdict{Admitted: true}, Counts: v1alpha1.PlanCounts{Replace: 3}}
	refused := v1alpha1.ObjectPlan{Object: v1alpha1.PlanObjectRef{Kind: "KubeadmControlPlane", Name: "cp"}, Verdict: v1alpha1.PlanVerdict{RefusedBy: "rollout-guard", Rules: []string{"EtcdDowngrade"}}}
	assert.Equal(t, core.ExitOK, core.ExitCode(planVerdictError(newRolloutPlan("c", []v1alpha1.ObjectPlan{admitted}), false)))
	err := planVerdictError(newRolloutPlan("c", []v1alpha1.ObjectPlan{admitted}), true)
	assert.Equal(t, ExitWouldReplace, core.ExitCode(err))
	assert.EqualError(t, err, "the change would replace 3 machines (--fail-on-replace); nothing was changed")
	err = planVerdictError(newRolloutPlan("c", []v1alpha1.ObjectPlan{admitted, refused}), true)
	assert.Equal(t, ExitRefused, core.ExitCode(err))
	assert.EqualError(t, err, "the change would be refused: kubeadmcontrolplane/cp by rollout-guard (EtcdDowngrade); nothing was changed")
	p := newRolloutPlan("c", nil)
	assert.True(t, p.Admitted)
	assert.NotNil(t, p.Objects)

	// A fleet: a cluster refused exits 6 before one not computed, which is
	// an error (no plan for it), before --fail-on-replace.
	changed := v1alpha1.ClusterPlan{Cluster: v1alpha1.PlanObjectRef{Name: "a"}, Result: v1alpha1.PlanClusterChanged, WorkerReplace: 1}
	notComputed := v1alpha1.ClusterPlan{Cluster: v1alpha1.PlanObjectRef{Name: "b"}, Result: v1alpha1.PlanClusterNotComputed, Reason: "template missing"}
	refusedCluster := v1alpha1.ClusterPlan{Cluster: v1alpha1.PlanObjectRef{Name: "c"}, Result: v1alpha1.PlanClusterRefused, Reason: "EtcdDowngrade"}
	through := admitted
	through.EditedThrough = &v1alpha1.PlanObjectRef{Kind: "ClusterClass", Name: "class"}
	withClusters := func(cps ...v1alpha1.ClusterPlan) *v1alpha1.RolloutPlan {
		p := newRolloutPlan("c", []v1alpha1.ObjectPlan{through})
		p.Clusters, p.Fleet = cps, fleetTotals(cps)
		return p
	}
	assert.Equal(t, ExitWouldReplace, core.ExitCode(planVerdictError(withClusters(changed), true)))
	err = planVerdictError(withClusters(changed, notComputed), true)
	assert.Equal(t, core.ExitError, core.ExitCode(err))
	assert.EqualError(t, err, "what the topology controller would do could not be computed for 1 cluster: cluster/b: template missing; the plan of the others is above; nothing was changed")
	err = planVerdictError(withClusters(changed, notComputed, refusedCluster), false)
	assert.Equal(t, ExitRefused, core.ExitCode(err))
	assert.EqualError(t, err, "the change would be refused: cluster/c: EtcdDowngrade; nothing was changed")
	assert.Equal(t, &v1alpha1.FleetTotals{Clusters: 3, Changed: 1, Refused: 1, NotComputed: 1, WorkerReplace: 1}, fleetTotals([]v1alpha1.ClusterPlan{changed, notComputed, refusedCluster}))
	assert.Nil(t, fleetTotals(nil))
}

// TestClusterEditPatch: --class and --set-variable become one merge patch
// with the resourceVersion, the variables list whole (a merge patch
// replaces lists), a variable set in place and a new one appended.
func TestClusterEditPatch(t *testing.T) {
	cluster := &clusterv1.Cluster{}
	cluster.ResourceVersion = "42"
	cluster.Spec.Topology.Variables = []clusterv1.ClusterVariable{{Name: "port"}, {Name: "image"}}
	cluster.Spec.Topology.Variables[0].Value.Raw = []byte(`8443`)
	cluster.Spec.Topology.Variables[1].Value.Raw = []byte(`"img:v1"`)
	patch, err := clusterEditPatch(cluster, "other/class-b", map[string]json.RawMessage{"image": json.RawMessage(`"img:v2"`), "new": json.RawMessage(`true`)})
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"42"},"spec":{"topology":{"classRef":{"namespace":"other","name":"class-b"},
		"variables":[{"name":"port","value":8443},{"name":"image","value":"img:v2"},{"name":"new","value":true}]}}}`, string(patch))
	patch, err = clusterEditPatch(cluster, "class-b", nil)
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"42"},"spec":{"topology":{"classRef":{"name":"class-b"}}}}`, string(patch))
}

// TestParseVariables: NAME=JSON, with the way out for a string without
// quotes.
func TestParseVariables(t *testing.T) {
	o := &PlanOptions{SetVariables: []string{`image="img:v2"`, `replicas=3`}}
	require.NoError(t, o.parseVariables())
	assert.Equal(t, map[string]json.RawMessage{"image": json.RawMessage(`"img:v2"`), "replicas": json.RawMessage(`3`)}, o.variables)
	for arg, msg := range map[string]string{
		"image=img:v2": `--set-variable image: the value "img:v2" is not JSON (a string is written in quotes: image='"img:v2"')`,
		"=1":           `--set-variable "=1": write NAME=JSON, e.g. --set-variable 'workerImage="img:v2"'`,
		"image":        `--set-variable "image": write NAME=JSON, e.g. --set-variable 'workerImage="img:v2"'`,
	} {
		o := &PlanOptions{SetVariables: []string{arg}}
		assert.EqualError(t, o.parseVariables(), msg, arg)
	}
}

// TestPlanStrategy: Cluster API's defaults and the words for them.
func TestPlanStrategy(t *testing.T) {
	md := planMD("v1.34.3", "md-0")
	assert.Equal(t, &v1alpha1.PlanStrategy{Type: "RollingUpdate", MaxSurge: "1", MaxUnavailable: "0", DeletionOrder: "Random",
		Description: "RollingUpdate: up to 1 new machine above the 3 wanted, at most 0 unavailable; old machines deleted in Random order once new ones are available"}, machineDeploymentStrategy(md))
	md.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromString("50%"))
	md.Spec.Deletion.Order = clusterv1.OldestMachineSetDeletionOrder
	assert.Equal(t, "RollingUpdate: up to 2 new machines above the 3 wanted, at most 0 unavailable; old machines deleted in Oldest order once new ones are available", machineDeploymentStrategy(md).Description)
	md.Spec.Rollout.Strategy.Type = clusterv1.OnDeleteMachineDeploymentStrategyType
	assert.Equal(t, "OnDelete", machineDeploymentStrategy(md).Type)

	kcp := planKCP("v1.34.3")
	assert.Equal(t, "RollingUpdate, maxSurge 1: one machine at a time, a new one created and joined before the oldest is deleted", controlPlaneStrategy(kcp).Description)
	kcp.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
	assert.Contains(t, controlPlaneStrategy(kcp).Description, "maxSurge 0")
}
