package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupVersion is the group and version of the API: rollout-guard.io/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "rollout-guard.io", Version: "v1alpha1"}

// Resource is the resource of RolloutRevisions.
var Resource = GroupVersion.WithResource("rolloutrevisions")

// SchemeBuilder registers the API's kinds with a scheme.
var SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

// AddToScheme adds the API's kinds to a scheme.
var AddToScheme = SchemeBuilder.AddToScheme

func init() {
	SchemeBuilder.Register(&RolloutRevision{}, &RolloutRevisionList{})
}

// RolloutRevision records one revision of a MachineDeployment, MachinePool
// or control plane: what a rollout of it is made of (Data) and, in its
// annotations, who made that content live, when, how and why. The guard
// writes it, owned by the object, in the object's namespace; `rollout
// history` and `rollout undo` read it. Its shape is that of an apps/v1
// ControllerRevision, which earlier releases wrote and the guard migrates.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=rollout-guard
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=".metadata.ownerReferences[?(@.controller==true)].name"
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=".metadata.labels.rollout-guard\\.io/owner-kind"
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=".revision"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type RolloutRevision struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Data is the revision's content in canonical JSON, whose digest the
	// annotation rollout-guard.io/digest holds (and its short hash the
	// label rollout-guard.io/hash). It never changes once written.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="data is immutable: a recorded revision's content never changes"
	Data runtime.RawExtension `json:"data"`

	// Revision is the latest number the content was live under.
	// +kubebuilder:validation:Minimum=0
	Revision int64 `json:"revision"`
}

// RolloutRevisionList is a list of RolloutRevisions.
//
// +kubebuilder:object:root=true
type RolloutRevisionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the RolloutRevisions.
	Items []RolloutRevision `json:"items"`
}
