// Package revisions defines what one revision of a rollout is made of for a
// Cluster API MachineDeployment, MachinePool, KubeadmControlPlane, a
// control plane of another provider read through Cluster API's
// control-plane contract, a ClusterClass and a Cluster's topology, and how the guard records it in
// RolloutRevisions (package api/v1alpha1) so that `rollout history` and `rollout undo` work
// whoever made the change.
//
// A revision has two parts:
//
//   - a Snapshot: the content a rollout is made of, in a canonical JSON form
//     with its SHA-256 digest, which alone decides that two contents are
//     one (names of records carry its short form, ShortHash) (MachineDeployment and MachinePool: spec.template;
//     KubeadmControlPlane: spec.version, spec.machineTemplate and
//     spec.kubeadmConfigSpec; a contract control plane: spec.version and
//     spec.machineTemplate; a ClusterClass: its spec; a Cluster: its
//     spec.topology). Replicas, the rollout strategy, rollout.after,
//     pausing, status, object metadata and the project's own rollout-guard.io/
//     annotations are not part of it;
//   - a Record: who made that content live, when, through which field
//     manager, why (the change-cause), how (a rollout or an in-place change),
//     the restarts asked while it was live and any break-glass override used.
//
// The mutating webhook stamps a Record on every change of such an object
// that alters its Snapshot (Record.Annotations), stamps a restart with the
// rollout.after change it is (AnnotationRestart, RestartStamp), and records
// the revision being replaced as a RolloutRevision owned by the object
// (RolloutRevision, Merge); the CLI reads them back
// (FromRolloutRevision, Sort), shows what changed (Diff, ChangeCause,
// IsInPlace) and undoes a change (RollbackPatch). A control plane's recorded
// revisions also tell the policy in package skew the highest Kubernetes and
// etcd versions it has run (HighestOf, HighestRun.History).
//
// The package is pure: no client, no I/O. The webhook and the CLI make the API
// calls.
package revisions
