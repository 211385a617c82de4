package policy

import (
	"context"

	"fmt"
	"github.com/blang/semver/v4"
	"time"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// A bump that never rolled out may be reverted. An operator who set a
// control plane's version (or etcd image tag) too early or mistyped it must
// be able to set it back before any machine runs it (cluster-api #9098);
// refusing would leave the cluster stuck on a version it cannot reach. The
// revert is judged against what really ran: the running machines and the
// history before the bump.

// controlPlaneMachine is what the revert rule reads of a control-plane Machine.
type controlPlaneMachine struct {
	name     string
	versions []skew.Version // spec.version, and the node's kubelet version when known
	created  time.Time
	// updating: Cluster API is updating the Machine in place (annotation
	// clusterv1.UpdateInProgressAnnotation). It sets that annotation
	// before the Machine's new spec, so the Machine may already run what
	// its spec does not say yet.
	updating bool
}

// unrolledBump is what a control plane ran before a bump that never rolled
// out: its history before the bump and the versions its machines run.
type unrolledBump struct {
	history skew.History
	running []skew.Version
	// nothingRan says the control plane never had a Machine
	// (neverHadMachine): it has run nothing at all.
	nothingRan bool
}

// bumpOf is the version a revert from oldVersion to newVersion takes back:
// oldVersion when it is higher, else unset (an etcd image tag change only).
func bumpOf(oldVersion, newVersion skew.Version) skew.Version {
	if !oldVersion.Valid() || !newVersion.Valid() || oldVersion.Semver().Compare(newVersion.Semver()) <= 0 {
		return skew.Version{}
	}
	return oldVersion
}

// unrolledKCPBump reports whether the latest revision of kcp (its version
// set to bump, unset when only its etcd image tag changed) never rolled out:
// its stamp knows what ran before it, the cluster has control-plane Machines
// and none was created since the bump was made, and none has or runs bump.
// It returns what ran before the bump when so. A control plane that never
// had a Machine ran nothing, whatever its stamps say. cluster is the stored
// Cluster when the caller has it, else nil.
func (f factReader) unrolledKCPBump(ctx context.Context, kcp *kcpRead, cluster *clusterv1.Cluster, clusters []string, bump skew.Version) (*unrolledBump, error) {
	if never, err := f.neverHadMachine(ctx, kcp, cluster, clusters); err != nil || never {
		return nothingRan(never), err
	}
	before, changedAt, stamped := kcp.lastRevision()
	if !stamped || len(clusters) == 0 {
		return nil, nil
	}
	machines, err := f.controlPlaneMachinesOf(ctx, kcp.obj.Namespace, clusters)
	if err != nil {
		return nil, err
	}
	return unrolledSince(before, changedAt, kcp.running, machines, bump), nil
}

// nothingRan is the unrolled bump of a control plane that never had a
// Machine, nil when it had one.
func nothingRan(never bool) *unrolledBump {
	if !never {
		return nil
	}
	return &unrolledBump{nothingRan: true}
}

// lastRevision returns what the control plane ran before its latest
// revision and when that revision was made; false when its stamp does not
// say.
func (k *kcpRead) lastRevision() (revisions.HighestRun, time.Time, bool) {
	stamp := revisions.StampsOf(k.obj)
	before, known := k.run().stamp.BeforeOf(stamp.Revision)
	return before, stamp.ChangedAt, known && !stamp.ChangedAt.IsZero()
}

// unrolledSince returns the facts of a bump made at changedAt that never
// rolled out, before being what ran before it: the control-plane machines
// listed were all created before it, and none has or runs bump. It returns
// nil when one was created since, or when none is listed.
func unrolledSince(before revisions.HighestRun, changedAt time.Time, running []skew.Version, machines []controlPlaneMachine, bump skew.Version) *unrolledBump {
	if len(machines) == 0 {
		// Nothing shows what the control plane runs: the bump may be all it
		// has (a new control plane), or the machines are not known. Judge it
		// as run.
		return nil
	}
	for _, m := range machines {
		// Creation times and stamps have second precision: a machine made in
		// the bump's second counts as made with it.
		if !m.created.Before(changedAt) {
			return nil
		}
	}
	return unrolledIfNoneRuns(before.History(), running, machines, bump)
}

// unrolledTopologyBump reports whether a Cluster's topology version bump
// that its control plane kcp has not been given yet (its spec.version is
// still below bump) never rolled out, judged by what the control plane
// holds: its spec, its Machines and its history. None of its Machines has
// or runs bump, nor does a version its status reports; its history, which
// the rules then judge the revert against, holds what it ran. Its whole
// history predates the bump — except a step of a chained upgrade towards
// bump that the topology controller already gave kcp: while that step never
// rolled out either (as unrolledKCPBump judges it), what ran is what ran
// before it. A control plane that never had a Machine ran nothing.
//
// No Machine listed, of a control plane whose status says it has them (the
// guard's cache behind, Machines being replaced), proves nothing, but
// neither is it needed: a control plane's Machines are made from its spec,
// so one with bump needs a spec that had bump, which its recorded history
// (the guard's stamp of every revision) holds, and its status reports the
// versions they run. Without that stamp nothing shows what it ran, and the
// bump is judged as run; so it is for a control plane that reports no
// Machine yet and is not paused (its first is due, see neverHadMachine).
func (f factReader) unrolledTopologyBump(ctx context.Context, kcp *kcpRead, cluster *clusterv1.Cluster, bump skew.Version) (*unrolledBump, error) {
	if never, err := f.neverHadMachine(ctx, kcp, cluster, []string{cluster.Name}); err != nil || never {
		return nothingRan(never), err
	}
	machines, err := f.controlPlaneMachines(ctx, kcp.obj.Namespace, cluster.Name)
	if err != nil || len(machines) == 0 && (!kcp.historyRecorded() || kcpReportsNoMachine(kcp)) {
		return nil, err
	}
	history := kcp.run().history
	if before, changedAt, stamped := kcp.lastRevision(); stamped {
		if step := unrolledSince(before, changedAt, kcp.running, machines, kcp.version); step != nil {
			history = step.history
		}
	}
	return unrolledIfNoneRuns(history, kcp.running, machines, bump), nil
}

// historyRecorded reports whether the guard recorded what the control
// plane has run (its highest-run stamp): then its history holds every
// version its spec ever had, but one reverted before any Machine ran it.
func (k *kcpRead) historyRecorded() bool {
	return k.run().stamp.Kubernetes != ""
}

// unrolledIfNoneRuns returns the facts of an unrolled bump, or nil when a
// running version or a machine has bump or newer, or is not a version, or
// a machine is being updated in place (what it runs cannot be told).
func unrolledIfNoneRuns(history skew.History, running []skew.Version, machines []controlPlaneMachine, bump skew.Version) *unrolledBump {
	all := append([]skew.Version(nil), running...)
	for _, m := range machines {
		if m.updating {
			return nil
		}
		all = append(all, m.versions...)
	}
	if bump.Text() != "" {
		if !bump.Valid() {
			return nil
		}
		for _, v := range all {
			if !v.Valid() || v.Semver().Compare(bump.Semver()) >= 0 {
				return nil // ran the bump, or cannot tell
			}
		}
	}
	return &unrolledBump{history: history, running: distinct(all)}
}

// controlPlaneMachinesOf lists the control-plane Machines of every
// Cluster named, one Cluster's after the other's.
func (f factReader) controlPlaneMachinesOf(ctx context.Context, namespace string, clusters []string) ([]controlPlaneMachine, error) {
	var out []controlPlaneMachine
	for _, name := range clusters {
		machines, err := f.controlPlaneMachines(ctx, namespace, name)
		if err != nil {
			return nil, err
		}
		out = append(out, machines...)
	}
	return out, nil
}

// controlPlaneMachines lists the control-plane Machines of a cluster.
func (f factReader) controlPlaneMachines(ctx context.Context, namespace, clusterName string) ([]controlPlaneMachine, error) {
	opts := []client.ListOption{client.InNamespace(namespace)}
	if f.indexed {
		opts = append(opts, client.MatchingFields{ClusterNameField: clusterName}, client.UnsafeDisableDeepCopy)
	}
	list := &clusterv1.MachineList{}
	if err := f.reader.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing the control-plane Machines of Cluster %s/%s: %w", namespace, clusterName, err)
	}
	var out []controlPlaneMachine
	for _, m := range list.Items {
		if _, cp := m.Labels[controlPlaneLabel]; !cp || m.Spec.ClusterName != clusterName {
			continue
		}
		versions := readOnce(nil, m.Spec.Version)
		if m.Status.NodeInfo != nil {
			versions = readOnce(versions, m.Status.NodeInfo.KubeletVersion)
		}
		_, updating := m.Annotations[clusterv1.UpdateInProgressAnnotation]
		out = append(out, controlPlaneMachine{name: m.Name, versions: versions, created: m.CreationTimestamp.Time, updating: updating})
	}
	return out, nil
}

// refusesDowngrade reports whether d refuses a Kubernetes or etcd
// downgrade, the rules a revert can be excused from.
func refusesDowngrade(d skew.Decision) bool {
	for _, v := range d.Violations {
		if v.Rule == skew.RuleControlPlaneDowngrade || v.Rule == skew.RuleEtcdDowngrade {
			return true
		}
	}
	return false
}

// RevertedRun tells the revision stamp what a KubeadmControlPlane has run
// when the change from oldKCP to newKCP takes back a bump that never rolled
// out (the same test Decide makes): what ran before that bump, so the
// reverted version stops counting as run. It returns nil for any other change.
func (p Policy) RevertedRun(ctx context.Context, oldKCP, newKCP *controlplanev1.KubeadmControlPlane) (*revisions.HighestRun, error) {
	if oldKCP == nil || newKCP == nil {
		return nil, nil
	}
	old := readKCP(oldKCP)
	newVersion, newTag := skew.ReadVersion(newKCP.Spec.Version), skew.ReadEtcdVersion(etcdImageTag(newKCP))
	bump := bumpOf(old.version, newVersion)
	if bump.Text() == "" && !lowersEtcd(old.version, old.etcdTag, newVersion, newTag) {
		return nil, nil
	}
	id, err := p.facts().controlPlaneClusters(ctx, oldKCP, newKCP, kubeadmControlPlaneKind.Group, kubeadmControlPlaneKind.Kind)
	if err != nil {
		return nil, fmt.Errorf("rollout-guard could not find the Cluster of KubeadmControlPlane %s/%s: %w", newKCP.Namespace, newKCP.Name, err)
	}
	u, err := p.facts().unrolledKCPBump(ctx, old, nil, id.names, bump)
	if err != nil || u == nil {
		return nil, err
	}
	if u.nothingRan {
		return &revisions.HighestRun{}, nil
	}
	before, _, _ := old.lastRevision()
	return &before, nil
}

// lowersEtcd reports whether a control plane going from oldVersion with
// oldTag to newVersion with newTag would run a lower etcd.
func lowersEtcd(oldVersion skew.Version, oldTag skew.EtcdVersion, newVersion skew.Version, newTag skew.EtcdVersion) bool {
	run := func(k skew.Version, tag skew.EtcdVersion) (semver.Version, bool) {
		if !k.Valid() {
			return semver.Version{}, false
		}
		e, _, err := skew.EtcdForTag(k.Semver(), tag)
		return e, err == nil
	}
	o, ok1 := run(oldVersion, oldTag)
	n, ok2 := run(newVersion, newTag)
	return ok1 && ok2 && n.LT(o)
}
