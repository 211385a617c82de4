// Package upgradehold is the guard's BeforeClusterUpgrade Runtime Extension:
// it makes a fleet of ClusterClass Clusters upgrade wave by wave when one
// commit (a GitOps sync) bumps all their spec.topology.version at once.
//
// Cluster API's topology controller (with its RuntimeSDK feature gate on)
// calls the BeforeClusterUpgrade hook of every registered extension before
// it starts upgrading a topology Cluster's control plane. This package
// answers that call for a Cluster in wave w (its label rollout-guard.io/wave,
// package waves): it holds the upgrade (retryAfterSeconds > 0, and a message
// Cluster API writes into the Cluster's TopologyReconciled condition) while a
// Cluster of an earlier wave, in the same namespace, whose spec.topology.version
// is the version being upgraded to has not finished that upgrade, or has not
// stayed finished for the soak time. A Cluster without the label is never
// held; nor is one whose label is not a wave, and the answer says why.
//
// The endpoints are served on the guard's admission webhook server (same
// port, same serving certificate), at the paths Cluster API's runtime client
// computes (sigs.k8s.io/cluster-api/api/runtime/catalog.GVHToPath):
//
//	POST /hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery
//	POST /hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/wave-hold
//
// The package speaks the Runtime SDK's JSON with the request and response
// types of sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1 and
// encoding/json rather than Cluster API's extension server, which lives in
// Cluster API's controller module; the guard is built from its API module
// only.
//
// What it reads: the guard's cache keeps Clusters without their status
// (kinds.Cluster trims it), and the decision needs their conditions, so each
// hook call makes one uncached List of the Clusters of the requested
// Cluster's namespace that carry the wave label (a label selector; the
// manager's APIReader). The requested Cluster's own wave comes from that
// List, not from the request: the request identifies the Cluster (namespace
// and name) and names the version Cluster API is about to start upgrading
// to; everything else is read live.
//
// It fails open: when the Clusters cannot be read (an API error, a timeout,
// a missing right) the answer lets the upgrade go, says so in its message,
// is logged and counted (rollout_guard_wave_hold_answers_total with outcome
// failed-open). The handler is discovered with failurePolicy Ignore, so a
// guard that does not answer holds nothing either. A request the guard
// cannot read gets a Failure answer, as Cluster API's own extension server
// gives one.
package upgradehold
