// Package webhooks holds the guard's admission handlers for MachineDeployment,
// KubeadmControlPlane and Cluster (v1beta2; v1beta1 requests arrive converted
// by Cluster API's conversion webhook because the registration uses
// matchPolicy Equivalent).
//
// Each handler decodes the request, gathers the rest of the cluster's facts
// (control plane, worker pools, machines) from the manager's cache — never with
// a live request to the API server — asks package skew for a Decision, and
// turns that Decision into an admission answer: a refusal whose message names
// the field, the rule, the versions and the way out, or an allowance with
// warnings when the guard cannot decide.
package webhooks
