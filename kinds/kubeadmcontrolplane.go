package kinds

import (
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

var kubeadmControlPlaneGVK = controlplanev1.GroupVersion.WithKind("KubeadmControlPlane")

// KubeadmControlPlane is the kind of KubeadmControlPlanes: its revisions
// are spec.version, spec.machineTemplate and spec.kubeadmConfigSpec, its
// restarts spec.rollout.after. Decoded lean and cached, it keeps
// status.version and status.versions (the versions its machines run, which
// the policy reads) and what says it ever had a Machine (initialization,
// replicas, the last remediation); the cache drops its kubeadmConfigSpec but the etcd
// image tag (the version etcd runs): files, commands and kubeadm's
// configurations, most of a control plane's size, are read by no policy
// rule, and the history reconciler reads them from the API server when
// they are not recorded yet. Of its labels and owner references the cache
// keeps what trimClusterMeta keeps.
var KubeadmControlPlane = Kind{
	GVK:         kubeadmControlPlaneGVK,
	New:         func() client.Object { return &controlplanev1.KubeadmControlPlane{} },
	Snapshot:    snapshotAs("KubeadmControlPlane", revisions.ForKubeadmControlPlane),
	Fingerprint: fingerprintAs("KubeadmControlPlane", revisions.FingerprintKubeadmControlPlane),
	RolloutAfter: readAs(func(kcp *controlplanev1.KubeadmControlPlane) string {
		return rolloutAfter(kcp.Spec.Rollout.After.Time)
	}),
	ClusterName: func(o client.Object) string { return clusterName(o, "") },
	DecodeLean: decodeLeanAs(kubeadmControlPlaneGVK, func(l leanObject[controlplanev1.KubeadmControlPlaneSpec, kcpRunStatus], kcp *controlplanev1.KubeadmControlPlane) {
		*kcp = controlplanev1.KubeadmControlPlane{TypeMeta: l.TypeMeta, ObjectMeta: l.Metadata.ObjectMeta, Spec: l.Spec}
		kcp.Status.Version = l.Status.Version //nolint:staticcheck // read by the policy on older controllers
		kcp.Status.Versions = l.Status.Versions
		kcp.Status.Initialization, kcp.Status.Replicas, kcp.Status.LastRemediation = l.Status.Initialization, l.Status.Replicas, l.Status.LastRemediation
	}),
	Decide: decideAs("KubeadmControlPlane", Judge.DecideKubeadmControlPlane),
	Trim: trimAs(func(kcp *controlplanev1.KubeadmControlPlane) {
		etcdImageTag := kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag
		kcp.Spec.KubeadmConfigSpec = bootstrapv1.KubeadmConfigSpec{}
		kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = etcdImageTag
		kcp.Status = controlplanev1.KubeadmControlPlaneStatus{
			Version:         kcp.Status.Version, //nolint:staticcheck // read by the policy on older controllers
			Versions:        kcp.Status.Versions,
			Initialization:  kcp.Status.Initialization,
			Replicas:        kcp.Status.Replicas,
			LastRemediation: kcp.Status.LastRemediation,
		}
		trimClusterMeta(kcp, func(o client.Object) string { return clusterName(o, "") })
	}),
}

// kcpRunStatus is what the policy reads of a KubeadmControlPlane's status:
// the versions its machines run, and whether it ever had a Machine
// (initialized, replicas, a remediation).
type kcpRunStatus struct {
	Version         string                                                 `json:"version,omitempty"`
	Versions        []clusterv1.StatusVersion                              `json:"versions,omitempty"`
	Initialization  controlplanev1.KubeadmControlPlaneInitializationStatus `json:"initialization,omitempty"`
	Replicas        *int32                                                 `json:"replicas,omitempty"`
	LastRemediation controlplanev1.LastRemediationStatus                   `json:"lastRemediation,omitempty"`
}
