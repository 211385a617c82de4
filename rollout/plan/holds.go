package plan

import (
	"fmt"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/skew"
)

// holdFacts are what the holds of one object's change are decided from.
type holdFacts struct {
	// cluster is the object's Cluster, nil when unknown.
	cluster *clusterv1.Cluster
	// controlPlane is the Cluster's KubeadmControlPlane as it is now, nil
	// when unknown or not a KubeadmControlPlane.
	controlPlane *controlplanev1.KubeadmControlPlane
	// cpMachines are the control plane's machines (for its own checks).
	cpMachines []clusterv1.Machine
	// bootstrapSkip is the skip-preflight-checks annotation of a
	// MachineDeployment's bootstrap config template (Cluster API's
	// fallback when the MachineSet has none).
	bootstrapSkip string
	// cli names the command in ways out ("rollout").
	cli string
}

// clusterHolds are the holds of any change of a cluster's objects: the
// Cluster paused.
func clusterHolds(f holdFacts) []v1alpha1.PlanHold {
	if f.cluster == nil {
		return nil
	}
	if how := core.PausedBy(f.cluster); how != "" {
		return []v1alpha1.PlanHold{{Kind: v1alpha1.HoldPaused, Check: pausedCheck(how), Object: core.Cluster.Singular() + "/" + f.cluster.Name,
			Message: fmt.Sprintf("Cluster %s is paused (%s): Cluster API reconciles none of its objects until it is resumed; the change is stored and rolls out then", f.cluster.Name, how)}}
	}
	return nil
}

// pausedCheck names how an object is paused, for PlanHold.Check.
func pausedCheck(how string) string {
	if strings.HasPrefix(how, "annotation ") {
		return strings.TrimPrefix(how, "annotation ")
	}
	return "spec.paused"
}

// objectPausedHold is the hold of a paused MachineDeployment or
// KubeadmControlPlane.
func objectPausedHold(obj interface {
	GetName() string
	GetAnnotations() map[string]string
}, kind core.Kind, how, cli string) v1alpha1.PlanHold {
	return v1alpha1.PlanHold{Kind: v1alpha1.HoldPaused, Check: pausedCheck(how), Object: kind.Singular() + "/" + obj.GetName(),
		Message: fmt.Sprintf("%s %s is paused (%s): the change is stored and rolls out when it is resumed: %s resume %s/%s", kind.GVK.Kind, obj.GetName(), how, cli, kind.Singular(), obj.GetName())}
}

// machineDeploymentHolds are what would hold the rollout of newMD (as
// planned) once admitted: it or its Cluster paused, the OnDelete strategy,
// and, when it creates machines, Cluster API's MachineSet preflight checks
// against the control plane as it is now (Cluster API v1.14
// core/reconcilers/machineset machineset_preflight.go), honouring the
// skip-preflight-checks annotation.
func machineDeploymentHolds(newMD *clusterv1.MachineDeployment, createsMachines bool, f holdFacts) []v1alpha1.PlanHold {
	holds := clusterHolds(f)
	object := core.MachineDeployment.Singular() + "/" + newMD.Name
	if how := core.PausedBy(newMD); how != "" {
		holds = append(holds, objectPausedHold(newMD, core.MachineDeployment, how, f.cli))
	}
	if !createsMachines {
		return holds
	}
	if newMD.Spec.Rollout.Strategy.Type == clusterv1.OnDeleteMachineDeploymentStrategyType {
		holds = append(holds, v1alpha1.PlanHold{Kind: v1alpha1.HoldOnDelete, Check: "spec.rollout.strategy.type", Object: object,
			Message: fmt.Sprintf("MachineDeployment %s rolls out OnDelete: each old machine is replaced only when you delete it (kubectl delete machine NAME)", newMD.Name)})
	}
	return append(holds, preflightHolds(newMD, f)...)
}

// preflightHolds are the MachineSet preflight checks that would fail for
// the MachineSet of newMD's template.
func preflightHolds(newMD *clusterv1.MachineDeployment, f holdFacts) []v1alpha1.PlanHold {
	if f.controlPlane == nil || f.controlPlane.Spec.Version == "" {
		return nil // Cluster API checks nothing without a control-plane version.
	}
	skip := newMD.Annotations[clusterv1.MachineSetSkipPreflightChecksAnnotation]
	if skip == "" {
		skip = f.bootstrapSkip
	}
	skipped := map[string]bool{}
	for _, s := range strings.Split(skip, ",") {
		skipped[strings.TrimSpace(s)] = true
	}
	if skipped[string(clusterv1.MachineSetPreflightCheckAll)] {
		return nil
	}
	cp := f.controlPlane
	cpRef := core.KubeadmControlPlane.Singular() + "/" + cp.Name
	object := core.MachineDeployment.Singular() + "/" + newMD.Name
	var holds []v1alpha1.PlanHold
	add := func(check clusterv1.MachineSetPreflightCheck, msg string) {
		if skipped[string(check)] {
			return
		}
		holds = append(holds, v1alpha1.PlanHold{Kind: v1alpha1.HoldPreflightCheck, Check: string(check), Object: cpRef,
			Message: fmt.Sprintf("%s; to skip it, annotate MachineDeployment %s with %s=%s (rollout-guard lets only a member of an override group set it, with %s and the reason)",
				msg, newMD.Name, clusterv1.MachineSetSkipPreflightChecksAnnotation, check, revisions.AnnotationOverride)})
	}

	// ControlPlaneIsStable.
	topology := f.cluster != nil && f.cluster.Spec.Topology.IsDefined()
	if topology {
		step := f.cluster.Annotations[clusterv1.ClusterTopologyUpgradeStepAnnotation]
		if f.cluster.Spec.Topology.Version != cp.Spec.Version && (step == "" || step != cp.Spec.Version) {
			v := f.cluster.Spec.Topology.Version
			if step != "" {
				v = step
			}
			add(clusterv1.MachineSetPreflightCheckControlPlaneIsStable, fmt.Sprintf("new machines of %s wait: KubeadmControlPlane %s has a pending version upgrade to %s (Cluster API's %s preflight check)", object, cp.Name, v, clusterv1.MachineSetPreflightCheckControlPlaneIsStable))
		}
	}
	switch {
	case controlPlaneProvisioning(cp):
		add(clusterv1.MachineSetPreflightCheckControlPlaneIsStable, fmt.Sprintf("new machines of %s wait: KubeadmControlPlane %s is provisioning (Cluster API's %s preflight check)", object, cp.Name, clusterv1.MachineSetPreflightCheckControlPlaneIsStable))
	case controlPlaneUpgrading(cp):
		add(clusterv1.MachineSetPreflightCheckControlPlaneIsStable, fmt.Sprintf("new machines of %s wait until KubeadmControlPlane %s has finished upgrading to %s, its machines run %s (Cluster API's %s preflight check)",
			object, cp.Name, cp.Spec.Version, statusVersionsText(cp.Status.Versions), clusterv1.MachineSetPreflightCheckControlPlaneIsStable))
	}

	mdVersion := newMD.Spec.Template.Spec.Version
	if mdVersion == "" {
		return holds
	}
	msV, err1 := skew.ParseVersion(mdVersion)
	cpV, err2 := skew.ParseVersion(cp.Spec.Version)
	if err1 != nil || err2 != nil {
		return holds
	}
	// KubernetesVersionSkew.
	switch {
	case msV.Minor > cpV.Minor:
		add(clusterv1.MachineSetPreflightCheckKubernetesVersionSkew, fmt.Sprintf("new machines of %s at %s would be newer than KubeadmControlPlane %s at %s: none is created until the control plane is at v%d.%d or newer (Cluster API's %s preflight check)",
			object, mdVersion, cp.Name, cp.Spec.Version, msV.Major, msV.Minor, clusterv1.MachineSetPreflightCheckKubernetesVersionSkew))
	case cpV.Minor >= 3 && msV.Minor < cpV.Minor-3:
		add(clusterv1.MachineSetPreflightCheckKubernetesVersionSkew, fmt.Sprintf("new machines of %s at %s would be more than 3 minors older than KubeadmControlPlane %s at %s: none is created (Cluster API's %s preflight check)",
			object, mdVersion, cp.Name, cp.Spec.Version, clusterv1.MachineSetPreflightCheckKubernetesVersionSkew))
	}
	// KubeadmVersionSkew.
	ref := newMD.Spec.Template.Spec.Bootstrap.ConfigRef
	if ref.IsDefined() && ref.Kind == "KubeadmConfigTemplate" && ref.APIGroup == bootstrapv1.GroupVersion.Group && msV.Minor != cpV.Minor {
		add(clusterv1.MachineSetPreflightCheckKubeadmVersionSkew, fmt.Sprintf("new machines of %s at %s would join KubeadmControlPlane %s at %s with kubeadm, which joins only machines of the control plane's minor: none is created until %s is at v%d.%d (Cluster API's %s preflight check)",
			object, mdVersion, cp.Name, cp.Spec.Version, object, cpV.Major, cpV.Minor, clusterv1.MachineSetPreflightCheckKubeadmVersionSkew))
	}
	// ControlPlaneVersionSkew.
	if topology && mdVersion != cp.Spec.Version {
		add(clusterv1.MachineSetPreflightCheckControlPlaneVersionSkew, fmt.Sprintf("new machines of %s at %s wait until the topology controller gives it the control plane's version %s (Cluster API's %s preflight check)",
			object, mdVersion, cp.Spec.Version, clusterv1.MachineSetPreflightCheckControlPlaneVersionSkew))
	}
	return holds
}

// controlPlaneProvisioning is Cluster API's ControlPlane contract
// IsProvisioning: no version in the status yet.
func controlPlaneProvisioning(cp *controlplanev1.KubeadmControlPlane) bool {
	return len(cp.Status.Versions) == 0 && cp.Status.Version == ""
}

// controlPlaneUpgrading is Cluster API's ControlPlane contract IsUpgrading:
// a version in status.versions (or status.version) older than spec.version.
func controlPlaneUpgrading(cp *controlplanev1.KubeadmControlPlane) bool {
	spec, err := skew.ParseVersion(cp.Spec.Version)
	if err != nil {
		return false
	}
	older := func(s string) bool {
		v, err := skew.ParseVersion(s)
		return err == nil && spec.GT(v)
	}
	if len(cp.Status.Versions) > 0 {
		for _, sv := range cp.Status.Versions {
			if older(sv.Version) {
				return true
			}
		}
		return false
	}
	return cp.Status.Version != "" && older(cp.Status.Version)
}

// statusVersionsText is "v1.33.5 (1), v1.34.3 (2)".
func statusVersionsText(vs []clusterv1.StatusVersion) string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		parts = append(parts, fmt.Sprintf("%s (%d)", v.Version, v.Replicas))
	}
	if len(parts) == 0 {
		return "<unknown>"
	}
	return strings.Join(parts, ", ")
}

// controlPlaneHolds are what would hold the rollout of a
// KubeadmControlPlane once admitted: it or its Cluster paused, a rollout
// still running, and its own checks before it adds or removes a machine
// (Cluster API v1.14 controlplane/kubeadm preflight.go): machines being
// deleted, control-plane components or etcd members not healthy, a topology
// version not yet passed on.
func controlPlaneHolds(kcp *controlplanev1.KubeadmControlPlane, createsMachines bool, f holdFacts) []v1alpha1.PlanHold {
	holds := clusterHolds(f)
	object := core.KubeadmControlPlane.Singular() + "/" + kcp.Name
	if how := core.PausedBy(kcp); how != "" {
		holds = append(holds, objectPausedHold(kcp, core.KubeadmControlPlane, how, f.cli))
	}
	if !createsMachines {
		return holds
	}
	if cp := f.controlPlane; cp != nil {
		if controlPlaneUpgrading(cp) {
			holds = append(holds, v1alpha1.PlanHold{Kind: v1alpha1.HoldUpgradeInProgress, Check: "status.versions", Object: object,
				Message: fmt.Sprintf("KubeadmControlPlane %s is still rolling out %s (its machines run %s): the change replaces that rollout's machines too; watch it with %s status %s", cp.Name, cp.Spec.Version, statusVersionsText(cp.Status.Versions), f.cli, object)})
		}
		for _, c := range []string{controlplanev1.KubeadmControlPlaneControlPlaneComponentsHealthyCondition, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition} {
			if cond := apimeta.FindStatusCondition(cp.Status.Conditions, c); cond != nil && cond.Status == metav1.ConditionFalse {
				holds = append(holds, v1alpha1.PlanHold{Kind: v1alpha1.HoldControlPlaneChecks, Check: c, Object: object,
					Message: fmt.Sprintf("KubeadmControlPlane %s adds and removes machines only while its condition %s is True; it is False (%s)", cp.Name, c, strings.TrimSuffix(cond.Reason+": "+core.ConditionLine(cond.Message), ": "))})
			}
		}
	}
	var deleting []string
	for _, m := range f.cpMachines {
		if !m.DeletionTimestamp.IsZero() {
			deleting = append(deleting, m.Name)
		}
	}
	if len(deleting) > 0 {
		holds = append(holds, v1alpha1.PlanHold{Kind: v1alpha1.HoldControlPlaneChecks, Check: "HasDeletingMachine", Object: object,
			Message: fmt.Sprintf("KubeadmControlPlane %s waits until %s %s deleted", kcp.Name, strings.Join(deleting, ", "), core.Plural(len(deleting), "is", "are"))})
	}
	return holds
}

// topologyUpgradeHolds are what would hold a topology upgrade of cluster
// once admitted: the Cluster paused, an upgrade still in progress, and the
// defer-upgrade and hold-upgrade-sequence annotations of its worker pools.
func topologyUpgradeHolds(cluster *clusterv1.Cluster, f holdFacts) []v1alpha1.PlanHold {
	holds := clusterHolds(f)
	object := core.Cluster.Singular() + "/" + cluster.Name
	if st := cluster.Status.ControlPlane; st != nil && len(st.UpgradePlan) > 0 {
		var vs []string
		for _, v := range st.UpgradePlan {
			vs = append(vs, v.Version)
		}
		holds = append(holds, v1alpha1.PlanHold{Kind: v1alpha1.HoldUpgradeInProgress, Check: "status.controlPlane.upgradePlan", Object: object,
			Message: fmt.Sprintf("Cluster %s is still upgrading its control plane (steps left: %s); Cluster API refuses a new version until the upgrade is done: %s status %s", cluster.Name, strings.Join(vs, ", "), f.cli, object)})
	} else if cp := f.controlPlane; cp != nil && controlPlaneUpgrading(cp) {
		holds = append(holds, v1alpha1.PlanHold{Kind: v1alpha1.HoldUpgradeInProgress, Check: "status.versions", Object: core.KubeadmControlPlane.Singular() + "/" + cp.Name,
			Message: fmt.Sprintf("KubeadmControlPlane %s is still rolling out %s (its machines run %s); Cluster API refuses a new version until it is done: %s status %s", cp.Name, cp.Spec.Version, statusVersionsText(cp.Status.Versions), f.cli, object)})
	}
	for _, md := range cluster.Spec.Topology.Workers.MachineDeployments {
		for _, a := range []string{clusterv1.ClusterTopologyDeferUpgradeAnnotation, clusterv1.ClusterTopologyHoldUpgradeSequenceAnnotation} {
			if _, ok := md.Metadata.Annotations[a]; ok {
				holds = append(holds, v1alpha1.PlanHold{Kind: v1alpha1.HoldTopology, Check: a, Object: object,
					Message: fmt.Sprintf("worker pool %s (spec.topology.workers.machineDeployments[name=%s]) has annotation %s: the topology controller does not upgrade it (and, for %s, the pools after it) until it is removed", md.Name, md.Name, a, clusterv1.ClusterTopologyHoldUpgradeSequenceAnnotation)})
			}
		}
	}
	return holds
}

// topologyManagedHold is the hold of a direct edit (-f) of a
// topology-managed object: the topology controller reverts it.
func topologyManagedHold(obj interface{ GetName() string }, kind core.Kind, cluster string) v1alpha1.PlanHold {
	return v1alpha1.PlanHold{Kind: v1alpha1.HoldTopology, Check: clusterv1.ClusterTopologyOwnedLabel, Object: kind.Singular() + "/" + obj.GetName(),
		Message: fmt.Sprintf("%s %s is managed by the topology of Cluster %s: the topology controller reverts a direct change of its version, templates and rollout; change the Cluster (spec.topology) or its ClusterClass instead", kind.GVK.Kind, obj.GetName(), cluster)}
}
