// Package v1alpha1 holds what the rollout CLI prints as data, apiVersion
// rollout.rollout-guard.io/v1alpha1: RolloutHistory and ClusterRolloutHistory
// (rollout history -o json|yaml), RolloutPlan (rollout plan -o json|yaml,
// whose JSON Schema is plan.schema.json beside this file), and
// ClusterRolloutStatus and FleetRolloutStatus (rollout status -o json of a
// fleet: clusterclass/NAME, or cluster with -l or -A). A pipeline that
// reads that output can import this package alone, without the CLI.
//
// The version is a promise: fields may be added within it, none is removed
// or changes meaning.
//
// Its DeepCopy methods are generated (zz_generated.deepcopy.go, make
// generate).
//
// +kubebuilder:object:generate=true
package v1alpha1
