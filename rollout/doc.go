// Package rollout is the `rollout` command line: restart, pause, resume,
// history, undo and the template switch for Cluster API MachineDeployments,
// MachinePools, KubeadmControlPlanes and other providers' control planes
// (and restart, status and history for a whole Cluster, a ClusterClass
// cluster's chained upgrades included), shaped like `kubectl rollout`; and
// plan, which previews any of these changes (or an edited manifest) through
// a server-side dry run: the verdict, the steps, the machines replaced and
// what would hold it.
//
// The package holds the verbs and the command tree; the work is in
// packages of their own, the arrows running one way, from the verbs down:
//
//   - the verbs here: restart.go, pause.go, resume.go, undo.go (its checks
//     and write in undo_rollback.go) and template.go for the switch; every
//     one an Options struct with Complete, Validate and Run, as in kubectl;
//   - rollout/plan, rollout/status and rollout/history: `rollout plan`,
//     `rollout status` and `rollout history`, each with its own command;
//   - rollout/internal/core, what all of them share: the invocation's
//     Session (clients, streams, clock), the kind table, the reads, the
//     write with its resourceVersion precondition, emit, the GitOps, policy
//     and template checks, the revision history as the guard recorded it.
//
// No command switches over kinds: each asks its object's Kind, the kind
// table of package core, how to read, pause, restart, switch or judge it;
// the table points at the guard's history package for what the guard
// needs too (the revision content, spec.rollout.after, the Cluster). The
// commands read the guard's revision history, judge a change with the
// guard's own policy (package policy) before sending it, and write with one
// request carrying a resourceVersion precondition, the change-cause
// annotation and, when asked, the break-glass override annotation, so the
// guard records who changed what and why.
//
// NewCommand builds the cobra command tree; Execute runs it and maps its
// error to an exit code (ExitCode), so cmd/rollout stays a thin main and
// tests drive the same path in-process, over a fake client
// (core.Session.Connect).
package rollout
