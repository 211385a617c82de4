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
	versions []string // spec.version, and the node's kubelet version when known
	created  time.Time
}

// unrolledBump is what a control plane ran before a bump that never rolled
// out: its history before the bump and the versions its machines run.
type unrolledBump struct {
	history skew.History
	running []string
}

// bumpOf is the version a revert from oldVersion to newVersion takes back:
// oldVersion when it is higher, else "" (an etcd image tag change only).
func bumpOf(oldVersion, newVersion string) string {
	o, err := skew.ParseVersion(oldVersion)
	if err != nil {
		return ""
	}
	n, err := skew.ParseVersion(newVersion)
	if err != nil || o.Compare(n) <= 0 {
		return ""
	}
	return oldVersion
}

// unrolledKCPBump reports whether the latest revision of kcp (its version
// set to bump, "" when only its etcd image tag changed) never rolled out: its
// stamp knows what ran before it, the cluster has control-plane Machines and
// none was created since the bump was made, and none has or runs bump. It returns what ran
// before the bump when so.
func (f factReader) unrolledKCPBump(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane, clusterName, bump string) (*unrolledBump, error) {
	stamp := StampsOf(kcp)
	before, known := HighestRunOf(kcp).BeforeOf(stamp.Revision)
	if !known || stamp.ChangedAt.IsZero() || clusterName == "" {
		return nil, nil
	}
	machines, err := f.controlPlaneMachines(ctx, kcp.Namespace, clusterName)
	if err != nil {
		return nil, err
	}
	if len(machines) == 0 {
		// Nothing shows what the control plane runs: the bump may be all it
		// has (a new control plane), or the machines are not known. Judge it
		// as run.
		return nil, nil
	}
	for _, m := range machines {
		// Creation times and stamps have second precision: a machine made in
		// the bump's second counts as made with it.
		if !m.created.Before(stamp.ChangedAt) {
			return nil, nil
		}
	}
	return unrolledIfNoneRuns(before.SkewHistory(), kcpRunningVersions(kcp), machines, bump), nil
}

// unrolledTopologyBump reports whether a Cluster's topology version bump
// that its control plane kcp has not been given yet (its spec.version is
// still below bump) never rolled out: the cluster has control-plane Machines
// and none has or runs bump. Its whole history then predates the bump —
// except a step of a chained upgrade towards bump that the topology
// controller already gave kcp: while that step never rolled out either
// (as unrolledKCPBump judges it), what ran is what ran before it.
func (f factReader) unrolledTopologyBump(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane, clusterName, bump string) (*unrolledBump, error) {
	machines, err := f.controlPlaneMachines(ctx, kcp.Namespace, clusterName)
	if err != nil || len(machines) == 0 {
		return nil, err
	}
	history := HighestRunOf(kcp).SkewHistory()
	step, err := f.unrolledKCPBump(ctx, kcp, clusterName, kcp.Spec.Version)
	if err != nil {
		return nil, err
	}
	if step != nil {
		history = step.history
	}
	return unrolledIfNoneRuns(history, kcpRunningVersions(kcp), machines, bump), nil
}

// unrolledIfNoneRuns returns the facts of an unrolled bump, or nil when a
// running version or a machine has bump or newer.
func unrolledIfNoneRuns(history skew.History, running []string, machines []controlPlaneMachine, bump string) *unrolledBump {
	all := append([]string(nil), running...)
	for _, m := range machines {
		all = append(all, m.versions...)
	}
	if bump != "" {
		b, err := skew.ParseVersion(bump)
		if err != nil {
			return nil
		}
		for _, s := range all {
			if v, err := skew.ParseVersion(s); err != nil || v.Compare(b) >= 0 {
				return nil // ran the bump, or cannot tell
			}
		}
	}
	return &unrolledBump{history: history, running: dedupe(all)}
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
		versions := []string{m.Spec.Version}
		if m.Status.NodeInfo != nil && m.Status.NodeInfo.KubeletVersion != "" {
			versions = append(versions, m.Status.NodeInfo.KubeletVersion)
		}
		out = append(out, controlPlaneMachine{name: m.Name, versions: dedupe(versions), created: m.CreationTimestamp.Time})
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
	bump := bumpOf(oldKCP.Spec.Version, newKCP.Spec.Version)
	if bump == "" && !lowersEtcd(oldKCP, newKCP) {
		return nil, nil
	}
	clusterName := clusterNameOf(oldKCP)
	u, err := p.facts().unrolledKCPBump(ctx, oldKCP, clusterName, bump)
	if err != nil || u == nil {
		return nil, err
	}
	before, _ := HighestRunOf(oldKCP).BeforeOf(StampsOf(oldKCP).Revision)
	return &before, nil
}

// lowersEtcd reports whether newKCP would run a lower etcd than oldKCP.
func lowersEtcd(oldKCP, newKCP *controlplanev1.KubeadmControlPlane) bool {
	run := func(k *controlplanev1.KubeadmControlPlane) (semver.Version, bool) {
		v, err := skew.ParseVersion(k.Spec.Version)
		if err != nil {
			return semver.Version{}, false
		}
		e, _, err := skew.EtcdFor(v, etcdImageTag(k))
		return e, err == nil
	}
	o, ok1 := run(oldKCP)
	n, ok2 := run(newKCP)
	return ok1 && ok2 && n.LT(o)
}
