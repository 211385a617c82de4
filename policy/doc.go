// Package policy gathers the facts of one change to a MachineDeployment,
// KubeadmControlPlane or Cluster — the cluster's control plane, its worker
// pools and Machines, what the control plane has run according to its
// revision stamps — and asks package skew for the decision. The guard reads
// those facts through its cache, the CLI through a live client; both get the
// same verdict and the same message. It also defines the break-glass override
// (who may use it, when a change asks for it).
package policy
