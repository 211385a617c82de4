// Package policy gathers the facts of one change — the cluster's control
// plane, its worker pools and Machines, what the control plane has run
// according to its revision stamps, the upgrade plan of its ClusterClass — and
// asks package skew for the decision. It judges MachineDeployments,
// MachinePools, KubeadmControlPlanes, control planes of other providers read
// through Cluster API's contract, and Clusters' topology versions. It reads
// every version once, where it gathers it, and hands package skew the facts
// read. A version bump that never rolled out may be reverted (RevertedRun,
// RevertedRunOfContract), and what a control plane has run is worked out
// from its stamp and its spec (HighestRunOf, HighestRunOfContract).
//
// The guard reads those facts through its cache, the CLI through a live
// client; both get the same verdict and the same message. It also defines the
// break-glass override (who may use it, when a change asks for it).
package policy
