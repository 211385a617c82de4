// Package history keeps the revision history of MachineDeployments,
// MachinePools, KubeadmControlPlanes and the control planes of other
// providers (every kind of package kinds with revisions) in
// RolloutRevisions (api/v1alpha1): the Recorder writes one revision (idempotently, keyed
// by the full digest of its content; a record's name carries its short form,
// and a second content of one short name is recorded under the whole digest), List reads an object's history with one
// request, the Index keeps the records (the metadata of the
// RolloutRevisions) in memory so that recording and numbering need no
// read, and the Reconciler makes sure the live revision
// of every object is recorded and prunes old ones.
//
// What a revision is, and how it is encoded, is package revisions' job; this
// package does the API calls.
package history
