package webhooks

import (
	"context"
	"fmt"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/skew"
)

// KubeadmControlPlaneValidator refuses KubeadmControlPlane changes that
// downgrade Kubernetes or etcd, skip a minor, or leave a worker outside the
// kubelet skew.
type KubeadmControlPlaneValidator struct {
	facts factReader
}

var _ admission.Validator[*controlplanev1.KubeadmControlPlane] = &KubeadmControlPlaneValidator{}

// ValidateCreate allows every creation: a new control plane has nothing to
// downgrade, and its workers are judged when they are created.
func (v *KubeadmControlPlaneValidator) ValidateCreate(context.Context, *controlplanev1.KubeadmControlPlane) (admission.Warnings, error) {
	return nil, nil
}

// ValidateUpdate judges a change of version or etcd image tag.
func (v *KubeadmControlPlaneValidator) ValidateUpdate(ctx context.Context, oldKCP, newKCP *controlplanev1.KubeadmControlPlane) (admission.Warnings, error) {
	change := skew.ControlPlaneChange{
		Kind:            "KubeadmControlPlane",
		Name:            newKCP.Name,
		VersionField:    "spec.version",
		EtcdField:       etcdImageTagField,
		OldVersion:      oldKCP.Spec.Version,
		NewVersion:      newKCP.Spec.Version,
		OldEtcdImageTag: etcdImageTag(oldKCP),
		NewEtcdImageTag: etcdImageTag(newKCP),
		RunningVersions: kcpRunningVersions(oldKCP),
	}
	if change.OldVersion == change.NewVersion && change.OldEtcdImageTag == change.NewEtcdImageTag {
		return nil, nil
	}
	var warnings []string
	if clusterName := clusterNameOf(newKCP); clusterName == "" {
		warnings = append(warnings, fmt.Sprintf("rollout-guard: KubeadmControlPlane %s/%s has no %s label or owning Cluster; worker skew not checked", newKCP.Namespace, newKCP.Name, clusterNameLabel))
	} else {
		workers, err := v.facts.workersOf(ctx, newKCP.Namespace, clusterName)
		if err != nil {
			return nil, fmt.Errorf("rollout-guard could not read the workers of KubeadmControlPlane %s/%s: %w", newKCP.Namespace, newKCP.Name, err)
		}
		change.Workers = workers
	}
	gk := controlplanev1.GroupVersion.WithKind("KubeadmControlPlane").GroupKind()
	return toAdmission(gk, newKCP.Name, skew.EvaluateControlPlane(change), warnings...)
}

// ValidateDelete allows every deletion.
func (v *KubeadmControlPlaneValidator) ValidateDelete(context.Context, *controlplanev1.KubeadmControlPlane) (admission.Warnings, error) {
	return nil, nil
}

// etcdImageTag is the etcd version a KubeadmControlPlane pins, "" when kubeadm's default applies.
func etcdImageTag(kcp *controlplanev1.KubeadmControlPlane) string {
	if kcp == nil {
		return ""
	}
	return kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag
}
