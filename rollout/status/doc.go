// Package status is `rollout status`: it watches the rollout of a
// MachineDeployment, a MachinePool, a KubeadmControlPlane, another
// provider's control plane, a Cluster or a fleet of Clusters until it is
// done, and exits with a verdict (ExitTimeout, ExitStalled, ExitPaused,
// ExitSuperseded; a fleet's refused cluster, core.ExitRefused).
//
// It is in parts: the pure evaluation of one read and of successive reads
// (eval.go, sets.go, topology.go, upgrade.go); the watcher that lists and
// watches through client-go's Reflector (watch.go); the loop from watched
// states to a verdict (follow.go); and the printers, of lines, JSON events
// and a live terminal view (print.go, live.go). A Cluster is watched
// member by member (its control plane, a KubeadmControlPlane, then each
// worker pool), or, for a ClusterClass cluster, as a whole with every step
// of its upgrade to spec.topology.version (cluster.go). A fleet (the
// Clusters of a ClusterClass, or those -l or -A select) is watched as one,
// with one list and one watch per kind, each cluster evaluated as
// cluster/NAME is and judged by its own tracker, and shown grouped by
// state, worst first (fleet.go, fleetwatch.go).
package status
