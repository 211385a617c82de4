// Package rollout is the `rollout` command line: restart, pause, resume,
// history, undo and the template switch for Cluster API MachineDeployments
// and KubeadmControlPlanes (and restart, status and history for a whole
// Cluster, a ClusterClass cluster's chained upgrades included), shaped like
// `kubectl rollout`; and plan, which previews any of these changes (or an
// edited manifest) through a server-side dry run: the verdict, the steps,
// the machines replaced and what would hold it.
//
// Every command is an Options struct with Complete, Validate and Run, as in
// kubectl; the switch over kinds lives in exactly one place per verb. The
// commands read the guard's revision history (package history), judge a
// change with the guard's own policy (package policy) before sending it, and
// write with one request carrying a resourceVersion precondition, the
// change-cause annotation and, when asked, the break-glass override
// annotation, so the guard records who changed what and why.
//
// NewCommand builds the cobra command tree; Execute runs it and maps its
// error to an exit code (ExitCode), so cmd/rollout stays a thin main and
// tests drive the same path in-process.
package rollout
