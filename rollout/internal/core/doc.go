// Package core is what every command of the rollout CLI shares, the verbs
// of package rollout and the subsystems plan, status and history alike.
//
//   - Session (session.go) is one invocation: its streams, the kubectl
//     connection flags, the clock, the API clients it connects once
//     (Clients), the API server's warnings (printed, or collected for a
//     plan), warnings and notes on stderr, the default change-cause, and the
//     exit codes ExitOK and ExitError (ExitCode maps an error to its code).
//   - Kind (kinds.go, kinds_fields.go, kindof.go) is the kind table: the
//     kinds the CLI works on, MachineDeployments, MachinePools,
//     KubeadmControlPlanes, other providers' control planes through Cluster
//     API's control-plane contract, and Clusters, with all a command needs
//     to know of each (how to read, pause, restart and switch it, its
//     machines, its replica counts, its place in a topology, its revision
//     content); ParseKind and KindOf look a kind up. It holds data only: the
//     planners of package plan are plan's own, by kind.
//   - Ref and Targets (resource.go) are what the user typed; the Session
//     reads the objects they name (objects.go), a Cluster's members
//     included, and explains a failed call (errors.go).
//   - Session.Send (write.go) is the one write: a patch carrying a
//     resourceVersion precondition and the change-cause, sent for real or
//     as a client or server dry run; RetryConflicts (conflict.go) decides
//     anew after a conflict; Emit (emit.go) prints the change as a manifest
//     for Git instead.
//   - Before a write: GitOps detection (gitops.go), the guard's own policy
//     (policycheck.go), the templates a change references (templates.go),
//     and the topology's ownership of an object, with a restart asked
//     through its Cluster (topology.go).
//   - RevisionSet (revisionset.go) is an object's revision history as the
//     guard recorded it, with each revision's author (author.go) and the
//     fields one revision changes against another (changes.go).
//   - PrintFlags (print.go) and the text helpers (text.go) print for people
//     and for -o.
//
// It imports none of the packages that use it.
package core
