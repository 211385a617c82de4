package policy

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// ControlPlaneKindsFlag is the guard's flag that lists the control-plane
// kinds of other providers it polices, as KIND.GROUP.
const ControlPlaneKindsFlag = "--control-plane-kinds"

// ParseControlPlaneKinds reads the value of ControlPlaneKindsFlag: a
// comma-separated list of KIND.GROUP, e.g.
// "KthreesControlPlane.controlplane.cluster.x-k8s.io". KubeadmControlPlane
// is refused: the guard always polices it, with its etcd rules.
func ParseControlPlaneKinds(value string) ([]schema.GroupKind, error) {
	var out []schema.GroupKind
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		gk := schema.ParseGroupKind(item)
		if gk.Kind == "" || gk.Group == "" {
			return nil, fmt.Errorf("%s: %q is not KIND.GROUP; write e.g. KthreesControlPlane.controlplane.cluster.x-k8s.io", ControlPlaneKindsFlag, item)
		}
		if gk == kubeadmControlPlaneKind {
			return nil, fmt.Errorf("%s: %s is always policed (with its etcd rules); list only other providers' control planes", ControlPlaneKindsFlag, item)
		}
		out = append(out, gk)
	}
	return out, nil
}

// kubeadmControlPlaneKind is KubeadmControlPlane's group and kind.
var kubeadmControlPlaneKind = controlplanev1.GroupVersion.WithKind("KubeadmControlPlane").GroupKind()

// contractVersionField is where the contract keeps a control plane's version.
const contractVersionField = "spec.version"

// contractRunningVersions reads the versions a control plane's machines
// run, from the contract's status.versions (preferred) and status.version.
func contractRunningVersions(u *unstructured.Unstructured) []skew.Version {
	if u == nil {
		return nil
	}
	var out []skew.Version
	versions, _, _ := unstructured.NestedSlice(u.Object, "status", "versions")
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok {
			if s, ok := m["version"].(string); ok {
				out = readOnce(out, s)
			}
		}
	}
	s, _, _ := unstructured.NestedString(u.Object, "status", "version")
	return readOnce(out, s)
}

// contractVersion is a control plane's spec.version, "" when unset.
func contractVersion(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	v, _, _ := unstructured.NestedString(u.Object, "spec", "version")
	return v
}

// HighestRunOfContract is HighestRunOf for a control plane read through the
// contract: its stamp raised by its own spec.version. nil gives the zero
// value.
func HighestRunOfContract(u *unstructured.Unstructured) revisions.HighestRun {
	if u == nil {
		return revisions.HighestRun{}
	}
	return stampedHighest(u).Raise(contractRun(u), revisions.StampsOf(u).Revision)
}

// contractRun returns what a control plane read through the contract runs,
// as its revision's content says; nothing when that cannot be read.
func contractRun(u *unstructured.Unstructured) revisions.Run {
	snap, err := revisions.ForContractControlPlane(u)
	if err != nil {
		return revisions.Run{}
	}
	run, _ := revisions.RunOf(snap)
	return run
}

// DecideContractControlPlane judges a change of a control plane of another
// provider, read through Cluster API's contract: the rules of every
// Kubernetes control plane (no minor downgrade below what it has run, one
// minor at a time, workers kept within skew), not the etcd rules, which need
// kubeadm's etcd.
func (p Policy) DecideContractControlPlane(ctx context.Context, oldCP, newCP *unstructured.Unstructured) (skew.Decision, []string, error) {
	kind := newCP.GetKind()
	id := fmt.Sprintf("%s %s/%s", kind, newCP.GetNamespace(), newCP.GetName())
	newVersion := contractVersion(newCP)
	if newVersion == "" {
		// The contract makes spec.version optional: a provider that
		// manages the version itself has nothing to judge here.
		return skew.Decision{}, nil, nil
	}
	if oldCP != nil && contractVersion(oldCP) == newVersion {
		return skew.Decision{}, nil, nil
	}
	change := skew.ControlPlaneChange{
		Kind:         kind,
		Name:         newCP.GetName(),
		VersionField: contractVersionField,
		NoEtcd:       true,
		NewVersion:   skew.ReadVersion(newVersion),
	}
	if oldCP != nil {
		change.OldVersion = skew.ReadVersion(contractVersion(oldCP))
		change.RunningVersions = contractRunningVersions(oldCP)
		change.History = stampedHighest(oldCP).HistoryWith(contractRun(oldCP), revisions.StampsOf(oldCP).Revision)
	}
	var oldObj client.Object
	if oldCP != nil {
		oldObj = oldCP
	}
	clusters, err := p.facts().controlPlaneClusters(ctx, oldObj, newCP, newCP.GroupVersionKind().Group, kind)
	if err != nil {
		return skew.Decision{}, nil, fmt.Errorf("rollout-guard could not find the Cluster of %s: %w", id, err)
	}
	warnings, err := p.judgeAgainstClusters(ctx, &change, id, newCP.GetNamespace(), clusters, oldCP == nil)
	if err != nil {
		return skew.Decision{}, nil, err
	}
	d := skew.EvaluateControlPlane(change)
	if !refusesDowngrade(d) {
		return d, warnings, nil
	}
	if before, ok := unrolledContractBump(oldCP, change.OldVersion, change.NewVersion, change.RunningVersions); ok {
		// Going back from a bump no machine reports running: judged
		// against what ran before it.
		change.PreviousUnrolled, change.History = true, before.History()
		d = skew.EvaluateControlPlane(change)
	}
	return d, warnings, nil
}

// unrolledContractBump reports whether a change of oldCP, which runs running,
// from oldVersion to newVersion takes back a version bump of oldCP's latest
// revision that never rolled out: its stamp knows what ran before the bump,
// and the control plane's status reports no machine at the bump's minor or
// above (the contract gives no Machines to look at). It returns what ran
// before the bump.
func unrolledContractBump(oldCP *unstructured.Unstructured, oldVersion, newVersion skew.Version, running []skew.Version) (revisions.HighestRun, bool) {
	if oldCP == nil {
		return revisions.HighestRun{}, false
	}
	bump := bumpOf(oldVersion, newVersion)
	if bump.Text() == "" {
		return revisions.HighestRun{}, false
	}
	before, known := stampedHighest(oldCP).BeforeOf(revisions.StampsOf(oldCP).Revision)
	if !known {
		return revisions.HighestRun{}, false
	}
	if len(running) == 0 {
		// Nothing reported: whether the bump rolled out is not known.
		return revisions.HighestRun{}, false
	}
	for _, v := range running {
		if !v.Valid() || !skew.MinorOf(v.Semver()).Less(skew.MinorOf(bump.Semver())) {
			return revisions.HighestRun{}, false
		}
	}
	return before, true
}

// RevertedRunOfContract is RevertedRun for a control plane read through the
// contract: what it ran before the bump the change takes back, nil for any
// other change.
func RevertedRunOfContract(oldCP, newCP *unstructured.Unstructured) *revisions.HighestRun {
	if oldCP == nil || newCP == nil {
		return nil
	}
	oldVersion, newVersion := skew.ReadVersion(contractVersion(oldCP)), skew.ReadVersion(contractVersion(newCP))
	if before, ok := unrolledContractBump(oldCP, oldVersion, newVersion, contractRunningVersions(oldCP)); ok {
		return &before
	}
	return nil
}
