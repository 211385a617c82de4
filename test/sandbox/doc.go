// Package sandbox runs a local Cluster API management cluster whose machines
// are simulated in memory, for trying the product (`make run`) and for the
// end-to-end tests of real rollouts.
//
// On top of the test environment of package framework (etcd and
// kube-apiserver from bin/, the Cluster API CRDs and conversion webhooks, and
// the guard as its own process registered from config/webhook), Start runs
// one controller-runtime manager in this process with the real Cluster API
// controllers — Cluster, Machine, MachineSet, MachineDeployment,
// KubeadmControlPlane and KubeadmConfig — and the development infrastructure
// provider's DevCluster and DevMachine controllers with their in-memory
// backend: every workload cluster gets a fake API server and fake etcd
// members on a local TLS port, so the control-plane controller really talks
// to "its" etcd and API servers, and nodes really join.
//
// Start then creates demo clusters (Cluster "demo", KubeadmControlPlane
// "demo-control-plane", MachineDeployment "demo-md-0", their templates and
// spare templates to switch to) and waits until every machine is ready.
//
// Cluster API's own defaulting and validating admission webhooks are not
// installed: the demo objects are created fully specified (labels,
// selectors, rollout strategies, deletion timeouts), so the controllers
// behave as with the webhooks, and every refusal a user or test sees comes
// from the guard.
//
// The controllers log through controller-runtime's global logger and klog:
// callers set both (ctrl.SetLogger, klog.SetLogger) before Start.
package sandbox
