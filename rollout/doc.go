// Package rollout is the `rollout` command line: restart, pause, resume,
// history, undo and the template switch for Cluster API MachineDeployments
// and KubeadmControlPlanes (and restart, status and history for a whole
// Cluster, a ClusterClass cluster's chained upgrades included), shaped like
// `kubectl rollout`; and plan, which previews any of these changes (or an
// edited manifest) through a server-side dry run: the verdict, the steps,
// the machines replaced and what would hold it.
//
// Every command is an Options struct with Complete, Validate and Run, as in
// kubectl, in a file of its own (restart.go, pause.go, resume.go,
// history.go, undo.go, template.go for the switch, status.go, plan.go).
// No command switches over kinds: each asks its object's Kind, the kind
// registry of kinds.go, how to read, pause, restart, switch, plan or judge
// it; the registry points at package history's entry for what the guard
// needs too (the revision content, spec.rollout.after, the Cluster). The
// commands read the guard's revision history (package history), judge a
// change with the guard's own policy (package policy) before sending it, and
// write (write.go) with one request carrying a resourceVersion
// precondition, the change-cause annotation and, when asked, the
// break-glass override annotation, so the guard records who changed what
// and why.
//
// status is in parts: the pure evaluation of one read and of successive
// reads (status_eval.go, status_sets.go, status_topology.go,
// status_upgrade.go), the watcher that lists and watches through client-go's
// Reflector (status_watch.go), the loop from watched states to a verdict
// (status_follow.go), and the printers (status_print.go, status_live.go).
//
// NewCommand builds the cobra command tree; Execute runs it and maps its
// error to an exit code (ExitCode), so cmd/rollout stays a thin main and
// tests drive the same path in-process, over a fake client (cli.connect).
package rollout
