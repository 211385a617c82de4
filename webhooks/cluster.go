package webhooks

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/skew"
)

// SkipTopologyVersionCheckAnnotation is Cluster API's bypass of its own
// topology version checks. The guard's rules still apply with it set.
const SkipTopologyVersionCheckAnnotation = "unsafe.topology.cluster.x-k8s.io/disable-update-version-check"

// ClusterValidator refuses Cluster topology version changes that would
// downgrade the control plane or its etcd, skip a minor, or leave a worker
// outside the kubelet skew: the topology controller would carry them out.
type ClusterValidator struct {
	facts factReader
}

var _ admission.Validator[*clusterv1.Cluster] = &ClusterValidator{}

// ValidateCreate allows every creation.
func (v *ClusterValidator) ValidateCreate(context.Context, *clusterv1.Cluster) (admission.Warnings, error) {
	return nil, nil
}

// ValidateUpdate judges a change of spec.topology.version.
func (v *ClusterValidator) ValidateUpdate(ctx context.Context, oldCluster, newCluster *clusterv1.Cluster) (admission.Warnings, error) {
	oldVersion, newVersion := oldCluster.Spec.Topology.Version, newCluster.Spec.Topology.Version
	if oldVersion == newVersion || newVersion == "" {
		return nil, nil
	}
	change := skew.ControlPlaneChange{
		Kind:         "Cluster",
		Name:         newCluster.Name,
		VersionField: "spec.topology.version",
		EtcdField:    "KubeadmControlPlane " + etcdImageTagField,
		OldVersion:   oldVersion,
		NewVersion:   newVersion,
	}
	var warnings []string
	if _, bypass := newCluster.Annotations[SkipTopologyVersionCheckAnnotation]; bypass {
		warnings = append(warnings, fmt.Sprintf("rollout-guard: annotation %s skips Cluster API's checks only; rollout-guard's rules still apply", SkipTopologyVersionCheckAnnotation))
	}

	// The etcd the control plane pins and the versions it runs live on its
	// KubeadmControlPlane; the topology controller keeps the pinned tag.
	if ref := newCluster.Spec.ControlPlaneRef; ref.Kind == "KubeadmControlPlane" && ref.APIGroup == controlplanev1.GroupVersion.Group {
		kcp := &controlplanev1.KubeadmControlPlane{}
		err := v.facts.reader.Get(ctx, types.NamespacedName{Namespace: newCluster.Namespace, Name: ref.Name}, kcp)
		switch {
		case err == nil:
			change.OldEtcdImageTag = etcdImageTag(kcp)
			change.NewEtcdImageTag = change.OldEtcdImageTag
			change.RunningVersions = kcpRunningVersions(kcp)
		case apierrors.IsNotFound(err):
			warnings = append(warnings, fmt.Sprintf("rollout-guard: KubeadmControlPlane %s/%s of Cluster %s not found; judged on spec.topology.version alone", newCluster.Namespace, ref.Name, newCluster.Name))
		default:
			return nil, fmt.Errorf("rollout-guard could not read KubeadmControlPlane %s/%s: %w", newCluster.Namespace, ref.Name, err)
		}
	}

	workers, err := v.facts.workersOf(ctx, newCluster.Namespace, newCluster.Name)
	if err != nil {
		return nil, fmt.Errorf("rollout-guard could not read the workers of Cluster %s/%s: %w", newCluster.Namespace, newCluster.Name, err)
	}
	change.Workers = workers
	gk := clusterv1.GroupVersion.WithKind("Cluster").GroupKind()
	return toAdmission(gk, newCluster.Name, skew.EvaluateControlPlane(change), warnings...)
}

// ValidateDelete allows every deletion.
func (v *ClusterValidator) ValidateDelete(context.Context, *clusterv1.Cluster) (admission.Warnings, error) {
	return nil, nil
}
