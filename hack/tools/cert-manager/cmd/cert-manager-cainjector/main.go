// Command cert-manager-cainjector runs cert-manager's CA injector, from the
// cert-manager module this module pins, for the test environment: the
// injectors of cert-manager's own pkg/controller/cainjector on a
// controller-runtime manager, as cert-manager's cainjector binary sets them
// up. They write the CA of the Certificate (or Secret) that an object's
// cert-manager.io/inject-ca-from (or inject-ca-from-secret) annotation
// names into its caBundle: ValidatingWebhookConfigurations,
// MutatingWebhookConfigurations, CustomResourceDefinitions (conversion
// webhook) and APIServices, each of which a flag can turn off.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rollout-guard/rollout-guard/hack/tools/cert-manager/internal/command"
)

const name = "cert-manager-cainjector"

// certificatesCRD is the CRD the Certificate data source reads through.
const certificatesCRD = "certificates.cert-manager.io"

type options struct {
	*command.Command
	namespace               string
	leaderElect             bool
	leaderElectionNamespace string
	healthAddress           string
	metricsAddress          string
	certificatesDataSource  bool
	injectables             map[string]*bool
}

func main() {
	command.Main(name, func() error {
		o := options{Command: command.New(name, "cert-manager's CA injector."), injectables: map[string]*bool{}}
		fs := o.Flags
		fs.StringVar(&o.namespace, "namespace", "", "Inject only into objects of this namespace (and cluster-scoped ones). Default: every namespace.")
		fs.BoolVar(&o.leaderElect, "leader-elect", false, "Take part in leader election (Lease cert-manager-cainjector-leader-election) before injecting.")
		fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "kube-system", "Namespace of the leader election Lease.")
		fs.StringVar(&o.healthAddress, "health-probe-bind-address", "0", "host:port of the /healthz and /readyz endpoints; 0: none.")
		fs.StringVar(&o.metricsAddress, "metrics-bind-address", "0", "host:port of the Prometheus /metrics endpoint (plain HTTP); 0: none.")
		fs.BoolVar(&o.certificatesDataSource, "enable-certificates-data-source", true, "Read CAs from Certificates (cert-manager.io/inject-ca-from); waits for the Certificate CRD.")
		for _, kind := range []struct{ flag, name string }{
			{"validatingwebhookconfigurations", cainjector.ValidatingWebhookConfigurationName},
			{"mutatingwebhookconfigurations", cainjector.MutatingWebhookConfigurationName},
			{"customresourcedefinitions", cainjector.CustomResourceDefinitionName},
			{"apiservices", cainjector.APIServiceName},
		} {
			o.injectables[kind.name] = fs.Bool("enable-"+kind.flag+"-injectable", true, "Inject CA bundles into "+kind.flag+".")
		}
		if ok, err := o.Parse(os.Args[1:], os.Stdout); !ok || err != nil {
			return err
		}
		return o.run(command.SignalContext())
	})
}

// run starts a controller-runtime manager with cert-manager's injectors and
// runs it until ctx ends.
func (o options) run(ctx context.Context) error {
	log := logf.FromContext(ctx, "cainjector")
	ctrl.SetLogger(log)
	ctx = logf.NewContext(ctx, log)
	log.Info("starting cert-manager's CA injector", "version", command.Version())

	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cfg = util.RestConfigWithUserAgent(cfg, "cainjector")

	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(apiregistrationv1.AddToScheme(scheme))

	var namespaces map[string]cache.Config
	if o.namespace != "" {
		namespaces = map[string]cache.Config{o.namespace: {}}
	}
	leaseDuration, renewDeadline, retryPeriod := 60*time.Second, 40*time.Second, 15*time.Second
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache:  cache.Options{ReaderFailOnMissingInformer: true, DefaultNamespaces: namespaces},
		// As cert-manager's cainjector: Secrets are read from the API
		// server, never cached (the injectors watch their metadata only).
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection:                o.leaderElect,
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionLabels:          map[string]string{"app.kubernetes.io/managed-by": "cert-manager-cainjector"},
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaseDuration:                 &leaseDuration,
		RenewDeadline:                 &renewDeadline,
		RetryPeriod:                   &retryPeriod,
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddress},
		HealthProbeBindAddress:        o.healthAddress,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}

	if o.certificatesDataSource {
		if err := waitForCertificatesCRD(ctx, mgr); err != nil {
			return err
		}
	}
	enabled := map[string]bool{}
	for kind, on := range o.injectables {
		enabled[kind] = *on
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    o.namespace,
		EnableCertificatesDataSource: o.certificatesDataSource,
		EnabledReconcilersFor:        enabled,
	}); err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	log.Info("CA injector stopped")
	return nil
}

// waitForCertificatesCRD waits, as cert-manager's cainjector does, up to
// five minutes for the Certificate CRD, without which the manager's
// Certificate watch cannot start.
func waitForCertificatesCRD(ctx context.Context, mgr ctrl.Manager) error {
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	log := logf.FromContext(ctx)
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := direct.Get(ctx, types.NamespacedName{Name: certificatesCRD}, &apiextensionsv1.CustomResourceDefinition{})
		if apierrors.IsNotFound(err) {
			log.Info("waiting for the CRD", "crd", certificatesCRD)
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s: %w", certificatesCRD, err)
	}
	return nil
}
