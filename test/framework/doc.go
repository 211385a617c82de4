// Package framework starts a local Cluster API management cluster for the
// product's tests and for the sandbox: a real etcd and kube-apiserver (through
// controller-runtime's envtest), the Cluster API CRDs of the core, kubeadm
// bootstrap and kubeadm control-plane providers with Cluster API's conversion
// webhooks served in-process (so v1beta1 and v1beta2 both work), and, on
// request, the guard (bin/webhook) as its own process, registered with the
// API server from the project's own config/webhook/manifests.yaml.
//
// The guard runs as it does when installed: as its ServiceAccount
// (GuardServiceAccount, impersonated by the admin) with only the rights of
// the project's own config/rbac, so a right missing there fails the tests
// (Options.GuardAsAdmin runs it as system:masters instead). It serves a
// certificate from a directory of its own (GuardCertDir), which tests may
// replace together with the CA bundle of its webhook configurations
// (WriteGuardServingCert, SetGuardCABundle).
//
// Tests of faults break the environment on purpose: KillGuard ends the
// guard with a signal, RestartAPIServer stops and starts kube-apiserver on
// its port and etcd, and StartGuardReplicas runs several guards behind a
// stand-in for their Service that sends new connections to ready replicas.
//
// Cluster API's validating and defaulting admission webhooks are installed
// only with Options.ClusterAPIAdmission (the sandbox turns it on): they are
// then served beside the conversion webhooks and registered from the
// manifests shipped in the Cluster API module, named as clusterctl names
// them ("capi-validating-webhook-configuration"…). Without it, every refusal
// a test sees comes from the guard.
//
// For the installation as users run it, StartNode adds a real node to an
// environment started with NodeAPIServerArgs (containerd, the kubelet,
// kube-controller-manager and kube-scheduler), on which Pods run, and
// StartCertManager runs cert-manager's own controller and CA injector.
//
// The binaries etcd, kube-apiserver, kubectl and webhook (and, for a node or
// cert-manager, kubelet, kube-controller-manager, kube-scheduler,
// pause-image.tar, cert-manager-controller and cert-manager-cainjector) are
// taken from the repository's bin/ directory; nothing is downloaded.
package framework
