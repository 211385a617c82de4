// Package dryrun previews what Cluster API's topology controller would do
// after a change of a ClusterClass or of a Cluster's topology, with Cluster
// API's own code: its ClusterClass and Cluster topology reconcilers
// (sigs.k8s.io/cluster-api/core/reconcilers, which compute the desired
// state with exp/topology/desiredstate) run here against the live
// management cluster, reading the edited objects in place of the stored
// ones, and every write they make is sent as a server-side dry run. The API
// server's answers — the objects as they would be stored, or the refusal of
// an admission webhook (rollout-guard's, Cluster API's) — are returned as
// Writes; nothing is stored, and no event is sent.
//
// What needs a Runtime Extension (external patches, an upgrade-plan
// extension) is not called: the Runtime SDK stays off here, and such a
// class's clusters fail to compute with Cluster API's own error.
package dryrun
