package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/status"
)

// topo describes a ClusterClass cluster "c1" in namespace "demo" for the
// tests: its topology version and upgrade plans, its control plane (spec
// version and the versions of its machines) and its worker pools.
type topo struct {
	target        string
	cpPlan, wPlan []string
	// cpVersion is the KubeadmControlPlane's spec.version; "" for none.
	cpVersion string
	// CPMachines are the versions of its machines; a machine at another
	// version than cpVersion is not up to date.
	CPMachines []string
	pools      []topoPool
	// declared are more MachineDeployment topologies, not created.
	declared []string
	// machinePools are its MachinePools, without Machines (as most
	// infrastructure providers run them).
	machinePools []topoMachinePool
	// declaredMachinePools are more MachinePool topologies, not created.
	declaredMachinePools []string
	// reconciled is the TopologyReconciled condition's "reason: message";
	// "" for True.
	reconciled string
}

// topoPool is one MachineDeployment: its name in the topology (it is
// called c1-NAME), spec version and its machines' versions; a machine at
// another version belongs to the old MachineSet and is not up to date.
// byHand pools are not topology-owned.
type topoPool struct {
	name, version string
	machines      []string
	byHand        bool
	// deleting pools are no longer in the topology and being deleted.
	deleting bool
	// paused pools have spec.paused set.
	paused bool
}

// topoMachinePool is one MachinePool of the topology (it is called
// c1-NAME): its spec version, how many instances it wants and how many of
// them are up to date (all of them available and ready). byHand pools are
// not topology-owned.
type topoMachinePool struct {
	name, version      string
	replicas, upToDate int32
	byHand             bool
}

const topoNS = "demo"

// objects builds the Cluster, KubeadmControlPlane, MachineDeployments,
// MachinePools, Machines and MachineSets.
func (t topo) objects() (*clusterv1.Cluster, status.TopologyObjects) {
	created := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	labels := func(extra ...string) map[string]string {
		l := map[string]string{clusterv1.ClusterNameLabel: "c1"}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	c := &clusterv1.Cluster{}
	c.Name, c.Namespace, c.Generation, c.UID = "c1", topoNS, 4, "uid-c1"
	c.Spec.Topology.ClassRef.Name = "quick-start"
	c.Spec.Topology.Version = t.target
	for _, p := range t.pools {
		if !p.byHand && !p.deleting {
			c.Spec.Topology.Workers.MachineDeployments = append(c.Spec.Topology.Workers.MachineDeployments, clusterv1.MachineDeploymentTopology{Name: p.name, Class: "default-worker"})
		}
	}
	for _, d := range t.declared {
		c.Spec.Topology.Workers.MachineDeployments = append(c.Spec.Topology.Workers.MachineDeployments, clusterv1.MachineDeploymentTopology{Name: d, Class: "default-worker"})
	}
	for _, p := range t.machinePools {
		if !p.byHand {
			c.Spec.Topology.Workers.MachinePools = append(c.Spec.Topology.Workers.MachinePools, clusterv1.MachinePoolTopology{Name: p.name, Class: "default-pool"})
		}
	}
	for _, d := range t.declaredMachinePools {
		c.Spec.Topology.Workers.MachinePools = append(c.Spec.Topology.Workers.MachinePools, clusterv1.MachinePoolTopology{Name: d, Class: "default-pool"})
	}
	c.Status.ControlPlane = &clusterv1.ClusterControlPlaneStatus{}
	c.Status.Workers = &clusterv1.WorkersStatus{}
	for _, v := range t.cpPlan {
		c.Status.ControlPlane.UpgradePlan = append(c.Status.ControlPlane.UpgradePlan, clusterv1.StatusUpgradePlanVersion{Version: v})
	}
	for _, v := range t.wPlan {
		c.Status.Workers.UpgradePlan = append(c.Status.Workers.UpgradePlan, clusterv1.StatusUpgradePlanVersion{Version: v})
	}
	cond := metav1.Condition{Type: clusterv1.ClusterTopologyReconciledCondition, Status: metav1.ConditionTrue, Reason: "ReconcileSucceeded"}
	if t.reconciled != "" {
		cond.Status = metav1.ConditionFalse
		cond.Reason, cond.Message, _ = strings.Cut(t.reconciled, ": ")
	}
	c.Status.Conditions = []metav1.Condition{cond}

	machine := func(name, version string, upToDate bool, l map[string]string, owner string) clusterv1.Machine {
		m := statusMachine(name, true, upToDate, false, "NotUpToDate", "* Version "+version+", a newer one required")
		m.Namespace, m.Labels, m.Spec.Version, m.Spec.ClusterName = topoNS, l, version, "c1"
		m.CreationTimestamp = metav1.NewTime(created)
		if owner == "" {
			m.OwnerReferences = nil
		} else {
			m.OwnerReferences[0].Name = owner
		}
		return m
	}
	var machines []clusterv1.Machine
	var kcp *controlplanev1.KubeadmControlPlane
	if t.cpVersion != "" {
		kcp = &controlplanev1.KubeadmControlPlane{}
		kcp.Name, kcp.Namespace, kcp.Generation, kcp.UID = "c1-control-plane", topoNS, 3, "uid-kcp"
		kcp.Labels = labels(clusterv1.ClusterTopologyOwnedLabel, "")
		kcp.Spec.Version = t.cpVersion
		n := int32(len(t.CPMachines))
		kcp.Spec.Replicas = &n
		upToDate := int32(0)
		for i, v := range t.CPMachines {
			machines = append(machines, machine(fmt.Sprintf("c1-control-plane-%d", i), v, v == t.cpVersion, labels(clusterv1.MachineControlPlaneNameLabel, kcp.Name), ""))
			if v == t.cpVersion {
				upToDate++
			}
		}
		kcp.Status.ObservedGeneration = 3
		kcp.Status.Replicas, kcp.Status.UpToDateReplicas, kcp.Status.AvailableReplicas, kcp.Status.ReadyReplicas = &n, &upToDate, &n, &n
		kcp.Annotations = map[string]string{"rollout-guard.io/revision": "3"}
		c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: kcp.Name}
	}
	// poolMeta names worker pool c1-NAME, labelled with its cluster and, but
	// for one added by hand, as owned by the topology under nameLabel.
	poolMeta := func(m *metav1.ObjectMeta, kind, name, nameLabel string, byHand bool) {
		m.Name, m.Namespace, m.Generation, m.UID = "c1-"+name, topoNS, 2, types.UID("uid-"+kind+"-"+name)
		m.Labels = labels()
		if !byHand {
			m.Labels = labels(clusterv1.ClusterTopologyOwnedLabel, "", nameLabel, name)
		}
	}
	var mds []clusterv1.MachineDeployment
	var sets []clusterv1.MachineSet
	for _, p := range t.pools {
		md := clusterv1.MachineDeployment{}
		poolMeta(&md.ObjectMeta, "md", p.name, clusterv1.ClusterTopologyMachineDeploymentNameLabel, p.byHand)
		md.Annotations = map[string]string{clusterv1.RevisionAnnotation: "2", "rollout-guard.io/revision": "2"}
		md.Spec.ClusterName = "c1"
		if p.deleting {
			md.DeletionTimestamp = &metav1.Time{Time: created}
			md.Finalizers = []string{"cluster.x-k8s.io/machinedeployment"}
		}
		md.Spec.Template.Spec.Version = p.version
		if p.paused {
			md.Spec.Paused = ptr.To(true)
		}
		n := int32(len(p.machines))
		md.Spec.Replicas = &n
		var fresh, old int32
		for i, v := range p.machines {
			set := md.Name + "-new"
			if v != p.version {
				set = md.Name + "-old"
				old++
			} else {
				fresh++
			}
			machines = append(machines, machine(fmt.Sprintf("%s-%d", set, i), v, v == p.version, labels(clusterv1.MachineDeploymentNameLabel, md.Name), set))
		}
		md.Status.ObservedGeneration = 2
		md.Status.Replicas, md.Status.UpToDateReplicas, md.Status.AvailableReplicas, md.Status.ReadyReplicas = &n, &fresh, &n, &n
		if old > 0 {
			md.Status.Conditions = []metav1.Condition{{Type: clusterv1.RollingOutCondition, Status: metav1.ConditionTrue, Reason: "RollingOut"}}
		}
		newSet := machineSet(md.Name+"-new", "2", n, fresh)
		oldSet := machineSet(md.Name+"-old", "1", old, old)
		for _, ms := range []*clusterv1.MachineSet{&newSet, &oldSet} {
			ms.Namespace, ms.Labels = topoNS, labels(clusterv1.MachineDeploymentNameLabel, md.Name)
			sets = append(sets, *ms)
		}
		mds = append(mds, md)
	}
	var mps []clusterv1.MachinePool
	for _, p := range t.machinePools {
		mp := clusterv1.MachinePool{}
		poolMeta(&mp.ObjectMeta, "mp", p.name, clusterv1.ClusterTopologyMachinePoolNameLabel, p.byHand)
		mp.Annotations = map[string]string{"rollout-guard.io/revision": "2"}
		mp.Spec.ClusterName = "c1"
		mp.Spec.Template.Spec.Version = p.version
		replicas, upToDate := p.replicas, p.upToDate
		mp.Spec.Replicas = &replicas
		mp.Status.ObservedGeneration = 2
		mp.Status.Replicas, mp.Status.UpToDateReplicas, mp.Status.AvailableReplicas, mp.Status.ReadyReplicas = &replicas, &upToDate, &replicas, &replicas
		mps = append(mps, mp)
	}
	return c, status.TopologyObjects{ControlPlane: kcp, MachineDeployments: mds, MachinePools: mps, Machines: machines, MachineSets: sets}
}

// report evaluates the cluster.
func (t topo) report() status.ClusterReport {
	c, objs := t.objects()
	return status.EvaluateTopologyAt(c, objs, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
}

// stepsLine is the steps on one line; ">" marks the current one.
func stepsLine(u *status.UpgradeStatus) string {
	var parts []string
	for _, st := range u.Steps {
		mark := ""
		if st.Current {
			mark = ">"
		}
		parts = append(parts, fmt.Sprintf("%s%s %s %s", mark, st.Version, st.Part, st.State))
	}
	return strings.Join(parts, ", ")
}

// The states of a chained upgrade of c1 from v1.33.4 to v1.35.0 through
// v1.34.2 (the ClusterClass lists every minor): 3 control-plane machines,
// one worker pool md-0 of 2 machines, which Cluster API upgrades once, at
// the end (kubelet skew allows it).
var (
	chainBumped = topo{target: "v1.35.0", cpVersion: "v1.33.4", CPMachines: []string{"v1.33.4", "v1.33.4", "v1.33.4"},
		pools: []topoPool{{name: "md-0", version: "v1.33.4", machines: []string{"v1.33.4", "v1.33.4"}}}}
	chainStep1Rolling = topo{target: "v1.35.0", cpPlan: []string{"v1.35.0"}, wPlan: []string{"v1.35.0"},
		cpVersion: "v1.34.2", CPMachines: []string{"v1.33.4", "v1.34.2", "v1.34.2"},
		pools:      []topoPool{{name: "md-0", version: "v1.33.4", machines: []string{"v1.33.4", "v1.33.4"}}},
		reconciled: "ClusterUpgrading: Cluster is upgrading to v1.35.0\n  * KubeadmControlPlane upgrading to version v1.34.2 (v1.35.0 pending)\n  * MachineDeployment c1-md-0 pending upgrade to version v1.35.0"}
	chainStep1Done = topo{target: "v1.35.0", cpPlan: []string{"v1.35.0"}, wPlan: []string{"v1.35.0"},
		cpVersion: "v1.34.2", CPMachines: []string{"v1.34.2", "v1.34.2", "v1.34.2"},
		pools:      []topoPool{{name: "md-0", version: "v1.33.4", machines: []string{"v1.33.4", "v1.33.4"}}},
		reconciled: "ClusterUpgrading: Cluster is upgrading to v1.35.0\n  * KubeadmControlPlane pending upgrade to version v1.35.0\n  * MachineDeployment c1-md-0 pending upgrade to version v1.35.0"}
	chainStep2Rolling = topo{target: "v1.35.0", wPlan: []string{"v1.35.0"},
		cpVersion: "v1.35.0", CPMachines: []string{"v1.34.2", "v1.35.0", "v1.35.0"},
		pools:      []topoPool{{name: "md-0", version: "v1.33.4", machines: []string{"v1.33.4", "v1.33.4"}}},
		reconciled: "ClusterUpgrading: Cluster is upgrading to v1.35.0\n  * KubeadmControlPlane upgrading to version v1.35.0\n  * MachineDeployment c1-md-0 pending upgrade to version v1.35.0"}
	chainWorkersRolling = topo{target: "v1.35.0",
		cpVersion: "v1.35.0", CPMachines: []string{"v1.35.0", "v1.35.0", "v1.35.0"},
		pools:      []topoPool{{name: "md-0", version: "v1.35.0", machines: []string{"v1.33.4", "v1.35.0"}}},
		reconciled: "ClusterUpgrading: Cluster is upgrading to v1.35.0\n  * MachineDeployment c1-md-0 upgrading to version v1.35.0"}
	chainDone = topo{target: "v1.35.0",
		cpVersion: "v1.35.0", CPMachines: []string{"v1.35.0", "v1.35.0", "v1.35.0"},
		pools: []topoPool{{name: "md-0", version: "v1.35.0", machines: []string{"v1.35.0", "v1.35.0"}}}}
)

// TestEvaluateTopology: a ClusterClass cluster is done only at its
// spec.topology.version, reached by the control plane (spec and every
// machine) and every MachineDeployment of the topology, and with every
// object rolled out; the steps say where the upgrade stands.
func TestEvaluateTopology(t *testing.T) {
	staleCP := chainDone
	staleCP.CPMachines = []string{"v1.35.0", "v1.35.0", "v1.34.2"}
	for _, tc := range []struct {
		name     string
		topo     topo
		complete bool
		// objects is whether each object (control plane, then pools) is
		// complete on its own.
		objects []bool
		steps   string
		summary string
	}{
		{name: "rolled out at the target", topo: chainDone, complete: true, objects: []bool{true, true},
			steps:   "v1.35.0 controlPlane RolledOut, v1.35.0 workers RolledOut",
			summary: "at v1.35.0 on the control plane and 1 worker pool"},
		{name: "version bumped, no plan written yet", topo: chainBumped, objects: []bool{true, true},
			steps:   "v1.33.4 controlPlane RolledOut, v1.33.4 workers RolledOut, >v1.35.0 controlPlane Pending, v1.35.0 workers Pending",
			summary: "upgrading to v1.35.0: waiting for the topology controller to start control plane v1.35.0; then workers v1.35.0"},
		{name: "first step rolling out", topo: chainStep1Rolling, objects: []bool{false, true},
			steps:   "v1.33.4 workers RolledOut, >v1.34.2 controlPlane RollingOut, v1.35.0 controlPlane Pending, v1.35.0 workers Pending",
			summary: "upgrading to v1.35.0: control plane v1.34.2 rolling out; then control plane v1.35.0, workers v1.35.0"},
		// The control plane and the pool are each rolled out: an
		// intermediate step of a chained upgrade is not the end.
		{name: "first step rolled out is not done", topo: chainStep1Done, objects: []bool{true, true},
			steps:   "v1.33.4 workers RolledOut, v1.34.2 controlPlane RolledOut, >v1.35.0 controlPlane Pending, v1.35.0 workers Pending",
			summary: "upgrading to v1.35.0: waiting for the topology controller to start control plane v1.35.0; then workers v1.35.0"},
		{name: "last control-plane step rolling out", topo: chainStep2Rolling, objects: []bool{false, true},
			steps:   "v1.33.4 workers RolledOut, >v1.35.0 controlPlane RollingOut, v1.35.0 workers Pending",
			summary: "upgrading to v1.35.0: control plane v1.35.0 rolling out; then workers v1.35.0"},
		{name: "workers rolling out", topo: chainWorkersRolling, objects: []bool{true, false},
			steps:   "v1.35.0 controlPlane RolledOut, >v1.35.0 workers RollingOut",
			summary: "upgrading to v1.35.0: workers v1.35.0 rolling out, 0 of 1 pool done"},
		// Cluster API's efficient upgrades: workers on v1.32 must go to
		// v1.35 before the control plane may go to v1.36.
		{name: "workers take an intermediate step for the kubelet skew", topo: topo{target: "v1.36.0", cpPlan: []string{"v1.36.0"}, wPlan: []string{"v1.35.0", "v1.36.0"},
			cpVersion: "v1.35.0", CPMachines: []string{"v1.35.0"},
			pools: []topoPool{{name: "md-0", version: "v1.32.9", machines: []string{"v1.32.9"}}, {name: "md-1", version: "v1.35.0", machines: []string{"v1.32.9", "v1.35.0"}}}},
			objects: []bool{true, true, false},
			steps:   "v1.32.9 workers RolledOut, v1.35.0 controlPlane RolledOut, >v1.35.0 workers RollingOut, v1.36.0 controlPlane Pending, v1.36.0 workers Pending",
			summary: "upgrading to v1.36.0: workers v1.35.0 rolling out, 0 of 2 pools done; then control plane v1.36.0, workers v1.36.0"},
		{name: "a control-plane machine on the old version", topo: staleCP, objects: []bool{false, true},
			steps:   ">v1.35.0 controlPlane RollingOut, v1.35.0 workers RolledOut",
			summary: "upgrading to v1.35.0: control plane v1.35.0 rolling out"},
		{name: "a MachineDeployment topology not created yet", topo: func() topo { t := chainDone; t.declared = []string{"md-1"}; return t }(), objects: []bool{true, true},
			steps:   "v1.35.0 controlPlane RolledOut, >v1.35.0 workers RollingOut",
			summary: "upgrading to v1.35.0: workers v1.35.0 rolling out, 1 of 2 pools done; MachineDeployment topology md-1 not created yet"},
		{name: "a pool added by hand counts for done, not for the steps", topo: func() topo {
			t := chainDone
			t.pools = append(t.pools, topoPool{name: "extra", version: "v1.34.2", machines: []string{"v1.34.2"}, byHand: true})
			return t
		}(), complete: true, objects: []bool{true, true, true},
			steps:   "v1.35.0 controlPlane RolledOut, v1.35.0 workers RolledOut",
			summary: "at v1.35.0 on the control plane and 1 worker pool"},
		{name: "a pool added by hand still rolling out", topo: func() topo {
			t := chainDone
			t.pools = append(t.pools, topoPool{name: "extra", version: "v1.34.2", machines: []string{"v1.33.4"}, byHand: true})
			return t
		}(), objects: []bool{true, false, true},
			steps:   "v1.35.0 controlPlane RolledOut, v1.35.0 workers RolledOut",
			summary: "at v1.35.0 on the control plane and 1 worker pool"},
		// A pool the topology no longer has is not part of the upgrade, but
		// the cluster is rolled out only once it is gone.
		{name: "a pool the topology removed, being deleted", topo: func() topo {
			t := chainDone
			t.pools = append(t.pools, topoPool{name: "md-old", version: "v1.33.4", machines: []string{"v1.33.4"}, deleting: true})
			return t
		}(), objects: []bool{true, true, false},
			steps:   "v1.35.0 controlPlane RolledOut, v1.35.0 workers RolledOut",
			summary: "at v1.35.0 on the control plane and 1 worker pool"},
		{name: "no control plane yet", topo: topo{target: "v1.35.0"}, objects: []bool{},
			steps:   ">v1.35.0 controlPlane Pending",
			summary: "upgrading to v1.35.0: waiting for the topology controller to start control plane v1.35.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.topo.report()
			require.NotNil(t, r.Cluster.Upgrade)
			assert.Equal(t, tc.complete, r.Cluster.Complete, "cluster complete")
			got := []bool{}
			for _, o := range r.Objects {
				got = append(got, o.Complete)
			}
			assert.Equal(t, tc.objects, got, "objects complete")
			assert.Equal(t, tc.steps, stepsLine(r.Cluster.Upgrade), "steps")
			assert.Equal(t, tc.summary, r.Cluster.Summary(), "summary")
			assert.Equal(t, "cluster/c1", r.Cluster.Object)
		})
	}
}

// TestEvaluateTopologyReached pins the done rule on the upgrade alone.
func TestEvaluateTopologyReached(t *testing.T) {
	for _, tc := range []struct {
		name    string
		topo    topo
		reached bool
	}{
		{"every part at the target", chainDone, true},
		{"workers rolling out to the target", chainWorkersRolling, false},
		{"control plane spec at the target, a machine not", chainStep2Rolling, false},
		{"intermediate step rolled out", chainStep1Done, false},
		{"bumped, nothing started", chainBumped, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.reached, tc.topo.report().Cluster.Upgrade.Reached)
		})
	}
}

// TestUpgradeOf pins the steps on facts alone.
func TestUpgradeOf(t *testing.T) {
	cp := func(v string, complete bool, machines ...string) *status.PartFacts {
		return &status.PartFacts{Object: "kubeadmcontrolplane/cp", Version: v, Machines: machines, Complete: complete}
	}
	pool := func(name, v string, complete bool, machines ...string) status.PartFacts {
		return status.PartFacts{Object: "machinedeployment/" + name, Topology: name, Version: v, Machines: machines, Complete: complete}
	}
	for _, tc := range []struct {
		name          string
		target        string
		cpPlan, wPlan []string
		cp            *status.PartFacts
		pools         []status.PartFacts
		missing       []string
		missingMPs    []string
		steps         string
		reached       bool
	}{
		{name: "no workers", target: "v1.34.2", cp: cp("v1.34.2", true, "v1.34.2"),
			steps: "v1.34.2 controlPlane RolledOut", reached: true},
		{name: "a stale plan below the control plane is ignored", target: "v1.34.2", cpPlan: []string{"v1.33.4"}, cp: cp("v1.34.2", true, "v1.34.2"),
			steps: "v1.34.2 controlPlane RolledOut", reached: true},
		{name: "control plane complete but not every machine on its version", target: "v1.34.2", cp: cp("v1.34.2", true, "v1.34.2", "v1.33.4"),
			steps: ">v1.34.2 controlPlane RollingOut"},
		{name: "three control-plane steps", target: "v1.35.0", cpPlan: []string{"v1.34.2", "v1.35.0"}, wPlan: []string{"v1.35.0"},
			cp: cp("v1.33.4", false, "v1.32.9", "v1.33.4"), pools: []status.PartFacts{pool("a", "v1.32.9", true, "v1.32.9")},
			steps: "v1.32.9 workers RolledOut, >v1.33.4 controlPlane RollingOut, v1.34.2 controlPlane Pending, v1.35.0 controlPlane Pending, v1.35.0 workers Pending"},
		{name: "pools upgraded one after the other", target: "v1.35.0", wPlan: []string{"v1.35.0"},
			cp: cp("v1.35.0", true, "v1.35.0"), pools: []status.PartFacts{pool("a", "v1.35.0", true, "v1.35.0"), pool("b", "v1.34.2", true, "v1.34.2")},
			steps: "v1.34.2 workers RolledOut, v1.35.0 controlPlane RolledOut, >v1.35.0 workers RollingOut"},
		{name: "no control plane, a missing pool", target: "v1.35.0", missing: []string{"a"},
			steps: ">v1.35.0 controlPlane Pending, v1.35.0 workers Pending"},
		{name: "a missing MachinePool holds the end", target: "v1.35.0", cp: cp("v1.35.0", true, "v1.35.0"),
			pools: []status.PartFacts{pool("a", "v1.35.0", true, "v1.35.0")}, missingMPs: []string{"mp"},
			steps: "v1.35.0 controlPlane RolledOut, >v1.35.0 workers RollingOut"},
		// Cluster API lets a plan go through versions equal but for their
		// build metadata, in the plan's order.
		{name: "build metadata keeps the plan's order", target: "v1.34.2+build.1", cpPlan: []string{"v1.34.2+build.2", "v1.34.2+build.1"},
			cp:    cp("v1.33.4", true, "v1.33.4"),
			steps: "v1.33.4 controlPlane RolledOut, >v1.34.2+build.2 controlPlane Pending, v1.34.2+build.1 controlPlane Pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := status.UpgradeOf(tc.target, tc.cpPlan, tc.wPlan, tc.cp, tc.pools, tc.missing, tc.missingMPs)
			assert.Equal(t, tc.steps, stepsLine(&u))
			assert.Equal(t, tc.reached, u.Reached, "reached")
		})
	}
}

func TestVersionSequence(t *testing.T) {
	assert.Equal(t, []string{"v1.32.9", "v1.33.4", "v1.34.2+b", "v1.34.2+a", "v1.35.0", "latest"},
		status.VersionSequence([]string{"v1.35.0", "", "latest"}, []string{"v1.34.2+b", "v1.33.4", "v1.34.2+a"}, []string{"v1.32.9", "v1.33.4"}))
	assert.Equal(t, []status.VersionCount{{Version: "v1.33.4", Machines: 1}, {Version: "v1.34.2", Machines: 2}}, status.CountVersions([]string{"v1.34.2", "v1.33.4", "v1.34.2"}))
}

// TestEvaluateTopologyPaused: a paused Cluster or object is the paused
// verdict, whatever else holds.
func TestEvaluateTopologyPaused(t *testing.T) {
	c, objs := chainDone.objects()
	c.Spec.Paused = ptr.To(true)
	r := status.EvaluateTopologyAt(c, objs, time.Now())
	assert.Equal(t, "spec.paused is true", r.Cluster.Paused)
	assert.Equal(t, "paused (spec.paused is true)", r.Cluster.Summary())

	c.Spec.Paused = nil
	objs.MachineDeployments[0].Spec.Paused = ptr.To(true)
	r = status.EvaluateTopologyAt(c, objs, time.Now())
	assert.Equal(t, "machinedeployment/c1-md-0: spec.paused is true", r.Cluster.Paused)
	tr := &status.StatusTracker{ProgressDeadline: time.Minute}
	assert.Equal(t, status.PhasePaused, tr.Observe(r.Cluster, time.Now()).Phase)
}

// TestTopologyTracker: the tracker needs the whole cluster to be complete,
// and counts a step of the upgrade as progress.
func TestTopologyTracker(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := &status.StatusTracker{ProgressDeadline: 10 * time.Minute}
	assert.Equal(t, status.PhaseProgressing, tr.Observe(chainStep1Done.report().Cluster, t0).Phase, "an intermediate step rolled out")
	assert.Equal(t, status.PhaseProgressing, tr.Observe(chainStep1Done.report().Cluster, t0.Add(9*time.Minute)).Phase)
	// The next step applied: progress, so the deadline moves.
	assert.Equal(t, status.PhaseProgressing, tr.Observe(chainStep2Rolling.report().Cluster, t0.Add(10*time.Minute)).Phase)
	assert.Equal(t, status.PhaseStalled, tr.Observe(chainStep2Rolling.report().Cluster, t0.Add(20*time.Minute)).Phase)
	assert.Equal(t, status.PhaseRolledOut, (&status.StatusTracker{ProgressDeadline: time.Minute}).Observe(chainDone.report().Cluster, t0).Phase)
}

// chainReports are the reports of a whole chained upgrade, with the phases
// the tracker gives them.
func chainReports() []status.ClusterReport {
	var out []status.ClusterReport
	for _, tp := range []topo{chainBumped, chainStep1Rolling, chainStep1Done, chainStep2Rolling, chainWorkersRolling, chainDone} {
		r := tp.report()
		phase := status.PhaseProgressing
		if r.Cluster.Complete {
			phase = status.PhaseRolledOut
		}
		r.SetPhase(phase, phase == status.PhaseRolledOut)
		out = append(out, r)
	}
	return out
}

// TestStatusClusterLines pins the line output of `rollout status
// cluster/c1` through a chained upgrade (docs/status.md quotes it).
func TestStatusClusterLines(t *testing.T) {
	var out bytes.Buffer
	p := &status.StatusPrinter{Out: &out, Last: map[string]string{}}
	reports := chainReports()
	for _, r := range reports {
		if !r.Cluster.Done {
			require.NoError(t, p.PrintCluster(r, time.Unix(0, 0)))
		}
	}
	require.NoError(t, status.WriteRolledOut(&out, reports[len(reports)-1]))
	golden(t, "status-cluster-lines.txt", out.String())
}

// TestStatusClusterJSON pins the -o json events of a cluster: the
// cluster's, with "upgrade", then its objects' (unchanged shape, the
// cluster's phase).
func TestStatusClusterJSON(t *testing.T) {
	var out bytes.Buffer
	p := &status.StatusPrinter{Out: &out, JSON: true, Last: map[string]string{}}
	r := chainStep1Rolling.report()
	r.SetPhase(status.PhaseProgressing, false)
	require.NoError(t, p.PrintCluster(r, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, "the cluster, its control plane and its pool")
	var pretty bytes.Buffer
	require.NoError(t, json.Indent(&pretty, []byte(lines[0]), "", "  "))
	golden(t, "status-cluster-json.txt", out.String())
	golden(t, "status-cluster-event.json", pretty.String()+"\n")

	// The objects' events keep their shape: no "upgrade".
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &obj))
	assert.NotContains(t, obj, "upgrade")
	for _, k := range []string{"time", "object", "phase", "replicas", "upToDate", "available", "ready", "machines", "done"} {
		assert.Contains(t, obj, k)
	}
}

// TestRenderLiveCluster pins the live view of a chained upgrade.
func TestRenderLiveCluster(t *testing.T) {
	reports := chainReports()
	for _, tc := range []struct {
		name          string
		r             status.ClusterReport
		width, height int
	}{
		{"step-1-rolling", reports[1], 0, 0},
		{"step-1-done", reports[2], 0, 0},
		{"workers-rolling", reports[4], 0, 0},
		{"rolled-out", reports[5], 0, 0},
		{"step-1-rolling-short", reports[1], 100, 16},
		{"step-1-rolling-tiny", reports[1], 60, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := status.RenderLiveCluster(tc.r, 4*time.Minute+10*time.Second, tc.width, tc.height)
			for i, l := range got {
				if tc.width > 0 {
					assert.LessOrEqual(t, utf8.RuneCountInString(l), tc.width, "line %d too wide", i)
				}
			}
			if tc.height > 0 {
				assert.Less(t, len(got), tc.height, "lines")
			}
			golden(t, "status-cluster-live-"+tc.name+".txt", strings.Join(got, "\n")+"\n")
		})
	}
}

// TestEvaluateTopologyDeletedPool: a MachineDeployment being deleted says so.
func TestEvaluateTopologyDeletedPool(t *testing.T) {
	tp := chainDone
	tp.pools = append(tp.pools, topoPool{name: "md-old", version: "v1.33.4", machines: []string{"v1.33.4"}, deleting: true})
	r := tp.report()
	require.Len(t, r.Objects, 3)
	assert.Equal(t, "machinedeployment/c1-md-old", r.Objects[2].Object)
	assert.Equal(t, "1 of 1 machines up to date, 1 available (being deleted)", r.Objects[2].Summary())
	assert.False(t, r.Cluster.Complete)
}

// TestEvaluateTopologyMachinePools: a ClusterClass cluster's MachinePools
// are worker pools of its upgrade like its MachineDeployments: the cluster
// is done only when each one the topology declares exists, has the
// topology version and has every instance up to date. One added by hand
// counts for done only.
func TestEvaluateTopologyMachinePools(t *testing.T) {
	withPools := func(pools []topoMachinePool, declared ...string) topo {
		tp := chainDone
		tp.machinePools, tp.declaredMachinePools = pools, declared
		return tp
	}
	for _, tc := range []struct {
		name     string
		topo     topo
		complete bool
		reached  bool
		steps    string
		summary  string
		pool     string // the MachinePool's own summary
	}{
		{name: "at the version, every instance up to date", complete: true, reached: true,
			topo:    withPools([]topoMachinePool{{name: "mp-0", version: "v1.35.0", replicas: 3, upToDate: 3}}),
			steps:   "v1.35.0 controlPlane RolledOut, v1.35.0 workers RolledOut",
			summary: "at v1.35.0 on the control plane and 2 worker pools",
			pool:    "3 of 3 instances up to date, 3 available"},
		{name: "not upgraded by the topology controller yet",
			topo:    withPools([]topoMachinePool{{name: "mp-0", version: "v1.34.2", replicas: 3, upToDate: 3}}),
			steps:   "v1.34.2 workers RolledOut, v1.35.0 controlPlane RolledOut, >v1.35.0 workers RollingOut",
			summary: "upgrading to v1.35.0: workers v1.35.0 rolling out, 1 of 2 pools done",
			pool:    "3 of 3 instances up to date, 3 available"},
		{name: "upgraded, its instances still rolling", reached: true,
			topo:    withPools([]topoMachinePool{{name: "mp-0", version: "v1.35.0", replicas: 3, upToDate: 1}}),
			steps:   "v1.35.0 controlPlane RolledOut, >v1.35.0 workers RollingOut",
			summary: "upgrading to v1.35.0: workers v1.35.0 rolling out, 1 of 2 pools done",
			pool:    "1 of 3 instances up to date, 3 available"},
		{name: "declared, not created yet",
			topo:    withPools(nil, "mp-1"),
			steps:   "v1.35.0 controlPlane RolledOut, >v1.35.0 workers RollingOut",
			summary: "upgrading to v1.35.0: workers v1.35.0 rolling out, 1 of 2 pools done; MachinePool topology mp-1 not created yet"},
		{name: "added by hand, at another version", complete: true, reached: true,
			topo:    withPools([]topoMachinePool{{name: "mp-0", version: "v1.34.2", replicas: 2, upToDate: 2, byHand: true}}),
			steps:   "v1.35.0 controlPlane RolledOut, v1.35.0 workers RolledOut",
			summary: "at v1.35.0 on the control plane and 1 worker pool",
			pool:    "2 of 2 instances up to date, 2 available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.topo.report()
			u := r.Cluster.Upgrade
			require.NotNil(t, u)
			assert.Equal(t, tc.complete, r.Cluster.Complete, "complete")
			assert.Equal(t, tc.reached, u.Reached, "reached")
			assert.Equal(t, tc.steps, stepsLine(u))
			assert.Equal(t, tc.summary, r.Cluster.Summary())
			if tc.pool == "" {
				assert.Equal(t, tc.topo.declaredMachinePools, u.MissingMachinePools)
				return
			}
			last := r.Objects[len(r.Objects)-1]
			assert.Equal(t, "machinepool/c1-mp-0", last.Object)
			assert.Equal(t, tc.pool, last.Summary())
			var workers []string
			for _, w := range u.Workers {
				workers = append(workers, w.Object+" "+w.Topology+" "+w.Version)
			}
			if tc.topo.machinePools[0].byHand {
				assert.Equal(t, []string{"machinedeployment/c1-md-0 md-0 v1.35.0"}, workers)
			} else {
				assert.Equal(t, []string{"machinedeployment/c1-md-0 md-0 v1.35.0", "machinepool/c1-mp-0 mp-0 " + tc.topo.machinePools[0].version}, workers)
			}
		})
	}
}
