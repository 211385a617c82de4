// Package history is `rollout history`: the revisions rollout-guard
// recorded of a MachineDeployment, a MachinePool, a KubeadmControlPlane or
// another provider's control plane, with who changed what, how and why,
// and each revision in full or against another (--revision, --diff); where
// the guard recorded nothing, what the cluster itself keeps (a
// MachineDeployment's MachineSets and their revision annotations) is shown
// instead (untracked.go). For a Cluster it merges the histories of its
// control plane and worker pools into one, restarts included (cluster.go).
// It prints for people or, with -o, a RolloutHistory of
// rollout/api/v1alpha1 (types.go).
package history
