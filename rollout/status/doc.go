// Package status is `rollout status`: it watches the rollout of a
// MachineDeployment, a MachinePool, a KubeadmControlPlane, another
// provider's control plane or a Cluster until it is done, and exits with a
// verdict (ExitTimeout, ExitStalled, ExitPaused, ExitSuperseded).
//
// It is in parts: the pure evaluation of one read and of successive reads
// (eval.go, sets.go, topology.go, upgrade.go); the watcher that lists and
// watches through client-go's Reflector (watch.go); the loop from watched
// states to a verdict (follow.go); and the printers, of lines, JSON events
// and a live terminal view (print.go, live.go). A Cluster is watched
// member by member (its control plane, a KubeadmControlPlane, then each
// worker pool), or, for a ClusterClass cluster, as a whole with every step
// of its upgrade to spec.topology.version (cluster.go).
package status
