// Package skew is the rollout policy of the guard: it parses Kubernetes and etcd
// versions, knows which etcd kubeadm deploys for each Kubernetes version, and
// decides whether one change keeps a Cluster API cluster inside the
// Kubernetes version-skew policy and never downgrades etcd.
//
// EvaluateControlPlane judges a change of a control plane's version or etcd
// image tag: a KubeadmControlPlane's, a Cluster's topology version (through
// the steps of its ClusterClass's upgrade plan, when it has one), or the
// version of another provider's control plane read through Cluster API's
// contract, which is judged without kubeadm's etcd rules. It weighs the change
// against what the control plane runs and has run, and against its workers:
// MachineDeployments, MachinePools and Machines. EvaluateWorker judges a
// change of a worker pool's version (a MachineDeployment or a MachinePool)
// against its control plane.
//
// The package is pure: it takes the facts of one change, every version read
// once into a Version or EtcdVersion where the facts are gathered, and returns
// a Decision. Gathering those facts (from an admission request, a cache or the
// CLI's client) is the caller's job, so the guard and the CLI judge every
// change with the same code.
//
// Rules compare minors; patch versions, pre-releases and build metadata never
// break one. A rule refuses a change that creates a breach or widens an
// existing one; a change that leaves an existing breach as it was, or narrows
// it, is allowed with a warning so that an operator can always repair a
// cluster that is already out of policy. docs/reference/policy.md describes every rule
// and quotes its refusal text.
package skew

// RuleID names a rule in a stable, machine-readable way. Rule ids appear in
// refusal messages, metrics and docs/reference/policy.md; never rename one.
type RuleID string

// The rules of the policy. docs/reference/policy.md explains each one.
const (
	// RuleInvalidVersion: a version that does not parse is refused, never passed.
	RuleInvalidVersion RuleID = "InvalidVersion"
	// RuleControlPlaneDowngrade: the control plane's Kubernetes minor goes down.
	RuleControlPlaneDowngrade RuleID = "ControlPlaneDowngrade"
	// RuleEtcdDowngrade: the etcd minor the control plane would run is lower than
	// the highest etcd minor it has run.
	RuleEtcdDowngrade RuleID = "EtcdDowngrade"
	// RuleControlPlaneMinorSkip: a control-plane upgrade skips a minor.
	RuleControlPlaneMinorSkip RuleID = "ControlPlaneMinorSkip"
	// RuleWorkerNewerThanControlPlane: a worker pool is set to a minor newer
	// than the lowest control-plane version running.
	RuleWorkerNewerThanControlPlane RuleID = "WorkerNewerThanControlPlane"
	// RuleWorkerTooOld: a worker pool is set further below the newest
	// control-plane version running than the kubelet skew allows.
	RuleWorkerTooOld RuleID = "WorkerTooOld"
	// RuleControlPlaneLeavesWorkerNewer: a control-plane change would leave a
	// running worker newer than the control plane.
	RuleControlPlaneLeavesWorkerNewer RuleID = "ControlPlaneLeavesWorkerNewer"
	// RuleControlPlaneLeavesWorkerTooOld: a control-plane change would leave a
	// running worker older than the kubelet skew allows.
	RuleControlPlaneLeavesWorkerTooOld RuleID = "ControlPlaneLeavesWorkerTooOld"
	// RuleWorkerVersionUnset: a worker pool, MachineSet or Machine of a
	// cluster whose control plane has a version is set to run no version,
	// so its kubelet is whatever its image holds and neither this policy
	// nor Cluster API's MachineSet preflight checks can keep it within skew.
	RuleWorkerVersionUnset RuleID = "WorkerVersionUnset"
	// RulePreflightSkewChecksSkipped: an object is set to skip Cluster
	// API's MachineSet preflight checks of version skew (annotation
	// machineset.cluster.x-k8s.io/skip-preflight-checks).
	RulePreflightSkewChecksSkipped RuleID = "PreflightSkewChecksSkipped"
)
