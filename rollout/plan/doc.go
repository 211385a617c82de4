// Package plan is `rollout plan`: the preview of a change before it is
// made, sent to the API server as a server-side dry run, so that
// rollout-guard and Cluster API's webhooks answer as they would to the
// change itself, and nothing is stored.
//
// It plans the changes the CLI makes (--template, --bootstrap-template,
// --version, --to-revision, --restart) and edited manifests (-f):
//   - of a MachineDeployment and a KubeadmControlPlane: the verdict, the
//     machines the change replaces and with what strategy, the version
//     step, what would hold it and how long it would take; each kind's
//     machines are planned by its machine planner (planners.go), found by
//     kind;
//   - of a ClusterClass Cluster: a restart through its topology, and an
//     upgrade of spec.topology.version in the steps Cluster API takes
//     (cluster.go, steps.go);
//   - a MachinePool and another provider's control plane are refused
//     (their machines are replaced in an order plan cannot foresee).
//
// The report is printed for people (print.go) or as a RolloutPlan of
// rollout/api/v1alpha1 (-o json|yaml); the exit code says whether the change
// would be admitted, refused (ExitRefused) or, with --fail-on-replace,
// would replace machines (ExitWouldReplace).
package plan
