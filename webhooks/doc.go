// Package webhooks holds the guard's admission handlers: a validating webhook
// (Validator) and a revision-stamping mutating webhook (Stamper) for
// MachineDeployments, MachinePools, KubeadmControlPlanes and the control
// planes of other providers, a validating and a stamping webhook for
// topology Clusters (their spec.topology), a stamping webhook for
// ClusterClasses (their spec), and validating webhooks for MachineSets and
// Machines, judged as worker pools where they do not carry a verified
// owner's version (v1beta2; v1beta1 requests arrive converted by Cluster API's conversion
// webhook because the registration uses matchPolicy Equivalent).
//
// A validating handler decodes the request, gathers the rest of the cluster's
// facts (control plane, worker pools, machines) from the manager's cache —
// from live reads only while a watch of that cache is down (FreshPolicy) —
// asks package policy for a Decision, and turns it into an admission answer:
// a refusal whose message names the field, the rule, the versions and the way
// out, or an allowance with warnings when the guard cannot decide (or only
// warns, EnforcementWarn).
//
// What the handlers record — the revision a change replaces, a restart, a
// refused override — they record only of an old object the API server stored
// (Persisted), never from a request body alone. The Stamper signs the
// stamps it writes with the guard's key (StampKey); stamps it did not sign
// are not history (history.Stamps): the policy judges an object without
// them, and they are recorded as of unknown author. The one claim about the
// past it takes from a request is the stamps of a created object whose user
// may create RolloutRevisions (Restorers): clusterctl move and restores,
// whose users could write that history anyway; it signs them anew. A third
// mutating webhook, OwnerLabeler, keeps a RolloutRevision's owner label
// equal to its owner reference, which a move rewrites, and a validating one,
// RevisionGuard, lets no one but the guard change what a record says.
//
// What differs between kinds (how to decode one lean, trim it for the
// cache, take its revision) the handlers ask of package kinds. The package
// also sets up the guard's cache (CacheOptions: what each kind keeps in
// memory, the Machines as compact entries in MachineStore) and the watches
// whose failure makes the policy read live (Watches).
package webhooks
