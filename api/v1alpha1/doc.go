// Package v1alpha1 is the API rollout-guard stores in the management
// cluster, group rollout-guard.io: RolloutRevision, one recorded revision of
// a MachineDeployment, MachinePool or control plane.
//
// Why a kind of the project's own rather than apps/v1 ControllerRevisions:
// `clusterctl move` and its directory backups carry the objects of CRDs
// labelled for clusterctl that a Cluster owns, directly or through its
// objects, and never ControllerRevisions. A RolloutRevision is owned by the
// object whose revision it records, and its CRD carries clusterctl's label,
// so history moves with its objects. Writing it is a right of its own, which
// the guard holds and namespace editors do not.
//
// Its DeepCopy methods and its CRD (config/crd) are generated (make
// generate).
//
// +kubebuilder:object:generate=true
// +groupName=rollout-guard.io
package v1alpha1
