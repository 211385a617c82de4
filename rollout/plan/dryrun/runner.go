package dryrun

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	topologycluster "sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster"
	"sigs.k8s.io/cluster-api/feature"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ErrNoWorkloadCluster is what the run answers when Cluster API's code asks
// for a workload cluster's client (to see whether a MachinePool's nodes are
// upgrading): the preview reads the management cluster only.
var ErrNoWorkloadCluster = errors.New("the preview reads the management cluster only, not workload clusters")

// Runner runs Cluster API's ClusterClass and Cluster topology reconcilers
// with every write a server-side dry run. It is made once per command and
// runs one ClusterClass or Cluster at a time.
type Runner struct {
	c     *capturingClient
	class *clusterclass.Reconciler
	topo  *topologycluster.Reconciler
}

// Scheme is the scheme the reconcilers read and write with: Kubernetes',
// Cluster API's core, kubeadm bootstrap and control plane, and CRDs (read
// for the contract versions of templates).
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, controlplanev1.AddToScheme, bootstrapv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building the scheme of Cluster API's reconcilers: %w", err)
		}
	}
	return s, nil
}

// NewRunner sets up Cluster API's reconcilers on a manager that is never
// started (no watch, no cache, no event sent), reading and writing through
// a client of cfg whose writes are server-side dry runs.
func NewRunner(ctx context.Context, cfg *rest.Config, mapper meta.RESTMapper) (*Runner, error) {
	// The topology controller runs with the ClusterTopology gate on; the
	// Runtime SDK stays off here, so a class that needs an extension
	// (external patches, an upgrade-plan extension) fails its computation
	// with Cluster API's own error instead of calling it.
	if err := feature.MutableGates.Set(string(feature.ClusterTopology) + "=true"); err != nil {
		return nil, fmt.Errorf("enabling Cluster API's ClusterTopology feature gate: %w", err)
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	direct, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("connecting Cluster API's reconcilers to the API server: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		Scheme:                 scheme,
		MapperProvider:         func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mapper, nil },
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 logr.Discard(),
		// Events the reconcilers emit go nowhere: the broadcaster is never
		// started.
		EventBroadcaster: record.NewBroadcaster(),
		Controller:       config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("setting up Cluster API's reconcilers: %w", err)
	}
	r := &Runner{c: newCapturingClient(direct)}
	r.class = &clusterclass.Reconciler{Client: r.c}
	r.topo = &topologycluster.Reconciler{Client: r.c, APIReader: r.c, ClusterCache: managementOnly{}}
	if err := r.topo.SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
		return nil, fmt.Errorf("setting up Cluster API's topology reconciler: %w", err)
	}
	return r, nil
}

// Edit has the runs read obj (a Cluster or a ClusterClass as it would be
// after the change) in place of the stored one.
func (r *Runner) Edit(obj client.Object) error { return r.c.edit(obj) }

// ReconcileClass runs Cluster API's ClusterClass reconciler on the edited
// ClusterClass key (Edit first), so that its status (variables, conditions,
// observed generation) is what the topology reconciler reads, and returns
// the class so reconciled. Its writes (owner references on templates) are
// not sent.
func (r *Runner) ReconcileClass(ctx context.Context, key client.ObjectKey) (*clusterv1.ClusterClass, error) {
	r.c.reset(false)
	if _, err := r.class.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		return nil, fmt.Errorf("Cluster API's ClusterClass reconciler: %w", err)
	}
	class := &clusterv1.ClusterClass{}
	if err := r.c.Get(ctx, key, class); err != nil {
		return nil, err
	}
	return class, nil
}

// ReconcileCluster runs Cluster API's topology reconciler on the Cluster
// key, against the stored objects and the edited ones, and returns the
// writes it made (each a dry run the API server answered) and the error the
// reconciler returned: a write refused stops it there, as it stops the
// topology controller.
func (r *Runner) ReconcileCluster(ctx context.Context, key client.ObjectKey) ([]Write, error) {
	r.c.reset(true)
	_, err := r.topo.Reconcile(ctx, reconcile.Request{NamespacedName: key})
	return r.c.takeWrites(), err
}

// managementOnly is the ClusterCache of the runs: no connection to workload
// clusters.
type managementOnly struct{ clustercache.ClusterCache }

func (managementOnly) GetClient(context.Context, client.ObjectKey) (client.Client, error) {
	return nil, ErrNoWorkloadCluster
}

func (managementOnly) GetReader(context.Context, client.ObjectKey) (client.Reader, error) {
	return nil, ErrNoWorkloadCluster
}

func (managementOnly) GetUncachedClient(context.Context, client.ObjectKey) (client.Client, error) {
	return nil, ErrNoWorkloadCluster
}

func (managementOnly) GetClusterSource(string, func(context.Context, client.Object) []ctrl.Request, ...clustercache.GetClusterSourceOption) source.Source {
	return source.Func(func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request]) error { return nil })
}
