package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// Policy gathers the facts of one change and asks package skew for the
// decision. The guard's validating webhooks refuse on it (reading through the
// manager's cache), its mutating webhook records which rules a break-glass
// override overrode, and the CLI checks a change with it before sending
// (reading through a live client), so all three judge alike.
type Policy struct {
	// Reader reads Clusters, control planes, worker pools, MachineSets and
	// Machines.
	Reader client.Reader
	// Mapper resolves the kinds of control planes other than KubeadmControlPlane.
	Mapper meta.RESTMapper
	// ControlPlaneKinds are the control-plane kinds of other providers the
	// guard was told to police (ControlPlaneKindsFlag). A worker change of
	// a Cluster whose control plane is of another kind, and cannot be
	// read, is allowed with a warning naming the flag.
	ControlPlaneKinds []schema.GroupKind
	// Indexed says that Reader serves the ClusterNameField index (the
	// guard's cache). Without it workers are listed per namespace and
	// filtered here, as a live API server serves no such field selector.
	Indexed bool
	// Live, when set, reads from the API server what Reader (a cache) may
	// not hold yet or holds only in part: the owner a MachineSet or a
	// Machine names, made a moment before it, and a MachineDeployment's
	// preflight-skip annotation. nil: Reader alone.
	Live client.Reader
	// Recorded, when set, finds what the control planes of a Cluster ran,
	// from their recorded revisions (history.ClusterHistory): a control
	// plane created anew is judged against it, as an update from it
	// would be. nil: judged against its Cluster's Machines and workers
	// only.
	Recorded RecordedRuns
	// StampsWritten, when set, says whether the guard wrote the revision
	// stamps of a control plane the policy reads (its highest run): one
	// whose stamps it did not write — created while the guard was down —
	// is judged without them, so a forged highest-run neither lowers nor
	// raises what the policy believes. nil takes every stamp as written
	// (the CLI, which holds no key: the guard's answer decides). An error
	// (the records could not be read) refuses the change: judged without
	// stamps the guard did write, a downgrade could pass.
	StampsWritten func(ctx context.Context, obj client.Object) (bool, error)
}

// RecordedRuns finds what the control planes of a Cluster ran, from the
// metadata of their recorded revisions (revisions.LabelCluster,
// revisions.AnnotationRun), whether those control planes still exist or
// not.
type RecordedRuns interface {
	// ClusterRuns returns the runs recorded for the control planes of
	// Cluster cluster in namespace.
	ClusterRuns(ctx context.Context, namespace, cluster string) ([]revisions.ClusterRun, error)
}

// withoutForgedStamps returns kcp, or a copy without its revision stamps
// when p.StampsWritten says the guard did not write them.
func (p Policy) withoutForgedStamps(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane) (*controlplanev1.KubeadmControlPlane, error) {
	if p.StampsWritten == nil || kcp == nil {
		return kcp, nil
	}
	written, err := p.StampsWritten(ctx, kcp)
	if err != nil || written {
		return kcp, err
	}
	out := kcp.DeepCopy()
	out.Annotations = revisions.Unstamped(out.Annotations)
	return out, nil
}

func (p Policy) facts() factReader {
	return factReader{reader: p.Reader, mapper: p.Mapper, indexed: p.Indexed, listed: p.ControlPlaneKinds, live: p.Live}
}

// Decide judges the change of oldObj (nil on create) into newObj, as the
// registry's entry for newObj's kind says (kinds.Kind.Decide). Besides the
// decision it returns warnings of the guard's own (facts it could not find).
func (p Policy) Decide(ctx context.Context, oldObj, newObj client.Object) (skew.Decision, []string, error) {
	kind, ok := kinds.Of(newObj)
	if !ok || kind.Decide == nil {
		return skew.Decision{}, nil, fmt.Errorf("rollout-guard has no policy for %T", newObj)
	}
	return kind.Decide(ctx, p, oldObj, newObj)
}

var _ kinds.Judge = Policy{}

// DecideWorkerPool judges a worker pool's version change against its
// Cluster's control plane: the one code path of every kind that runs
// kubelets (MachineDeployments, MachinePools, MachineSets, Machines). A
// change of its spec.clusterName, which Cluster API refuses, is judged
// against the control planes of both Clusters.
//
// A MachineSet or a Machine is judged only where it differs from the
// owner it names (kinds.PoolChange.Owned): what Cluster API's controllers
// make of a MachineDeployment, a MachinePool or a control plane has the
// version (and preflight-skip annotation) of that owner, which the guard
// judged on the owner. One made by hand, or naming an owner that is not
// there, is judged as a pool is.
//
// Besides the worker rules: a version set to "" in a Cluster whose control
// plane has one is refused (RuleWorkerVersionUnset), and so is the
// preflight-skip annotation newly set to skip a skew check
// (RulePreflightSkewChecksSkipped); both give way to the override. Both
// only warn on a create in a paused Cluster: `clusterctl move` creates a
// cluster's objects as they were, its Cluster paused.
func (p Policy) DecideWorkerPool(ctx context.Context, pool kinds.PoolChange) (skew.Decision, []string, error) {
	versionChanged := !pool.HasOld || pool.OldVersion != pool.NewVersion
	skipped := skippedSkewChecks(pool.SkipPreflightChecks, pool.OldSkipPreflightChecks)
	if !versionChanged && len(skipped) == 0 {
		return skew.Decision{}, nil, nil
	}
	if pool.Owned && pool.Owner != nil {
		o, err := p.facts().ownerOf(ctx, pool.Kind, pool.Namespace, pool.ClusterName, pool.NewVersion, *pool.Owner)
		if err != nil {
			return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not read the owner %s %s of %s %s/%s: %w", pool.Owner.Kind, pool.Owner.Name, pool.Kind, pool.Namespace, pool.Name, err)
		}
		if o != nil && o.version == pool.NewVersion {
			versionChanged = false
		}
		if o != nil && len(skipped) > 0 && o.skipPreflight != nil {
			ownerSkip, err := o.skipPreflight(ctx)
			if err != nil {
				return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not read the owner %s of %s %s/%s: %w", o.desc, pool.Kind, pool.Namespace, pool.Name, err)
			}
			if ownerSkip == pool.SkipPreflightChecks {
				skipped = nil
			}
		}
		if !versionChanged && len(skipped) == 0 {
			return skew.Decision{}, nil, nil
		}
	}
	var d skew.Decision
	var warnings []string
	if versionChanged {
		var err error
		if d, warnings, err = p.decideWorkerPoolIn(ctx, pool, pool.ClusterName); err != nil {
			return skew.Decision{}, nil, err
		}
		if pool.HasOld && pool.OldClusterName != "" && pool.OldClusterName != pool.ClusterName {
			stored, more, err := p.decideWorkerPoolIn(ctx, pool, pool.OldClusterName)
			if err != nil {
				return skew.Decision{}, nil, err
			}
			d.Violations = append(d.Violations, stored.Violations...)
			d.Warnings = append(d.Warnings, stored.Warnings...)
			warnings = append(warnings, more...)
		}
	}
	if len(skipped) > 0 {
		d.Violations = append(d.Violations, skippedPreflight(pool.Kind+" "+pool.Name, pool.SkipPreflightChecks, skipped))
	}
	if !pool.HasOld && unsetOrSkipped(d) {
		paused, err := p.facts().clusterPaused(ctx, pool.Namespace, pool.ClusterName)
		if err != nil {
			return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not read the Cluster of %s %s/%s: %w", pool.Kind, pool.Namespace, pool.Name, err)
		}
		if paused {
			d = warnUnsetOrSkipped(d, fmt.Sprintf("created in paused Cluster %s/%s, as `clusterctl move` creates it; allowed, judged again on its next change", pool.Namespace, pool.ClusterName))
		}
	}
	return d, warnings, nil
}

// decideWorkerPoolIn judges a worker pool's version change against the
// control plane of Cluster clusterName: the worker rules, and an empty
// version against a control plane that has one (RuleWorkerVersionUnset).
func (p Policy) decideWorkerPoolIn(ctx context.Context, pool kinds.PoolChange, clusterName string) (skew.Decision, []string, error) {
	field := orDefault(pool.VersionField, workerVersionField)
	obj := pool.Kind + " " + pool.Name
	cp, reason, err := p.facts().controlPlaneOf(ctx, pool.Namespace, clusterName)
	if err != nil {
		return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not read the control plane of %s %s/%s: %w", pool.Kind, pool.Namespace, pool.Name, err)
	}
	switch {
	case pool.NewVersion == "" && cp != nil && cp.Version.Text() != "":
		return skew.Decision{Violations: []skew.Violation{unsetVersion(obj, field, cp)}}, nil, nil
	case pool.NewVersion == "":
		// No control plane, or one without a version: nothing a version
		// could be checked against.
		return skew.Decision{}, nil, nil
	case cp == nil:
		// Without a control plane there is nothing to judge the skew against:
		// refuse only what is wrong on its own, and say why the rest was not checked.
		return versionOnly(obj, field, skew.ReadVersion(pool.NewVersion)),
			[]string{fmt.Sprintf("rollout-guard: version skew of %s %s/%s not checked: %s", pool.Kind, pool.Namespace, pool.Name, reason)}, nil
	}
	change := skew.WorkerChange{
		Kind:         pool.Kind,
		Name:         pool.Name,
		VersionField: field,
		NewVersion:   skew.ReadVersion(pool.NewVersion),
		ControlPlane: cp,
	}
	if pool.HasOld {
		change.OldVersion = skew.ReadVersion(pool.OldVersion)
	}
	return skew.EvaluateWorker(change), nil, nil
}

// DecideKubeadmControlPlane judges a KubeadmControlPlane's change (oldKCP
// nil on create): its version against what it has run and its workers, its
// etcd against what etcd has run. The workers are those of every Cluster it
// may belong to (clusterIdentity). A created control plane is judged as an
// update from what its Cluster's control-plane Machines run: one created
// anew under a Cluster that has them (after a delete that orphaned them)
// must not take them back.
func (p Policy) DecideKubeadmControlPlane(ctx context.Context, oldKCP, newKCP *controlplanev1.KubeadmControlPlane) (skew.Decision, []string, error) {
	if oldKCP != nil && oldKCP.Spec.Version == newKCP.Spec.Version && etcdImageTag(oldKCP) == etcdImageTag(newKCP) {
		return skew.Decision{}, nil, nil
	}
	id := fmt.Sprintf("KubeadmControlPlane %s/%s", newKCP.Namespace, newKCP.Name)
	change := skew.ControlPlaneChange{
		Kind:            "KubeadmControlPlane",
		Name:            newKCP.Name,
		VersionField:    "spec.version",
		EtcdField:       etcdImageTagField,
		NewVersion:      skew.ReadVersion(newKCP.Spec.Version),
		NewEtcdImageTag: skew.ReadEtcdVersion(etcdImageTag(newKCP)),
	}
	var old *kcpRead
	var oldObj client.Object
	if oldKCP != nil {
		oldObj = oldKCP
		old = readKCP(oldKCP)
		change.OldVersion, change.OldEtcdImageTag, change.RunningVersions = old.version, old.etcdTag, old.running
		change.History = old.run().history
	}
	clusters, err := p.facts().controlPlaneClusters(ctx, oldObj, newKCP, controlplanev1.GroupVersion.Group, "KubeadmControlPlane")
	if err != nil {
		return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not find the Cluster of %s: %w", id, err)
	}
	warnings, err := p.judgeAgainstClusters(ctx, &change, id, newKCP.Namespace, clusters, oldKCP == nil)
	if err != nil {
		return skew.Decision{}, nil, err
	}
	d := skew.EvaluateControlPlane(change)
	if old != nil && refusesDowngrade(d) {
		// Going back: allowed if what is taken back never rolled out.
		bump := bumpOf(change.OldVersion, change.NewVersion)
		u, err := p.facts().unrolledKCPBump(ctx, old, nil, clusters.names, bump)
		if err != nil {
			return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not read the control-plane Machines of %s: %w", id, err)
		}
		if u != nil {
			change.PreviousUnrolled, change.History, change.RunningVersions = true, u.history, u.running
			d = skew.EvaluateControlPlane(change)
		}
	}
	return d, warnings, nil
}

// judgeAgainstClusters adds to change, of the control plane id in
// namespace, the workers of every Cluster it may belong to and, on create,
// the versions its Clusters' control-plane Machines run. It returns the
// warnings of what it could not find.
func (p Policy) judgeAgainstClusters(ctx context.Context, change *skew.ControlPlaneChange, id, namespace string, clusters clusterIdentity, created bool) ([]string, error) {
	var warnings []string
	switch {
	case len(clusters.names) == 0 && created:
		// No Cluster yet, hence no workers to keep within skew: only the
		// version itself is judged.
		return nil, nil
	case len(clusters.names) == 0:
		return []string{fmt.Sprintf("rollout-guard: %s has no %s label or owning Cluster; worker skew not checked", id, clusterNameLabel)}, nil
	}
	if w := identityWarning(id, clusters); w != "" {
		warnings = append(warnings, w)
	}
	workers, err := p.facts().workersOfAll(ctx, namespace, clusters, allWorkers)
	if err != nil {
		return nil, fmt.Errorf("rollout-guard could not read the workers of %s: %w", id, err)
	}
	change.Workers = workers
	if created {
		// Created under Clusters whose control-plane Machines run: judged
		// as an update from what they run (nothing, for a new cluster or
		// one `clusterctl move` is creating: its Machines come after).
		machines, err := p.facts().controlPlaneMachinesOf(ctx, namespace, clusters.names)
		if err != nil {
			return nil, fmt.Errorf("rollout-guard could not read the control-plane Machines of %s: %w", id, err)
		}
		for _, m := range machines {
			for _, v := range m.versions {
				change.RunningVersions = readOnce(change.RunningVersions, v.Text())
			}
		}
		// And as an update from what its Clusters' control planes ran, as
		// their records say: a control plane deleted with
		// --cascade=orphan, its Machines gone too, left them behind.
		history, err := p.recordedHistory(ctx, namespace, clusters.names)
		if err != nil {
			return nil, fmt.Errorf("rollout-guard could not read the recorded history of the Cluster of %s: %w", id, err)
		}
		change.History = higherHistory(change.History, beyondRunning(history, change.RunningVersions))
	}
	return warnings, nil
}

// beyondRunning returns of h, the highest run recorded for a Cluster's
// control planes, what is above what its control-plane Machines run (their
// versions, and kubeadm's default etcd of each): the rest the Machines
// show already, and the refusal names them, the live evidence.
func beyondRunning(h skew.History, running []skew.Version) skew.History {
	for _, v := range running {
		if !v.Valid() {
			continue
		}
		if k := h.HighestKubernetes; k.Valid() && !k.Semver().GT(v.Semver()) {
			h.HighestKubernetes, h.HighestKubernetesSource = skew.Version{}, ""
		}
		if e := h.HighestEtcd; e.Valid() {
			if def, _, err := skew.EtcdForTag(v.Semver(), skew.EtcdVersion{}); err == nil && !e.Semver().GT(def) {
				h.HighestEtcd, h.HighestEtcdSource = skew.EtcdVersion{}, ""
			}
		}
	}
	return h
}

// recordedHistory is the highest run recorded for the control planes of
// the Clusters named in namespace (Recorded), the zero History when
// Recorded is nil or nothing is recorded.
func (p Policy) recordedHistory(ctx context.Context, namespace string, clusters []string) (skew.History, error) {
	var out skew.History
	if p.Recorded == nil {
		return out, nil
	}
	for _, name := range clusters {
		runs, err := p.Recorded.ClusterRuns(ctx, namespace, name)
		if err != nil {
			return skew.History{}, err
		}
		out = higherHistory(out, revisions.HighestOfCluster(name, runs))
	}
	return out, nil
}

// higherHistory returns the higher of a's and b's highest Kubernetes
// versions and, apart, of their highest etcd versions, each with its
// source; a's on a tie or when b's is not a version.
func higherHistory(a, b skew.History) skew.History {
	if k := b.HighestKubernetes; k.Valid() && (!a.HighestKubernetes.Valid() || k.Semver().GT(a.HighestKubernetes.Semver())) {
		a.HighestKubernetes, a.HighestKubernetesSource = k, b.HighestKubernetesSource
	}
	if e := b.HighestEtcd; e.Valid() && (!a.HighestEtcd.Valid() || e.Semver().GT(a.HighestEtcd.Semver())) {
		a.HighestEtcd, a.HighestEtcdSource = e, b.HighestEtcdSource
	}
	return a
}

// DecideCluster judges a topology Cluster's version change (oldCluster nil
// on create), as Cluster API's topology controller will carry it out.
func (p Policy) DecideCluster(ctx context.Context, oldCluster, newCluster *clusterv1.Cluster) (skew.Decision, []string, error) {
	var oldVersion string
	if oldCluster != nil {
		oldVersion = oldCluster.Spec.Topology.Version
	}
	newVersion := newCluster.Spec.Topology.Version
	if oldVersion == newVersion || newVersion == "" {
		return skew.Decision{}, nil, nil
	}
	change := skew.ControlPlaneChange{
		Kind:         "Cluster",
		Name:         newCluster.Name,
		VersionField: "spec.topology.version",
		EtcdField:    "KubeadmControlPlane " + etcdImageTagField,
		OldVersion:   skew.ReadVersion(oldVersion),
		NewVersion:   skew.ReadVersion(newVersion),
	}
	var warnings []string
	if _, bypass := newCluster.Annotations[SkipTopologyVersionCheckAnnotation]; bypass {
		warnings = append(warnings, fmt.Sprintf("rollout-guard: annotation %s skips Cluster API's checks only; rollout-guard's rules still apply", SkipTopologyVersionCheckAnnotation))
	}

	// The etcd the control plane pins, the versions it runs and the highest
	// it has run live on its KubeadmControlPlane; the topology controller
	// keeps the pinned tag.
	var kcp *kcpRead
	if ref := newCluster.Spec.ControlPlaneRef; ref.Name != "" && (ref.Kind != "KubeadmControlPlane" || ref.APIGroup != controlplanev1.GroupVersion.Group) {
		// Another provider's control plane: its etcd, if any, is not
		// kubeadm's, and the rules give Kubernetes' reasons.
		change.NoEtcd = true
	}
	if ref := newCluster.Spec.ControlPlaneRef; ref.Kind == "KubeadmControlPlane" && ref.APIGroup == controlplanev1.GroupVersion.Group {
		got := &controlplanev1.KubeadmControlPlane{}
		err := p.facts().reader.Get(ctx, types.NamespacedName{Namespace: newCluster.Namespace, Name: ref.Name}, got, p.facts().getOptions()...)
		switch {
		case err == nil:
			trusted, err := p.withoutForgedStamps(ctx, got)
			if err != nil {
				return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not read the history of KubeadmControlPlane %s/%s: %w", newCluster.Namespace, ref.Name, err)
			}
			kcp = readKCP(trusted)
			change.OldEtcdImageTag, change.NewEtcdImageTag = kcp.etcdTag, kcp.etcdTag
			change.RunningVersions = kcp.running
			change.History = kcp.run().history
		case apierrors.IsNotFound(err) && oldCluster == nil:
			// A new Cluster's control plane is created after it (by the
			// topology controller): nothing to judge against yet.
		case apierrors.IsNotFound(err):
			warnings = append(warnings, fmt.Sprintf("rollout-guard: KubeadmControlPlane %s/%s of Cluster %s not found; judged on spec.topology.version alone", newCluster.Namespace, ref.Name, newCluster.Name))
		default:
			return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not read KubeadmControlPlane %s/%s: %w", newCluster.Namespace, ref.Name, err)
		}
	}

	// How Cluster API will carry the change out: through the versions its
	// ClusterClass lists, as its upgrade-plan extension decides, or one
	// minor at a time. The plan starts from the control plane's spec.
	plan, planWarning, err := p.planOf(ctx, newCluster, kcp, change.OldVersion, change.NewVersion)
	if err != nil {
		return skew.Decision{}, nil, err
	}
	change.Plan = plan
	if planWarning != "" {
		warnings = append(warnings, planWarning)
	}

	// Workers the topology owns are upgraded by the topology controller as
	// the plan requires; the others (hand-made pools) keep their version.
	workers, err := p.facts().workersOf(ctx, newCluster.Namespace, newCluster.Name, withoutTopologyOwned)
	if err != nil {
		return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not read the workers of Cluster %s/%s: %w", newCluster.Namespace, newCluster.Name, err)
	}
	change.Workers = workers
	d := skew.EvaluateControlPlane(change)
	if oldCluster != nil && kcp != nil && refusesDowngrade(d) {
		// Going back: allowed if the bump never rolled out, whether the
		// topology controller gave it to the control plane or not yet.
		u, err := p.unrolledTopologyChange(ctx, newCluster, kcp, change.OldVersion, change.NewVersion)
		if err != nil {
			return skew.Decision{}, nil, err
		}
		if u != nil {
			change.PreviousUnrolled, change.History, change.RunningVersions = true, u.history, u.running
			d = skew.EvaluateControlPlane(change)
		}
	}
	return d, warnings, nil
}

// planOf returns how Cluster API carries out the topology version change of
// cluster from oldVersion to newVersion: nil for one minor at a time (a class
// without a version list or extension), or with a warning when the class
// cannot be read. The plan starts from the control plane's spec.version,
// else from oldVersion.
func (p Policy) planOf(ctx context.Context, cluster *clusterv1.Cluster, kcp *kcpRead, oldVersion, newVersion skew.Version) (*skew.UpgradePlan, string, error) {
	current := oldVersion
	if kcp != nil && kcp.version.Text() != "" {
		current = kcp.version
	}
	key := cluster.GetClassKey()
	if key.Name == "" || !crossesMinors(current, newVersion) {
		// One minor or less: every plan is the version itself.
		return nil, "", nil
	}
	class := &clusterv1.ClusterClass{}
	if err := p.facts().reader.Get(ctx, key, class, p.facts().getOptions()...); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Sprintf("rollout-guard: ClusterClass %s of Cluster %s/%s not found; judged as an upgrade of one minor at a time", key, cluster.Namespace, cluster.Name), nil
		}
		return nil, "", fmt.Errorf("rollout-guard could not read ClusterClass %s of Cluster %s/%s: %w", key, cluster.Namespace, cluster.Name, err)
	}
	plan, err := upgradePlanOf(class, newVersion, current)
	if err != nil {
		return nil, fmt.Sprintf("rollout-guard: the upgrade plan of Cluster %s/%s could not be computed (%v); judged as an upgrade of one minor at a time", cluster.Namespace, cluster.Name, err), nil
	}
	return plan, "", nil
}

// crossesMinors reports whether going from one version to another moves
// more than one minor up; texts that are not versions do not.
func crossesMinors(from, to skew.Version) bool {
	if !from.Valid() || !to.Valid() {
		return false
	}
	f, t := from.Semver(), to.Semver()
	return t.Major > f.Major || t.Major == f.Major && t.Minor > f.Minor+1
}

// unrolledTopologyChange returns what the control plane ran before a
// topology version bump (oldVersion) that never rolled out, nil when it did.
func (p Policy) unrolledTopologyChange(ctx context.Context, cluster *clusterv1.Cluster, kcp *kcpRead, oldVersion, newVersion skew.Version) (*unrolledBump, error) {
	bump := bumpOf(oldVersion, newVersion)
	if bump.Text() == "" {
		return nil, nil
	}
	var u *unrolledBump
	var err error
	if given := bumpOf(bump, kcp.version); given.Text() == "" {
		// The control plane's spec has the bump (or more): its latest
		// revision must be one that never rolled out.
		u, err = p.facts().unrolledKCPBump(ctx, kcp, cluster, []string{cluster.Name}, bump)
	} else {
		u, err = p.facts().unrolledTopologyBump(ctx, kcp, cluster, bump)
	}
	if err != nil {
		return nil, fmt.Errorf("rollout-guard could not read the control-plane Machines of Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	return u, nil
}

// OverrideGroups are the groups whose members may use the break-glass
// override annotation.
type OverrideGroups []string

// Allows reports whether user belongs to one of the groups.
func (g OverrideGroups) Allows(user authenticationv1.UserInfo) bool {
	for _, have := range user.Groups {
		for _, want := range g {
			if have == want {
				return true
			}
		}
	}
	return false
}

// OverrideRequested reports whether this change sets the override
// annotation (a value the stored object did not carry), and its reason.
func OverrideRequested(oldObj, newObj client.Object) (string, bool) {
	reason := newObj.GetAnnotations()[revisions.AnnotationOverride]
	if reason == "" {
		return "", false
	}
	if oldObj != nil && oldObj.GetAnnotations()[revisions.AnnotationOverride] == reason {
		return "", false
	}
	return reason, true
}

// String lists the groups for messages.
func (g OverrideGroups) String() string {
	if len(g) == 0 {
		return "none configured"
	}
	return strings.Join(g, ", ")
}

// versionOnly judges a version on its own, for when the facts to judge it
// against are missing: a text that is not a version is still refused, in the
// words of the refusal the full policy gives.
func versionOnly(obj, fieldPath string, version skew.Version) skew.Decision {
	if !version.Valid() {
		return skew.Decision{Violations: []skew.Violation{{
			Rule:    skew.RuleInvalidVersion,
			Field:   fieldPath,
			Value:   version.Text(),
			Message: fmt.Sprintf("%s: %s %q is not a valid Kubernetes version", obj, fieldPath, version.Text()),
			Remedy:  "write a Kubernetes version such as v1.35.2",
		}}}
	}
	return skew.Decision{}
}

// HighestRunOf returns the highest versions a stored control plane is known
// to have run: its stamp, raised by what its spec runs (an object stamped
// before the guard knew it, or not at all, still counts what it runs). nil
// gives the zero value.
func HighestRunOf(kcp *controlplanev1.KubeadmControlPlane) revisions.HighestRun {
	if kcp == nil {
		return revisions.HighestRun{}
	}
	run, _ := revisions.KubeadmRun(skew.ReadVersion(kcp.Spec.Version), skew.ReadEtcdVersion(etcdImageTag(kcp)))
	return stampedHighest(kcp).Raise(run, revisions.StampsOf(kcp).Revision)
}

// stampedHighest reads the highest-run stamp of an object, treating a
// malformed one as absent (the guard overwrites it on the next change).
func stampedHighest(obj client.Object) revisions.HighestRun {
	var h revisions.HighestRun
	if raw := obj.GetAnnotations()[revisions.AnnotationHighestRun]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &h); err != nil {
			return revisions.HighestRun{}
		}
	}
	return h
}

// RuleIDs lists the ids of the rules a decision breaks, once each.
func RuleIDs(d skew.Decision) []string {
	var ids []string
	for _, v := range d.Violations {
		if !slices.Contains(ids, string(v.Rule)) {
			ids = append(ids, string(v.Rule))
		}
	}
	return ids
}
