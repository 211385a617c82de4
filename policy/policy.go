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
	// Reader reads Clusters, control planes, worker pools and Machines.
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
	// StampsWritten, when set, says whether the guard wrote the revision
	// stamps of a control plane the policy reads (its highest run): one
	// whose stamps it did not write — created while the guard was down —
	// is judged without them, so a forged highest-run neither lowers nor
	// raises what the policy believes. nil takes every stamp as written
	// (the CLI, which holds no key: the guard's answer decides).
	StampsWritten func(ctx context.Context, obj client.Object) bool
}

// withoutForgedStamps returns kcp, or a copy without its revision stamps
// when p.StampsWritten says the guard did not write them.
func (p Policy) withoutForgedStamps(ctx context.Context, kcp *controlplanev1.KubeadmControlPlane) *controlplanev1.KubeadmControlPlane {
	if p.StampsWritten == nil || kcp == nil || p.StampsWritten(ctx, kcp) {
		return kcp
	}
	out := kcp.DeepCopy()
	ann := map[string]string{}
	for k, v := range out.Annotations {
		if !strings.HasPrefix(k, revisions.Prefix) || k == revisions.AnnotationOverride {
			ann[k] = v
		}
	}
	out.Annotations = ann
	return out
}

func (p Policy) facts() factReader {
	return factReader{reader: p.Reader, mapper: p.Mapper, indexed: p.Indexed, listed: p.ControlPlaneKinds}
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
// Cluster's control plane: the one code path of every worker pool kind.
func (p Policy) DecideWorkerPool(ctx context.Context, pool kinds.PoolChange) (skew.Decision, []string, error) {
	if pool.HasOld && pool.OldVersion == pool.NewVersion || pool.NewVersion == "" {
		return skew.Decision{}, nil, nil
	}
	change := skew.WorkerChange{
		Kind:         pool.Kind,
		Name:         pool.Name,
		VersionField: workerVersionField,
		NewVersion:   skew.ReadVersion(pool.NewVersion),
	}
	if pool.HasOld {
		change.OldVersion = skew.ReadVersion(pool.OldVersion)
	}
	cp, reason, err := p.facts().controlPlaneOf(ctx, pool.Namespace, pool.ClusterName)
	if err != nil {
		return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not read the control plane of %s %s/%s: %w", pool.Kind, pool.Namespace, pool.Name, err)
	}
	if cp == nil {
		// Without a control plane there is nothing to judge the skew against:
		// refuse only what is wrong on its own, and say why the rest was not checked.
		return versionOnly(pool.Kind+" "+pool.Name, workerVersionField, change.NewVersion),
			[]string{fmt.Sprintf("rollout-guard: version skew of %s %s/%s not checked: %s", pool.Kind, pool.Namespace, pool.Name, reason)}, nil
	}
	change.ControlPlane = cp
	return skew.EvaluateWorker(change), nil, nil
}

// DecideKubeadmControlPlane judges a KubeadmControlPlane's change (oldKCP
// nil on create): its version against what it has run and its workers, its
// etcd against what etcd has run.
func (p Policy) DecideKubeadmControlPlane(ctx context.Context, oldKCP, newKCP *controlplanev1.KubeadmControlPlane) (skew.Decision, []string, error) {
	if oldKCP != nil && oldKCP.Spec.Version == newKCP.Spec.Version && etcdImageTag(oldKCP) == etcdImageTag(newKCP) {
		return skew.Decision{}, nil, nil
	}
	change := skew.ControlPlaneChange{
		Kind:            "KubeadmControlPlane",
		Name:            newKCP.Name,
		VersionField:    "spec.version",
		EtcdField:       etcdImageTagField,
		NewVersion:      skew.ReadVersion(newKCP.Spec.Version),
		NewEtcdImageTag: skew.ReadEtcdVersion(etcdImageTag(newKCP)),
	}
	var old *kcpRead
	if oldKCP != nil {
		old = readKCP(oldKCP)
		change.OldVersion, change.OldEtcdImageTag, change.RunningVersions = old.version, old.etcdTag, old.running
		change.History = old.run().history
	}
	clusterName := clusterNameOf(newKCP)
	if clusterName == "" && oldKCP == nil {
		// A new control plane carries neither label nor owner yet: its
		// Cluster is the one that names it as its control plane.
		var err error
		if clusterName, err = p.facts().clusterNaming(ctx, newKCP.Namespace, "KubeadmControlPlane", controlplanev1.GroupVersion.Group, newKCP.Name); err != nil {
			return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not find the Cluster of KubeadmControlPlane %s/%s: %w", newKCP.Namespace, newKCP.Name, err)
		}
	}
	var warnings []string
	switch {
	case clusterName == "" && oldKCP == nil:
		// No Cluster yet, hence no workers to keep within skew: only the
		// version itself is judged.
	case clusterName == "":
		warnings = append(warnings, fmt.Sprintf("rollout-guard: KubeadmControlPlane %s/%s has no %s label or owning Cluster; worker skew not checked", newKCP.Namespace, newKCP.Name, clusterNameLabel))
	default:
		workers, err := p.facts().workersOf(ctx, newKCP.Namespace, clusterName, allWorkers)
		if err != nil {
			return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not read the workers of KubeadmControlPlane %s/%s: %w", newKCP.Namespace, newKCP.Name, err)
		}
		change.Workers = workers
	}
	d := skew.EvaluateControlPlane(change)
	if old != nil && refusesDowngrade(d) {
		// Going back: allowed if what is taken back never rolled out.
		bump := bumpOf(change.OldVersion, change.NewVersion)
		u, err := p.facts().unrolledKCPBump(ctx, old, nil, clusterName, bump)
		if err != nil {
			return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not read the control-plane Machines of KubeadmControlPlane %s/%s: %w", newKCP.Namespace, newKCP.Name, err)
		}
		if u != nil {
			change.PreviousUnrolled, change.History, change.RunningVersions = true, u.history, u.running
			d = skew.EvaluateControlPlane(change)
		}
	}
	return d, warnings, nil
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
			kcp = readKCP(p.withoutForgedStamps(ctx, got))
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
		u, err = p.facts().unrolledKCPBump(ctx, kcp, cluster, cluster.Name, bump)
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
