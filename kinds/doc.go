// Package kinds is the guard's registry of the kinds it polices: for each of
// MachineDeployment, MachinePool, KubeadmControlPlane, the control planes of
// other providers read through Cluster API's control-plane contract,
// ClusterClass and Cluster, one entry says how to create an empty object of it, take its
// revision content, find the Cluster it belongs to, read its restart
// (spec.rollout.after), decode it lean from an admission request, and trim
// it for the guard's cache.
//
// Packages history, webhooks and the CLI ask this registry (Of, or an entry
// by name) instead of switching on Go types; adding a kind is one new entry
// here, with its tests. What the policy judges of a kind stays in package
// policy, the revision encoding in package revisions: an entry only points
// at them.
package kinds
