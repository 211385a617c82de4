// Command cert-manager-controller runs cert-manager's own controllers, from
// the cert-manager module this module pins, for the test environment: the
// Certificate controllers (trigger, key manager, request manager, issuing,
// readiness, revision manager), the CertificateRequest approver and signers
// of CA and SelfSigned issuers, and the Issuer and ClusterIssuer
// controllers. It wires them as cert-manager's controller binary does (one
// ContextFactory, the registry of known controllers, shared informers)
// without what a CA or SelfSigned issuer does not need: no ACME, Vault or
// Venafi, no ingress or Gateway shims, no metrics unless asked for.
//
// cert-manager publishes its binaries' main packages as modules of their
// own, which the module proxy does not always serve; the controllers live
// in the root module, which this one imports.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cert-manager/cert-manager/pkg/controller"
	crapprover "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	// The issuer types whose Issuers and ClusterIssuers the issuers
	// controllers set up.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"

	"github.com/rollout-guard/rollout-guard/hack/tools/cert-manager/internal/command"
)

const name = "cert-manager-controller"

// controllers are the controllers this binary runs, by the names they
// register under (cert-manager's --controllers names them alike).
var controllers = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	crapprover.ControllerName,
	crca.CRControllerName,
	crselfsigned.CRControllerName,
	trigger.ControllerName,
	issuing.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

// The defaults of cert-manager's controller configuration that this binary
// keeps (cert-manager defines them in a package of its own module only).
var (
	copiedAnnotationPrefixes = []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"}
	leaseDuration            = 60 * time.Second
	renewDeadline            = 40 * time.Second
	retryPeriod              = 15 * time.Second
	healthzLeaderTimeout     = 20 * time.Second
)

type options struct {
	*command.Command
	namespace                string
	clusterResourceNamespace string
	leaderElect              bool
	leaderElectionNamespace  string
	healthzAddress           string
	metricsAddress           string
	workers                  int
	qps                      float64
	burst                    int
}

func main() {
	command.Main(name, func() error {
		o := options{Command: command.New(name, "cert-manager's controllers for CA and SelfSigned issuers.")}
		fs := o.Flags
		fs.StringVar(&o.namespace, "namespace", "", "Watch only this namespace (then ClusterIssuers are not served). Default: every namespace.")
		fs.StringVar(&o.clusterResourceNamespace, "cluster-resource-namespace", "kube-system", "Namespace of the Secrets that ClusterIssuers refer to.")
		fs.BoolVar(&o.leaderElect, "leader-elect", false, "Take part in leader election (Lease cert-manager-controller) before running the controllers.")
		fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "kube-system", "Namespace of the leader election Lease.")
		fs.StringVar(&o.healthzAddress, "healthz-listen-address", "", "host:port of the /livez endpoint; empty: none.")
		fs.StringVar(&o.metricsAddress, "metrics-listen-address", "", "host:port of the Prometheus /metrics endpoint (plain HTTP); empty: none.")
		fs.IntVar(&o.workers, "concurrent-workers", 5, "Workers of each controller.")
		fs.Float64Var(&o.qps, "kube-api-qps", 20, "Queries per second to the API server when it has no API Priority and Fairness.")
		fs.IntVar(&o.burst, "kube-api-burst", 50, "Burst of queries to the API server when it has no API Priority and Fairness.")
		if ok, err := o.Parse(os.Args[1:], os.Stdout); !ok || err != nil {
			return err
		}
		return o.run(command.SignalContext())
	})
}

// run builds the controllers' context, serves the health and metrics
// endpoints, waits for the lease if asked to, then runs the controllers
// and the shared informers until ctx ends.
func (o options) run(ctx context.Context) error {
	log := logf.FromContext(ctx, "controller")
	ctx = logf.NewContext(ctx, log)
	log.Info("starting cert-manager's controllers", "version", command.Version())

	enabled := slices.Clone(controllers)
	if o.namespace != "" {
		enabled = slices.DeleteFunc(enabled, func(n string) bool { return n == clusterissuers.ControllerName })
	}
	constructors := controller.Known()
	for _, n := range enabled {
		if constructors[n] == nil {
			return fmt.Errorf("controller %s is not registered", n)
		}
	}

	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         o.Kubeconfig,
		KubernetesAPIQPS:   float32(o.qps),
		KubernetesAPIBurst: o.burst,
		Namespace:          o.namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace: o.clusterResourceNamespace,
		},
		CertificateOptions: controller.CertificateOptions{
			CopiedAnnotationPrefixes:                 copiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	cmctx, err := factory.Build()
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	health := healthz.NewServer(healthzLeaderTimeout)
	if o.healthzAddress != "" {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.healthzAddress)
		if err != nil {
			return fmt.Errorf("listening for /livez on %s: %w", o.healthzAddress, err)
		}
		log.Info("serving /livez", "address", ln.Addr().String())
		g.Go(func() error { return health.Start(ctx, ln) })
	}
	if o.metricsAddress != "" {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.metricsAddress)
		if err != nil {
			return fmt.Errorf("listening for /metrics on %s: %w", o.metricsAddress, err)
		}
		certmanager := cmctx.SharedInformerFactory.Certmanager().V1()
		cmctx.Metrics.SetupCertificateCollector(certmanager.Certificates().Lister())
		cmctx.Metrics.SetupIssuerCollector(certmanager.Issuers().Lister())
		if slices.Contains(enabled, clusterissuers.ControllerName) {
			cmctx.Metrics.SetupClusterIssuerCollector(certmanager.ClusterIssuers().Lister())
		}
		server := cmctx.Metrics.NewServer(ln)
		log.Info("serving /metrics", "address", ln.Addr().String())
		g.Go(func() error {
			if err := server.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
		g.Go(func() error {
			<-ctx.Done()
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return server.Shutdown(shutdown)
		})
	}

	if o.leaderElect {
		elected := make(chan struct{})
		g.Go(func() error { return o.leaderElection(ctx, factory, health, elected) })
		select {
		case <-elected:
		case <-ctx.Done():
			return g.Wait()
		}
	}

	for _, n := range enabled {
		c, err := constructors[n](factory)
		if err != nil {
			return errors.Join(fmt.Errorf("constructing controller %s: %w", n, err), g.Wait())
		}
		g.Go(func() error {
			log.Info("starting controller", "controller", n)
			return c.Run(o.workers, ctx)
		})
	}
	log.Info("running controllers", "controllers", strings.Join(enabled, ","))
	cmctx.SharedInformerFactory.Start(ctx.Done())
	cmctx.KubeSharedInformerFactory.Start(ctx.Done())
	cmctx.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())

	err = g.Wait()
	cmctx.HTTP01ResourceMetadataInformersFactory.Shutdown()
	cmctx.KubeSharedInformerFactory.Shutdown()
	cmctx.SharedInformerFactory.Shutdown()
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("controllers stopped")
	return nil
}

// leaderElection takes part in the election of the Lease that cert-manager's
// controller binary uses, closes elected once this process leads, and
// returns an error if it loses the lease before ctx ends.
func (o options) leaderElection(ctx context.Context, factory *controller.ContextFactory, health *healthz.Server, elected chan<- struct{}) error {
	lctx, err := factory.Build("leader-election")
	if err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("leader election identity: %w", err)
	}
	lock, err := resourcelock.NewWithLabels(resourcelock.LeasesResourceLock, o.leaderElectionNamespace, "cert-manager-controller",
		lctx.Client.CoreV1(), lctx.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: fmt.Sprintf("%s-%d-external-cert-manager-controller", host, os.Getpid()), EventRecorder: lctx.Recorder},
		map[string]string{"app.kubernetes.io/managed-by": "cert-manager"})
	if err != nil {
		return fmt.Errorf("creating the leader election lock: %w", err)
	}
	lost := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        health.LeaderHealthzAdaptor,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(elected) },
			OnStoppedLeading: func() { close(lost) },
		},
	})
	if err != nil {
		return err
	}
	le.Run(ctx)
	if ctx.Err() == nil {
		select {
		case <-lost:
			return errors.New("leader election lost")
		default:
		}
	}
	return nil
}
