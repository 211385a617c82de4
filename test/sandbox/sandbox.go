package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

const (
	// DefaultNamespace is the namespace of the demo clusters.
	DefaultNamespace = "default"
	// DefaultKubernetesVersion is the version the demo clusters start at.
	DefaultKubernetesVersion = "v1.35.2"
	// DefaultControlPlaneMachines is the default size of a demo control plane.
	DefaultControlPlaneMachines = 3
	// DefaultWorkerMachines is the default size of a demo worker pool.
	DefaultWorkerMachines = 3
	// DefaultMachineStartup is how long each simulated start-up step of a
	// machine takes by default (VM, node, API server, etcd member).
	DefaultMachineStartup = time.Second
	// DefaultReadyTimeout bounds the wait for the demo clusters by default.
	DefaultReadyTimeout = 10 * time.Minute
)

// Options configures Start.
type Options struct {
	// Environment configures the underlying test environment (paths, log,
	// the guard's flags). Start always starts the guard and installs
	// Cluster API's admission webhooks (ClusterAPIAdmission).
	Environment framework.Options
	// Clusters is how many demo clusters to create: "demo", then "demo-2",
	// "demo-3"… Default 1; a negative number creates none.
	Clusters int
	// Namespace of the demo clusters. Default DefaultNamespace.
	Namespace string
	// ControlPlaneMachines is the number of control-plane machines of each
	// demo cluster. Default DefaultControlPlaneMachines.
	ControlPlaneMachines int32
	// WorkerMachines is the number of machines of each demo cluster's
	// MachineDeployment. Default DefaultWorkerMachines.
	WorkerMachines int32
	// KubernetesVersion of the demo clusters. Default DefaultKubernetesVersion.
	KubernetesVersion string
	// ClassClusters is how many ClusterClass-based demo clusters to create
	// on ClusterClass DefaultClassName, in Namespace: DefaultClassClusterName
	// ("demo-cc", see DefaultClassCluster), then "demo-cc-2", "demo-cc-3"…
	// (see ClassClusterName), each with its own workload port. 0 creates
	// none, unless ClassCluster is set.
	ClassClusters int
	// ClassCluster, with ClassClusters 0, creates the one ClusterClass-based
	// demo cluster DefaultClassClusterName: the same as ClassClusters 1,
	// kept for the suites written before the fleet.
	ClassCluster bool
	// ClassControlPlaneMachines is the number of control-plane machines of
	// each ClusterClass-based demo cluster. Default
	// DefaultClassControlPlaneMachines.
	ClassControlPlaneMachines int32
	// ClassWorkerMachines is the number of machines of each one's worker pool.
	// Default DefaultClassWorkerMachines.
	ClassWorkerMachines int32
	// ClassKubernetesVersion is their topology version, one of
	// ClassKubernetesVersions. Default DefaultClassKubernetesVersion.
	ClassKubernetesVersion string
	// MachineStartup is how long each simulated start-up step of a machine
	// takes (the VM, the node, the API server, the etcd member). Default
	// DefaultMachineStartup.
	MachineStartup time.Duration
	// ReadyTimeout bounds the wait until every demo machine is ready.
	// Default DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// Progress, if set, is called from Start while it waits, each time the
	// state of a demo cluster changes.
	Progress func(ClusterState)
	// RuntimeSDK runs Cluster API's core controllers (Cluster, Machine,
	// MachineSet, MachineDeployment, MachinePool, MachineHealthCheck,
	// ClusterResourceSet, ClusterClass, the topology controllers and the
	// ExtensionConfig controller) as Cluster API's own core manager,
	// BinDir/capi-core (make capi-core), a child process with the
	// ClusterTopology and RuntimeSDK feature gates on (Sandbox.Core),
	// instead of in this process: Runtime Extensions registered with an
	// ExtensionConfig (runtime.cluster.x-k8s.io/v1beta2) are then called,
	// the topology controller's lifecycle hooks (BeforeClusterUpgrade…)
	// among them. The kubeadm control plane and bootstrap controllers and
	// the in-memory infrastructure stay in this process, and so do Cluster
	// API's admission and conversion webhooks (with RuntimeSDK on, so that
	// ExtensionConfigs are accepted). The feature gates are global to the
	// process and stay on after Stop.
	RuntimeSDK bool
	// InPlaceUpdates, with RuntimeSDK, lets Cluster API update machines in
	// place: the InPlaceUpdates feature gate is on in this process, in
	// bin/capi-core and in Cluster API's kubeadm control plane manager,
	// BinDir/capi-kcp (make capi-kcp), which runs as a child process
	// (Sandbox.ControlPlane) instead of the in-process KubeadmControlPlane
	// controller (Cluster API's Runtime SDK client, which it then needs,
	// cannot be imported); and Cluster API's test extension's in-place
	// update and upgrade plan handlers are served in this process over TLS
	// and registered with the ExtensionConfig TestExtensionName
	// (Sandbox.Extension) before the demo clusters are created, whose
	// KubeadmControlPlanes have maxSurge 0 (ClusterSpec.ControlPlaneMaxSurge)
	// when they have at least 3 machines (Cluster API refuses maxSurge 0
	// below 3).
	InPlaceUpdates bool
}

// withDefaults returns opts with every unset field defaulted.
func (opts Options) withDefaults() Options {
	if opts.Clusters == 0 {
		opts.Clusters = 1
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.ControlPlaneMachines == 0 {
		opts.ControlPlaneMachines = DefaultControlPlaneMachines
	}
	if opts.WorkerMachines == 0 {
		opts.WorkerMachines = DefaultWorkerMachines
	}
	if opts.KubernetesVersion == "" {
		opts.KubernetesVersion = DefaultKubernetesVersion
	}
	if opts.ClassClusters == 0 && opts.ClassCluster {
		opts.ClassClusters = 1
	}
	if opts.MachineStartup == 0 {
		opts.MachineStartup = DefaultMachineStartup
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	opts.Environment.StartGuard = true
	opts.Environment.ClusterAPIAdmission = true
	return opts
}

// Sandbox is a running local management cluster: the test environment with
// the guard, the Cluster API and in-memory infrastructure controllers, and
// the demo clusters.
type Sandbox struct {
	// Env is the underlying environment: etcd, kube-apiserver, the
	// conversion webhooks and the guard. Its Client and Scheme do not know
	// the development infrastructure kinds; use the Sandbox's.
	Env *framework.Environment
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Scheme holds the environment's types and the development
	// infrastructure types (DevCluster, DevMachine, DevMachineTemplate…).
	Scheme *runtime.Scheme
	// Client is an admin client with Scheme.
	Client client.Client
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string
	// Clusters are the demo clusters created by Start and CreateCluster, in order.
	Clusters []ClusterSpec
	// ClassClusters are the ClusterClass-based demo clusters created by
	// Start and CreateClassCluster, in order.
	ClassClusters []ClassClusterSpec
	// Core is Cluster API's core manager process with Options.RuntimeSDK,
	// nil without it (the core controllers then run in this process). Its
	// log is Core.Log, in the environment's WorkDir.
	Core *framework.ClusterAPIManager
	// ControlPlane is Cluster API's kubeadm control plane manager process
	// with Options.InPlaceUpdates, nil without it (the KubeadmControlPlane
	// controller then runs in this process). Its log is ControlPlane.Log.
	ControlPlane *framework.ClusterAPIManager
	// Extension is the URL of Cluster API's test extension served by the
	// sandbox with Options.InPlaceUpdates, "" without it.
	Extension string
	// EnvironmentReadyAfter is how long the start of the environment (API
	// server, conversion webhooks, guard) took.
	EnvironmentReadyAfter time.Duration
	// ReadyAfter is how long Start took until every demo machine was ready.
	ReadyAfter time.Duration

	ctrls     *controllers
	extension *testExtension
	stopOnce  sync.Once
	stopErr   error
}

// Start starts the environment with the guard, the controllers and the demo
// clusters, and returns when every demo machine is ready. ctx bounds the
// start only: the sandbox runs until Stop. On any error (or panic)
// everything started so far is stopped.
func Start(ctx context.Context, opts Options) (_ *Sandbox, retErr error) {
	begin := time.Now()
	opts = opts.withDefaults()
	s := &Sandbox{}
	defer func() {
		if r := recover(); r != nil {
			_ = s.Stop()
			panic(r)
		}
		if retErr != nil {
			if err := s.Stop(); err != nil {
				retErr = errors.Join(retErr, fmt.Errorf("stopping what had started: %w", err))
			}
		}
	}()

	if opts.InPlaceUpdates && !opts.RuntimeSDK {
		return nil, errors.New("in-place updates need the Runtime SDK mode: set RuntimeSDK (--runtime-sdk) too")
	}
	gates := featureGates(opts.RuntimeSDK, opts.InPlaceUpdates)
	// InPlaceUpdates is set either way in this process: left on by an
	// earlier sandbox, it would make the in-process KubeadmControlPlane
	// controller refuse to start without a Runtime SDK client.
	processGates := maps.Clone(gates)
	processGates[string(feature.InPlaceUpdates)] = opts.InPlaceUpdates
	if err := feature.MutableGates.SetFromMap(processGates); err != nil {
		return nil, fmt.Errorf("enabling Cluster API's feature gates %v: %w", processGates, err)
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	s.Scheme = scheme
	env, err := framework.Start(ctx, opts.Environment)
	if err != nil {
		return nil, fmt.Errorf("starting the environment: %w", err)
	}
	s.Env = env
	s.Config = env.Config
	s.Kubeconfig = env.Kubeconfig
	s.EnvironmentReadyAfter = time.Since(begin)
	if s.Client, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, fmt.Errorf("creating the admin client: %w", err)
	}

	if err := recordProviders(ctx, s.Client, s.Kubeconfig, env.ClusterAPIDir); err != nil {
		return nil, err
	}
	if s.ctrls, err = startControllers(ctx, env.Config, scheme, !opts.RuntimeSDK, !opts.InPlaceUpdates); err != nil {
		return nil, err
	}
	if opts.RuntimeSDK {
		if s.Core, err = env.StartClusterAPICore(ctx, framework.ClusterAPIManagerOptions{
			FeatureGates: gates,
			Args:         coreManagerArgs(),
		}); err != nil {
			return nil, err
		}
	}
	if opts.InPlaceUpdates {
		if s.ControlPlane, err = env.StartClusterAPIKubeadmControlPlane(ctx, framework.ClusterAPIManagerOptions{
			FeatureGates: gates,
			Args:         controlPlaneManagerArgs(),
		}); err != nil {
			return nil, err
		}
		if s.extension, err = startTestExtension(ctx, s.Client, filepath.Join(env.WorkDir, TestExtensionName), s.ctrls.setKubeletVersion); err != nil {
			return nil, err
		}
		s.Extension = s.extension.URL
		if err := s.extension.register(ctx, s.Client); err != nil {
			return nil, err
		}
	}

	for i := range max(opts.Clusters, 0) {
		name := "demo"
		if i > 0 {
			name = fmt.Sprintf("demo-%d", i+1)
		}
		spec := ClusterSpec{
			Name:                 name,
			Namespace:            opts.Namespace,
			ControlPlaneMachines: opts.ControlPlaneMachines,
			WorkerMachines:       opts.WorkerMachines,
			KubernetesVersion:    opts.KubernetesVersion,
			MachineStartup:       opts.MachineStartup,
		}
		if opts.InPlaceUpdates && spec.ControlPlaneMachines >= minReplicasForMaxSurge0 {
			// Every control-plane machine offered for an in-place update.
			spec.ControlPlaneMaxSurge = ptr.To(int32(0))
		}
		if err := s.CreateCluster(ctx, spec); err != nil {
			return nil, err
		}
	}
	for i := range max(opts.ClassClusters, 0) {
		spec := DefaultClassCluster(opts.Namespace)
		spec.Name = ClassClusterName(i)
		spec.Class.MachineStartup = opts.MachineStartup
		spec.ControlPlaneMachines = opts.ClassControlPlaneMachines
		spec.WorkerMachines = opts.ClassWorkerMachines
		spec.KubernetesVersion = opts.ClassKubernetesVersion
		if _, err := s.CreateClassCluster(ctx, spec); err != nil {
			return nil, err
		}
	}

	waitCtx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	var keys []client.ObjectKey
	for _, spec := range s.Clusters {
		keys = append(keys, client.ObjectKey{Namespace: spec.Namespace, Name: spec.Name})
	}
	for _, spec := range s.ClassClusters {
		keys = append(keys, client.ObjectKey{Namespace: spec.Namespace, Name: spec.Name})
	}
	for _, key := range keys {
		if _, err := s.WaitClusterReady(waitCtx, key.Namespace, key.Name, opts.Progress); err != nil {
			return nil, err
		}
	}
	s.ReadyAfter = time.Since(begin)
	return s, nil
}

// featureGates are the Cluster API feature gates the sandbox turns on, as
// a management cluster's operator does with --feature-gates: ClusterTopology,
// for ClusterClasses and the topology controllers (and for Cluster API's
// webhooks to accept them); with runtimeSDK, RuntimeSDK too, for
// ExtensionConfigs and the Runtime Extensions they register; with inPlace,
// InPlaceUpdates too. Start sets them in this process (global to it; they
// stay on after Stop) and passes the same to bin/capi-core and
// bin/capi-kcp; the other gates keep Cluster API's defaults in all of them
// (MachinePool and MachineSetPreflightChecks on).
func featureGates(runtimeSDK, inPlace bool) map[string]bool {
	gates := map[string]bool{string(feature.ClusterTopology): true}
	if runtimeSDK {
		gates[string(feature.RuntimeSDK)] = true
	}
	if inPlace {
		gates[string(feature.InPlaceUpdates)] = true
	}
	return gates
}

// coreManagerArgs are bin/capi-core's flags beyond the ones of
// framework.StartClusterAPICore: the in-process set-up's settings where
// Cluster API has a flag for them. It has none for the cluster cache's
// retry interval: a workload cluster it could not reach is tried again
// after Cluster API's 30 s, not the in-process 2 s.
func coreManagerArgs() []string {
	return []string{
		"--sync-period=" + syncPeriod.String(),
		"--kube-api-qps=" + strconv.Itoa(apiQPS),
		"--kube-api-burst=" + strconv.Itoa(apiBurst),
		"--clustercache-client-qps=" + strconv.Itoa(clusterCacheQPS),
		"--clustercache-client-burst=" + strconv.Itoa(clusterCacheBurst),
		"--remote-connection-grace-period=" + remoteConnectionGracePeriod.String(),
		"--remote-conditions-grace-period=" + remoteConditionsGracePeriod.String(),
		"--machineset-preflight-checks=" + string(clusterv1.MachineSetPreflightCheckAll),
	}
}

// controlPlaneManagerArgs are bin/capi-kcp's flags beyond the ones of
// framework.StartClusterAPIKubeadmControlPlane: the in-process set-up's
// settings where Cluster API has a flag for them (its etcd client logs
// errors only: the in-process controller's logs nothing). As for
// bin/capi-core, the cluster cache's retry interval stays Cluster API's
// 30 s.
func controlPlaneManagerArgs() []string {
	return []string{
		"--sync-period=" + syncPeriod.String(),
		"--kube-api-qps=" + strconv.Itoa(apiQPS),
		"--kube-api-burst=" + strconv.Itoa(apiBurst),
		"--clustercache-client-qps=" + strconv.Itoa(clusterCacheQPS),
		"--clustercache-client-burst=" + strconv.Itoa(clusterCacheBurst),
		"--remote-conditions-grace-period=" + remoteConditionsGracePeriod.String(),
		"--kubeadmcontrolplane-concurrency=" + strconv.Itoa(concurrency),
		"--etcd-dial-timeout-duration=" + etcdDialTimeout.String(),
		"--etcd-client-log-level=error",
	}
}

// Stop stops Cluster API's managers (with Options.RuntimeSDK and
// Options.InPlaceUpdates), the test extension, the controllers, then the
// environment (the guard, kube-apiserver and etcd). It is idempotent: later
// calls return the first call's result.
func (s *Sandbox) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		if s.ControlPlane != nil {
			if err := s.ControlPlane.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping Cluster API's kubeadm control plane manager: %w", err))
			}
		}
		if err := s.extension.stop(); err != nil {
			errs = append(errs, err)
		}
		if s.Core != nil {
			if err := s.Core.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping Cluster API's core manager: %w", err))
			}
		}
		if s.ctrls != nil {
			if err := s.ctrls.stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if s.Env != nil {
			if err := s.Env.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stopping the environment: %w", err))
			}
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// ClientAs returns a client with Scheme that impersonates user in groups
// (the API server adds system:authenticated); pass system:masters among
// groups for full rights.
func (s *Sandbox) ClientAs(user string, groups ...string) (client.Client, error) {
	cfg := rest.CopyConfig(s.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: s.Scheme})
	if err != nil {
		return nil, fmt.Errorf("creating a client for user %q: %w", user, err)
	}
	return c, nil
}
