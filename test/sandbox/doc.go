// Package sandbox runs a local Cluster API management cluster whose machines
// are simulated in memory, for trying the product (`make run`) and for the
// end-to-end tests of real rollouts.
//
// On top of the test environment of package framework (etcd and
// kube-apiserver from bin/, the Cluster API CRDs with Cluster API's own
// conversion, defaulting and validating webhooks, and the guard as its own
// process registered from config/webhook), Start runs one
// controller-runtime manager in this process with the real Cluster API
// controllers — Cluster, Machine, MachineSet, MachineDeployment,
// KubeadmControlPlane, KubeadmConfig, ClusterClass and the topology
// controllers (Cluster API's ClusterTopology feature gate is turned on, as
// an operator does with --feature-gates) — and the development
// infrastructure provider's DevCluster and DevMachine controllers with
// their in-memory backend: every workload cluster gets a fake API server
// and fake etcd members on a local TLS port, so the control-plane
// controller really talks to "its" etcd and API servers, and nodes really
// join.
//
// Start then creates demo clusters (Cluster "demo", KubeadmControlPlane
// "demo-control-plane", MachineDeployment "demo-md-0", their templates and
// spare templates to switch to) and, with Options.ClassClusters (or
// Options.ClassCluster), ClusterClass-based ones: Cluster "demo-cc" (then
// "demo-cc-2"…, a fleet on one class) on ClusterClass "demo-class"
// (whose kubernetesVersions are ClassKubernetesVersions), for which the
// topology controller creates KubeadmControlPlane "demo-cc-control-plane"
// and MachineDeployment "demo-cc-md-0". It waits until every machine is
// ready. The class's variable WorkerImageVariable stands for the workers'
// image: a new value on one Cluster rolls that cluster's workers only. PlainClass is the spec of a second class, PlainClassName
// ("demo-class-plain"): the same class without kubernetesVersions, so
// Cluster API upgrades its clusters one minor at a time. CreateClass creates
// it (ClassClusterObjects builds a Cluster on it), and
// CreatePlainClassCluster creates a Cluster on it in one call.
//
// Cluster API's admission webhooks are installed as clusterctl installs
// them (framework.Options.ClusterAPIAdmission), so a request the guard
// allows may still be refused by Cluster API (for example a topology
// version decrease, a KubeadmControlPlane version skipping a minor, or an
// even number of control-plane machines with stacked etcd). The demo
// objects are created fully specified, so Cluster API's defaulting leaves
// them as they are.
//
// With Options.RuntimeSDK, Cluster API's core controllers run instead as
// Cluster API's own core manager, bin/capi-core (make capi-core), a child
// process with the ClusterTopology and RuntimeSDK feature gates on, its
// log capi-core.log in the environment's WorkDir: ExtensionConfigs are
// reconciled and the Runtime Extensions they register are called, the
// topology controller's lifecycle hooks among them. The kubeadm control
// plane and bootstrap controllers, the in-memory infrastructure and Cluster
// API's webhooks stay in this process; the core manager reaches the
// in-memory workload clusters through their kubeconfig Secrets, as the
// in-process controllers do.
//
// The controllers log through controller-runtime's global logger and klog:
// callers set both (ctrl.SetLogger, klog.SetLogger) before Start.
package sandbox
