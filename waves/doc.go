// Package waves is what a staged fleet rollout knows of one Cluster: the
// wave it belongs to (its label rollout-guard.io/wave), and whether its
// rollout to a Kubernetes version is done, and since when, as Cluster API's
// own conditions on the Cluster say.
//
// The guard's BeforeClusterUpgrade Runtime Extension holds a Cluster's
// upgrade while a Cluster of an earlier wave moving to the same version is
// not yet done and soaked; the rollout CLI orders a fleet by the same label.
// Pure: no client, no I/O.
package waves
