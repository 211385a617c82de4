package v1alpha1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// HistoryAPIVersion is the apiVersion of what `rollout history -o json|yaml` prints.
const HistoryAPIVersion = "rollout.rollout-guard.io/v1alpha1"

// RolloutHistory is the history of one object as `rollout history -o
// json|yaml` prints it.
// +kubebuilder:object:root=true
type RolloutHistory struct {
	metav1.TypeMeta `json:",inline"`
	// Object is the MachineDeployment or KubeadmControlPlane.
	Object HistoryObject `json:"object"`
	// Recorded is false when rollout-guard recorded nothing for the object.
	Recorded bool `json:"recorded"`
	// LiveRevision is the number of the live revision, 0 when unknown.
	LiveRevision int64 `json:"liveRevision,omitempty"`
	// Revisions are the recorded revisions, oldest first.
	Revisions []HistoryRevision `json:"revisions,omitempty"`
	// MachineSets are, when nothing was recorded, what the cluster keeps of
	// a MachineDeployment's revisions.
	MachineSets []MachineSetRevision `json:"machineSets,omitempty"`
}

// HistoryObject names the object of a history.
type HistoryObject struct {
	// Kind is MachineDeployment or KubeadmControlPlane.
	Kind string `json:"kind"`
	// Namespace is the object's namespace.
	Namespace string `json:"namespace"`
	// Name is the object's name.
	Name string `json:"name"`
	// UID is the object's UID, which its RolloutRevisions carry.
	UID string `json:"uid"`
}

// HistoryRevision is one revision of a RolloutHistory.
type HistoryRevision struct {
	// Revision is the latest number the content was live under.
	Revision int64 `json:"revision"`
	// History is every number the content was live under.
	History []int64 `json:"history,omitempty"`
	// Live marks the live revision.
	Live bool `json:"live,omitempty"`
	// RolloutRevision is the name of the RolloutRevision that records the
	// revision, "" while the live revision is not yet recorded. Its key is
	// the one it had when history was kept in ControllerRevisions: the keys
	// of this version never change.
	RolloutRevision string `json:"controllerRevision,omitempty"`
	// Hash is the content's short hash, as the RolloutRevision's name and
	// hash label carry it (and as earlier releases printed it): it names
	// the revision, but two contents may share it — two revisions of one
	// short hash are recorded under two RolloutRevisions, two contents.
	Hash string `json:"hash"`
	// Version is the Kubernetes version.
	Version string `json:"version,omitempty"`
	// Infrastructure is the infrastructure machine template, "Kind/name".
	Infrastructure string `json:"infrastructure,omitempty"`
	// Bootstrap is a MachineDeployment's bootstrap config template,
	// "Kind/name", or "secret:<name>".
	Bootstrap string `json:"bootstrap,omitempty"`
	// EtcdImageTag is a KubeadmControlPlane's pinned etcd image tag.
	EtcdImageTag string `json:"etcdImageTag,omitempty"`
	// Class is a Cluster topology's ClusterClass ("name", or
	// "namespace/name").
	Class string `json:"class,omitempty"`
	// ChangedBy is the user whose request made the content live.
	ChangedBy string `json:"changedBy,omitempty"`
	// AuthorUnknown is set when nothing records who made the content live
	// (ChangedBy is empty), and says why: AuthorUnadmitted or
	// AuthorPredatesGuard (AuthorNotRecorded otherwise). `rollout undo` to
	// such a revision needs --force.
	AuthorUnknown string `json:"authorUnknown,omitempty"`
	// ChangedAt is when, RFC 3339.
	ChangedAt string `json:"changedAt,omitempty"`
	// FieldManager is the request's field manager.
	FieldManager string `json:"fieldManager,omitempty"`
	// GitOps is the GitOps controller that made the revision ("Argo CD",
	// "Flux"), known by its field manager or service account.
	GitOps string `json:"gitOps,omitempty"`
	// ChangeType is created, rollout, in-place or adopted.
	ChangeType string `json:"changeType,omitempty"`
	// ChangeCause says why.
	ChangeCause string `json:"changeCause,omitempty"`
	// Override is the break-glass override that let the change through.
	Override *HistoryOverride `json:"override,omitempty"`
	// Restarts are the restarts asked while the content was live.
	Restarts []revisions.Restart `json:"restarts,omitempty"`
	// Content is the revision's content (with --revision only).
	Content json.RawMessage `json:"content,omitempty"`
}

// The values of HistoryRevision.AuthorUnknown: why nothing records who made
// a revision's content live.
const (
	// AuthorUnadmitted: the content became live while rollout-guard was not
	// admitting changes (its webhooks were not called), and its reconciler
	// recorded it afterwards.
	AuthorUnadmitted = "Unadmitted"
	// AuthorPredatesGuard: the content was live before rollout-guard saw the
	// object (made before the guard was installed, or created while it was
	// down), and its reconciler adopted it.
	AuthorPredatesGuard = "PredatesGuard"
	// AuthorNotRecorded: the record names no author for another reason.
	AuthorNotRecorded = "NotRecorded"
)

// HistoryOverride is the break-glass override a revision was made with.
type HistoryOverride struct {
	// By is the user who used it.
	By string `json:"by"`
	// Reason is the reason given.
	Reason string `json:"reason"`
	// Rules are the ids of the rules it overrode.
	Rules []string `json:"rules,omitempty"`
}

// MachineSetRevision is one MachineSet of a MachineDeployment and the
// revision Cluster API annotated it with.
type MachineSetRevision struct {
	// Revision is the machinedeployment.clusters.x-k8s.io/revision annotation.
	Revision string `json:"revision,omitempty"`
	// MachineSet is the MachineSet's name.
	MachineSet string `json:"machineSet"`
	// Version is its template's Kubernetes version.
	Version string `json:"version,omitempty"`
	// Infrastructure is its infrastructure machine template, "Kind/name".
	Infrastructure string `json:"infrastructure,omitempty"`
	// Bootstrap is its bootstrap config template, "Kind/name".
	Bootstrap string `json:"bootstrap,omitempty"`
	// Replicas is its spec.replicas.
	Replicas int32 `json:"replicas"`
	// CreatedAt is its creation time.
	CreatedAt string `json:"createdAt"`
}

// ClusterHistoryKind is the kind of what `rollout history cluster/NAME -o
// json|yaml` prints.
const ClusterHistoryKind = "ClusterRolloutHistory"

// ClusterRolloutHistory is the history of a Cluster's control plane and
// worker pools, merged, as `rollout history cluster/NAME -o json|yaml`
// prints it.
// +kubebuilder:object:root=true
type ClusterRolloutHistory struct {
	metav1.TypeMeta `json:",inline"`
	// Cluster is the Cluster.
	Cluster HistoryObject `json:"cluster"`
	// TopologyVersion is its spec.topology.version; "" without a topology.
	TopologyVersion string `json:"topologyVersion,omitempty"`
	// Objects are the Cluster itself (its topology's revisions, when the
	// guard recorded any), its control plane and worker pools.
	Objects []ClusterHistoryObject `json:"objects"`
	// Revisions are the revisions of every object, ordered by the time
	// their content was last made live (restarts stay with their
	// revision, as in RolloutHistory).
	Revisions []ClusterHistoryRevision `json:"revisions"`
}

// ClusterHistoryObject is one object of a cluster's history.
type ClusterHistoryObject struct {
	HistoryObject `json:",inline"`
	// Recorded is false when rollout-guard recorded nothing for it.
	Recorded bool `json:"recorded"`
	// LiveRevision is the number of its live revision, 0 when unknown.
	LiveRevision int64 `json:"liveRevision,omitempty"`
}

// ClusterHistoryRevision is one revision of one object of a cluster.
type ClusterHistoryRevision struct {
	// Object is the object whose revision it is.
	Object          HistoryObject `json:"object"`
	HistoryRevision `json:",inline"`
}

// ClusterClassHistoryKind is the kind of what `rollout history
// clusterclass/NAME -o json|yaml` prints.
const ClusterClassHistoryKind = "ClusterClassRolloutHistory"

// ClusterClassRolloutHistory is the history of a ClusterClass — its
// revisions, and per revision what the topology controller rolled of the
// Clusters on the class while it was live — as `rollout history
// clusterclass/NAME -o json|yaml` prints it.
// +kubebuilder:object:root=true
type ClusterClassRolloutHistory struct {
	metav1.TypeMeta `json:",inline"`
	// ClusterClass is the ClusterClass.
	ClusterClass HistoryObject `json:"clusterClass"`
	// Recorded is false when rollout-guard recorded nothing for it.
	Recorded bool `json:"recorded"`
	// LiveRevision is the number of its live revision, 0 when unknown.
	LiveRevision int64 `json:"liveRevision,omitempty"`
	// Clusters are the Clusters on the class, now or by their recorded
	// topology revisions.
	Clusters []HistoryObject `json:"clusters"`
	// Revisions are the class's revisions, oldest first.
	Revisions []ClassHistoryRevision `json:"revisions"`
}

// ClassHistoryRevision is one revision of a ClusterClass and what it
// rolled.
type ClassHistoryRevision struct {
	HistoryRevision `json:",inline"`
	// Rolled are the revisions the topology controller made of the
	// control planes and worker pools of the class's Clusters while this
	// revision was live and no later topology edit of their Cluster
	// explains them, oldest first.
	Rolled []RolledRevision `json:"rolled"`
}

// RolledRevision is one revision of a Cluster's control plane or worker
// pool, made by the topology controller.
type RolledRevision struct {
	// Cluster is the Cluster the object belongs to.
	Cluster HistoryObject `json:"cluster"`
	// Object is the control plane or worker pool.
	Object          HistoryObject `json:"object"`
	HistoryRevision `json:",inline"`
}
