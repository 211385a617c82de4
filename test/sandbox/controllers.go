package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/reconcilers/kubeadmconfig"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/etcd"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/reconcilers/kubeadmcontrolplane"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	"sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	topologycluster "sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster"
	topologymachinedeployment "sigs.k8s.io/cluster-api/core/reconcilers/topology/machinedeployment"
	topologymachineset "sigs.k8s.io/cluster-api/core/reconcilers/topology/machineset"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/feature"
	"sigs.k8s.io/cluster-api/test/infrastructure/container"
	infrav1beta1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta1"
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
	devcontrollers "sigs.k8s.io/cluster-api/test/infrastructure/docker/controllers"
	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryserver "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server"
	"sigs.k8s.io/cluster-api/util/index"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

const (
	// controllerName names the sandbox's manager to the API server (user
	// agent) and in Cluster API's informer metrics.
	controllerName = "rollout-guard-sandbox"
	// syncPeriod is the resync period of the manager's cache, Cluster API's default.
	syncPeriod = 10 * time.Minute
	// concurrency is the number of parallel reconciles of every controller.
	concurrency = 10
	// apiQPS and apiBurst bound the controllers' requests to the API server.
	apiQPS, apiBurst = 50, 100
	// clusterCacheQPS and clusterCacheBurst bound the cluster cache's
	// requests to each workload cluster (Cluster API's defaults).
	clusterCacheQPS, clusterCacheBurst = 20, 30
	// The grace periods and timeouts below are Cluster API's defaults.
	remoteConnectionGracePeriod = 50 * time.Second
	remoteConditionsGracePeriod = 5 * time.Minute
	etcdDialTimeout             = 10 * time.Second
	// connectionRetryInterval is how long the cluster cache waits before it
	// tries again to connect to a workload cluster (Cluster API: 30 s).
	connectionRetryInterval = 2 * time.Second
	// managerStartTimeout bounds the start of the manager's cache.
	managerStartTimeout = 60 * time.Second
	// managerStopTimeout bounds the stop of the manager.
	managerStopTimeout = 30 * time.Second
	// workloadHost is the address the workload clusters' fake API servers
	// and etcd members listen on.
	workloadHost = "127.0.0.1"
)

// NewScheme returns the environment's scheme (framework.NewScheme) with the
// development infrastructure types (v1beta1 and v1beta2) added.
func NewScheme() (*runtime.Scheme, error) {
	scheme, err := framework.NewScheme()
	if err != nil {
		return nil, fmt.Errorf("building the scheme: %w", err)
	}
	if err := infrav1beta1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("adding infrastructure.cluster.x-k8s.io/v1beta1 to the scheme: %w", err)
	}
	if err := infrav1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("adding infrastructure.cluster.x-k8s.io/v1beta2 to the scheme: %w", err)
	}
	return scheme, nil
}

// newInMemoryScheme returns the scheme of the simulated workload clusters'
// objects, as the development provider's own manager builds it.
func newInMemoryScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		cloudv1.AddToScheme, corev1.AddToScheme, appsv1.AddToScheme, rbacv1.AddToScheme,
		storagev1.AddToScheme, apiextensionsv1.AddToScheme, policyv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the in-memory scheme: %w", err)
		}
	}
	return scheme, nil
}

// controllers is the running manager with the Cluster API and in-memory
// infrastructure controllers, and the in-memory workload clusters' server.
type controllers struct {
	// core runs Cluster API's core controllers (Cluster, Machine,
	// MachineSet, MachineDeployment, ClusterClass, topology) in this
	// manager; without it they run elsewhere (bin/capi-core), and this
	// manager runs only the kubeadm control plane and bootstrap
	// controllers and the in-memory infrastructure.
	core bool
	// kcp runs Cluster API's KubeadmControlPlane controller in this
	// manager; without it it runs elsewhere (bin/capi-kcp).
	kcp          bool
	conversion   *conversionServer // nil when the environment converts the infrastructure kinds
	cancel       context.CancelFunc
	started      bool       // the manager was started: done will receive its result
	done         chan error // the manager's result
	mux          *inmemoryserver.WorkloadClustersMux
	inMemory     inmemoryruntime.Manager
	clusterCache clustercache.ClusterCache
}

// startControllers builds the manager, registers every controller (with
// core, Cluster API's core controllers too; with kcp, its
// KubeadmControlPlane controller too) and starts it; it returns once
// the manager's cache has started. ctx bounds the start only.
func startControllers(ctx context.Context, adminConfig *rest.Config, scheme *runtime.Scheme, core, kcp bool) (_ *controllers, retErr error) {
	runCtx, cancel := context.WithCancel(context.Background())
	c := &controllers{core: core, kcp: kcp, cancel: cancel, done: make(chan error, 1)}
	defer func() {
		if retErr != nil {
			if err := c.stop(); err != nil {
				retErr = errors.Join(retErr, err)
			}
		}
	}()

	cfg := rest.CopyConfig(adminConfig)
	cfg.QPS, cfg.Burst = apiQPS, apiBurst
	cfg.UserAgent = controllerName

	// The webhook server only serves conversions, and only when needed
	// (see conversion.go); otherwise it is never started.
	var webhookOpts webhook.Options
	if !environmentConvertsInfrastructure() {
		var err error
		if c.conversion, err = newConversionServer(); err != nil {
			return nil, err
		}
		webhookOpts = c.conversion.options()
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Logger: ctrl.Log.WithName(controllerName),
		Cache:  managerCacheOptions(scheme),
		Client: setup.ManagerClientOptions(),
		Controller: config.Controller{
			UsePriorityQueue: ptr.To(feature.Gates.Enabled(feature.PriorityQueue)),
			// A process may run one sandbox after another (tests):
			// controller names need only be unique within a manager.
			SkipNameValidation: ptr.To(true),
		},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhookOpts),
	})
	if err != nil {
		return nil, fmt.Errorf("creating the controller manager: %w", err)
	}
	if err := c.setup(runCtx, mgr); err != nil {
		return nil, err
	}
	if c.conversion != nil {
		if err := c.conversion.register(mgr); err != nil {
			return nil, err
		}
	}

	c.started = true
	go func() { c.done <- mgr.Start(runCtx) }()
	startCtx, cancelStart := context.WithTimeout(ctx, managerStartTimeout)
	defer cancelStart()
	synced := make(chan bool, 1)
	go func() { synced <- mgr.GetCache().WaitForCacheSync(startCtx) }()
	select {
	case err := <-c.done:
		c.done <- err // keep it for stop
		return nil, fmt.Errorf("the controller manager stopped while starting: %w", err)
	case ok := <-synced:
		if !ok {
			return nil, fmt.Errorf("the controller manager's cache did not start: %w", startCtx.Err())
		}
	}
	if c.conversion != nil {
		admin, err := client.New(adminConfig, client.Options{Scheme: scheme})
		if err != nil {
			return nil, fmt.Errorf("creating an admin client: %w", err)
		}
		if err := c.conversion.waitAndPointCRDs(startCtx, mgr, admin); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// managerCacheOptions are Cluster API's cache options for its managers,
// except for Secrets: Cluster API's own transform drops the data of every
// Secret but kubeconfigs, which suits its core manager, while the control
// plane controller in this shared manager reads the cluster CA secrets
// (<cluster>-ca) through the same cache.
func managerCacheOptions(scheme *runtime.Scheme) cache.Options {
	opts := setup.ManagerCacheOptions(scheme, controllerName, "", syncPeriod)
	for obj, byObject := range opts.ByObject {
		if _, ok := obj.(*corev1.Secret); ok {
			byObject.Transform = cache.TransformStripManagedFields()
			opts.ByObject[obj] = byObject
		}
	}
	return opts
}

// setup registers the indexes, the cluster cache and every controller with
// mgr, and starts the in-memory runtime and its workload cluster server.
// ctx lives as long as the controllers.
func (c *controllers) setup(ctx context.Context, mgr ctrl.Manager) error {
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return fmt.Errorf("adding Cluster API's indexes: %w", err)
	}
	secretCachingClient, err := setup.CreateSecretCachingClient(mgr)
	if err != nil {
		return fmt.Errorf("creating the secret caching client: %w", err)
	}
	opts := controller.Options{MaxConcurrentReconciles: concurrency}
	c.clusterCache, err = clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretCachingClient,
		Cache:        setup.ClusterCacheCacheOptions(),
		Client:       setup.ClusterCacheClientOptions(controllerName, clusterCacheQPS, clusterCacheBurst),
	}, opts)
	if err != nil {
		return fmt.Errorf("setting up the cluster cache: %w", err)
	}
	// A workload cluster's API server starts with its first control-plane
	// machine, some seconds after the cluster cache first tries it; with
	// Cluster API's 30 s between attempts, every new cluster would wait
	// that long for nothing.
	if cc, ok := c.clusterCache.(interface{ SetConnectionCreationRetryInterval(time.Duration) }); ok {
		cc.SetConnectionCreationRetryInterval(connectionRetryInterval)
	}

	inMemoryScheme, err := newInMemoryScheme()
	if err != nil {
		return err
	}
	inMemoryManager := inmemoryruntime.NewManager(inMemoryScheme)
	if err := inMemoryManager.Start(ctx); err != nil {
		return fmt.Errorf("starting the in-memory runtime: %w", err)
	}
	c.inMemory = inMemoryManager
	// Each workload cluster gets the port its DevCluster names (see
	// CreateCluster); the range only matters for a DevCluster without one.
	// Debug port 0: parallel sandboxes must not clash on a fixed port.
	c.mux, err = inmemoryserver.NewWorkloadClustersMux(inMemoryManager, workloadHost, inmemoryserver.CustomPorts{
		MinPort: portRangeMin, MaxPort: portRangeMax, DebugPort: 0,
	})
	if err != nil {
		return fmt.Errorf("starting the in-memory workload cluster server: %w", err)
	}
	runtimeClient, err := container.NewFakeClient()
	if err != nil {
		return fmt.Errorf("creating the fake container runtime: %w", err)
	}

	reconcilers := []struct {
		name  string
		core  bool // one of Cluster API's core controllers
		setup func() error
	}{
		{"Cluster", true, func() error {
			return (&cluster.Reconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: c.clusterCache,
				RemoteConnectionGracePeriod: remoteConnectionGracePeriod,
			}).SetupWithManager(ctx, mgr, opts)
		}},
		{"Machine", true, func() error {
			return (&machine.Reconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: c.clusterCache,
				RemoteConditionsGracePeriod: remoteConditionsGracePeriod,
			}).SetupWithManager(ctx, mgr, opts)
		}},
		{"MachineSet", true, func() error {
			return (&machineset.Reconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: c.clusterCache,
				PreflightChecks: sets.New(clusterv1.MachineSetPreflightCheckAll),
			}).SetupWithManager(ctx, mgr, opts)
		}},
		{"MachineDeployment", true, func() error {
			return (&machinedeployment.Reconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			}).SetupWithManager(ctx, mgr, opts)
		}},
		// ClusterClass and managed topologies (feature gate ClusterTopology,
		// see featureGates); no Runtime Extension runs in this manager, so
		// no RuntimeClient: Cluster API's runtime client cannot be imported,
		// and Options.RuntimeSDK runs these controllers in bin/capi-core.
		{"ClusterClass", true, func() error {
			return (&clusterclass.Reconciler{Client: mgr.GetClient()}).SetupWithManager(ctx, mgr, opts)
		}},
		{"topology/cluster", true, func() error {
			return (&topologycluster.Reconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: c.clusterCache,
			}).SetupWithManager(ctx, mgr, opts)
		}},
		{"topology/machinedeployment", true, func() error {
			return (&topologymachinedeployment.Reconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			}).SetupWithManager(ctx, mgr, opts)
		}},
		{"topology/machineset", true, func() error {
			return (&topologymachineset.Reconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			}).SetupWithManager(ctx, mgr, opts)
		}},
		{"KubeadmControlPlane", false, func() error {
			return (&kubeadmcontrolplane.Reconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), SecretCachingClient: secretCachingClient,
				ClusterCache:    c.clusterCache,
				EtcdDialTimeout: etcdDialTimeout, EtcdCallTimeout: etcd.DefaultCallTimeout, EtcdLogger: zap.NewNop(),
				RemoteConditionsGracePeriod: remoteConditionsGracePeriod,
			}).SetupWithManager(ctx, mgr, controller.Options{
				MaxConcurrentReconciles: concurrency,
				// As Cluster API's own manager: a reconcile talks to every etcd member.
				ReconciliationTimeout: 3 * time.Minute,
			})
		}},
		{"KubeadmConfig", false, func() error {
			return (&kubeadmconfig.Reconciler{
				Client: mgr.GetClient(), SecretCachingClient: secretCachingClient,
				// Without it the controller dereferences nil when it
				// resolves a machine's control plane version.
				APIReader:    mgr.GetAPIReader(),
				ClusterCache: c.clusterCache, TokenTTL: kubeadmconfig.DefaultTokenTTL,
			}).SetupWithManager(ctx, mgr, opts)
		}},
		{"DevCluster", false, func() error {
			return (&devcontrollers.DevClusterReconciler{
				Client: mgr.GetClient(), ContainerRuntime: runtimeClient,
				InMemoryManager: inMemoryManager, APIServerMux: c.mux,
			}).SetupWithManager(ctx, mgr, opts)
		}},
		{"DevMachine", false, func() error {
			return (&devcontrollers.DevMachineReconciler{
				Client: mgr.GetClient(), ContainerRuntime: runtimeClient, ClusterCache: c.clusterCache,
				InMemoryManager: inMemoryManager, APIServerMux: c.mux,
			}).SetupWithManager(ctx, mgr, opts)
		}},
	}
	for _, r := range reconcilers {
		if r.core && !c.core || r.name == "KubeadmControlPlane" && !c.kcp {
			continue
		}
		if err := r.setup(); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", r.name, err)
		}
	}
	return nil
}

// setKubeletVersion sets the kubelet version node reports in the
// simulated workload cluster namespace/cluster (the in-memory
// infrastructure's resource group of that Cluster).
func (c *controllers) setKubeletVersion(ctx context.Context, namespace, cluster, node, version string) error {
	cl := c.inMemory.GetResourceGroup(namespace + "/" + cluster).GetClient()
	n := &corev1.Node{}
	if err := cl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return fmt.Errorf("reading node %s of %s/%s: %w", node, namespace, cluster, err)
	}
	n.Status.NodeInfo.KubeletVersion = version
	if err := cl.Update(ctx, n); err != nil {
		return fmt.Errorf("updating node %s of %s/%s: %w", node, namespace, cluster, err)
	}
	return nil
}

// stop stops the manager (and with it every controller), the cluster
// cache's connections and the workload cluster server, and waits for them.
func (c *controllers) stop() error {
	var errs []error
	c.cancel()
	if c.started {
		select {
		case err := <-c.done:
			if err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("controller manager: %w", err))
			}
		case <-time.After(managerStopTimeout):
			errs = append(errs, fmt.Errorf("the controller manager did not stop within %s", managerStopTimeout))
		}
	}
	// The cluster cache keeps its connections to the workload clusters in
	// a context of its own.
	if s, ok := c.clusterCache.(interface{ Shutdown() }); ok {
		s.Shutdown()
	}
	if c.mux != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.mux.Shutdown(ctx); err != nil && !strings.Contains(err.Error(), "closed") {
			errs = append(errs, fmt.Errorf("stopping the in-memory workload cluster server: %w", err))
		}
	}
	if err := c.conversion.cleanup(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
