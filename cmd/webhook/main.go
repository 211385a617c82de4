// Command webhook is rollout-guard's admission webhook server: it refuses
// MachineDeployment, MachinePool, KubeadmControlPlane and Cluster edits that break the
// version-skew or etcd-downgrade policy. Flags only; the work lives in package
// webhooks.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/arming"
	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/metricsauth"
	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/upgradehold"
	"github.com/rollout-guard/rollout-guard/waves"
	"github.com/rollout-guard/rollout-guard/webhooks"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type options struct {
	stampKeySecret string
	webhookHost    string
	webhookPort    int
	certDir        string
	clientCAName   string
	enforcement    string
	probeAddr      string
	metricsAddr    string
	pprofAddr      string
	leaderElect    bool
	leaderElectNS  string
	overrideGroups string
	controlPlanes  string
	historyLimit   int
	pruneBatch     int
	revisionIndex  bool
	shutdownDelay  time.Duration
	armNamespace   string
	waveHold       bool
	waveSoak       time.Duration
	printVersion   bool
	zap            zap.Options
}

func main() {
	var o options
	fs := flag.CommandLine
	fs.StringVar(&o.webhookHost, "webhook-host", "", "address the admission webhook server listens on (empty: all interfaces)")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the admission webhook server (HTTPS)")
	fs.StringVar(&o.certDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory holding tls.crt and tls.key; new files are picked up without a restart")
	fs.StringVar(&o.clientCAName, "client-ca-name", "", "name of a file in --cert-dir holding the PEM certificates of the CAs that sign the admission webhook server's clients: when set, the server completes a TLS handshake only with a client that presents a certificate signed by one of them, as kube-apiserver does when its admission configuration gives it a kubeconfig with a client certificate for the guard (docs/client-certificates.md); read once at start, so a new client CA takes a restart (a new serving certificate does not); the metrics and health endpoints are not affected; empty: any client may connect")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address of the HTTPS metrics endpoint (authenticated and authorized through the API server); 0 disables it")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address of Go's profiling endpoints (/debug/pprof/: heap, CPU, goroutines) to see where the guard's memory or CPU goes; served without authentication, so bind it to localhost (e.g. 127.0.0.1:8082) and reach it with kubectl port-forward; 0 disables it")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader among replicas for background work (admission is served by every replica)")
	fs.StringVar(&o.leaderElectNS, "leader-election-namespace", "", "namespace of the leader-election lease (default: the pod's namespace)")
	fs.StringVar(&o.overrideGroups, "override-groups", "", "comma-separated groups whose members may let one refused change through with the "+revisions.AnnotationOverride+" annotation (empty: nobody)")
	fs.StringVar(&o.controlPlanes, "control-plane-kinds", "", "comma-separated control-plane kinds of other providers to police through Cluster API's control-plane contract, as KIND.GROUP (e.g. KthreesControlPlane.controlplane.cluster.x-k8s.io): the guard judges and records their spec.version and spec.machineTemplate, given read access and their webhook registrations (docs/control-planes.md)")
	fs.IntVar(&o.historyLimit, "history-limit", history.DefaultLimit, "revisions kept per MachineDeployment, MachinePool or KubeadmControlPlane; older ones are pruned, never the live one nor those that raised a control plane's highest versions")
	fs.IntVar(&o.pruneBatch, "prune-batch", history.DefaultPruneBatch, "an object's history is pruned back to --history-limit once it holds this many revisions more, in one request; 1 prunes at every revision beyond the limit (one request each)")
	fs.DurationVar(&o.shutdownDelay, "shutdown-delay", 0, "on SIGTERM, keep serving admission this long while /readyz fails, so the Service stops sending new connections before the server stops listening (the API server does not retry a webhook call that fails to connect)")
	fs.BoolVar(&o.revisionIndex, "revision-index", true, "keep the records of the guard's RolloutRevisions (their labels and annotations, not their data) in memory, so recording a revision needs no read from the API server; its live heap per revision is in docs/install.md, Sizing. false reads them from the API server instead: a GET and a List per recorded revision, a List per object when the guard starts")
	fs.StringVar(&o.enforcement, "enforcement", string(webhooks.EnforcementDeny), "what the validating webhooks do with a change the policy refuses: deny refuses it; warn allows it with the refusal as a warning and counts it in rollout_guard_admission_decisions_total{outcome=\"warned\"}, to see what the guard would refuse before it refuses anything (docs/install.md, Adopting the guard in stages); history is recorded either way")
	fs.StringVar(&o.armNamespace, "arm-namespace", "", "namespace of the RoleBinding "+arming.Name+" the guard creates once it serves, arming its webhooks (their match condition "+arming.ConditionName+" names this namespace: docs/upgrading.md, Arming); default: the pod's namespace")
	fs.BoolVar(&o.waveHold, "wave-hold", false, "serve Cluster API's BeforeClusterUpgrade Runtime Extension on the webhook port (discovery at "+upgradehold.DiscoveryPath+", handler "+upgradehold.HandlerName+"): a topology Cluster labelled "+waves.Label+"=N starts upgrading to a version only once every Cluster of a lower wave in its namespace whose topology is at that version is done upgrading and has stayed so for --wave-soak; until then Cluster API holds it and says why in its TopologyReconciled condition. Needs Cluster API's RuntimeSDK feature gate and an ExtensionConfig (config/wave-hold; docs/install-gitops.md, Waves for GitOps). false: those paths are not served")
	fs.DurationVar(&o.waveSoak, "wave-soak", 5*time.Minute, "with --wave-hold, how long a Cluster of an earlier wave must have stayed done upgrading (machines up to date and ready, nothing rolling out or remediated, as its conditions say) before a later wave starts its upgrade to the same version; 0 starts it as soon as the earlier wave is done")
	fs.StringVar(&o.stampKeySecret, "stamp-key-secret", webhooks.StampKeySecretName, "name of the Secret, in the guard's namespace (--arm-namespace), holding the key the guard signs revision stamps with: stamps it did not sign (an object created while it was down) are not history; the guard creates the Secret, or fills it when it holds no key, and needs no rights on any other Secret (config/rbac/stamp_key_role.yaml)")
	fs.BoolVar(&o.printVersion, "version", false, "print the version and exit")
	o.zap.BindFlags(fs)
	flag.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\nrollout-guard admission webhook server for Cluster API.\n\nFlags:\n", os.Args[0])
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nEnvironment:\n  GOGC\tgarbage-collector target (default %d here, against Go's 100: less memory for more collector CPU; see docs/install.md, Sizing)\n", defaultGCPercent)
	}
	flag.Parse()
	collectAtHalfGrowth()
	if o.printVersion {
		fmt.Println(version)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	var draining atomic.Bool
	if err := run(signalContext(o.shutdownDelay, &draining), o, &draining); err != nil {
		ctrl.Log.Error(err, "rollout-guard webhook stopped")
		os.Exit(1)
	}
}

// signalContext returns a context cancelled delay after the first SIGTERM or
// SIGINT, and sets draining at that signal; a second signal exits at once.
// It replaces ctrl.SetupSignalHandler, which cancels at the first signal.
func signalContext(delay time.Duration, draining *atomic.Bool) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		draining.Store(true)
		ctrl.Log.WithName("shutdown").Info("stopping: /readyz fails from now on; admission is served until the shutdown delay ends", "delay", delay.String())
		select {
		case <-time.After(delay):
		case <-signals:
			os.Exit(1)
		}
		cancel()
		<-signals
		os.Exit(1)
	}()
	return ctx
}

func run(ctx context.Context, o options, draining *atomic.Bool) error {
	log := ctrl.Log.WithName("setup")
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme, controlplanev1.AddToScheme, rgv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return fmt.Errorf("building the scheme: %w", err)
		}
	}
	controlPlaneKinds, err := policy.ParseControlPlaneKinds(o.controlPlanes)
	if err != nil {
		return err
	}
	enforcement, err := webhooks.ParseEnforcement(o.enforcement)
	if err != nil {
		return err
	}
	if o.waveSoak < 0 {
		return fmt.Errorf("--wave-soak=%s: a soak time cannot be negative", o.waveSoak)
	}
	armNamespace := o.armNamespace
	if armNamespace == "" {
		if armNamespace, err = arming.PodNamespace(); err != nil {
			return err
		}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	// Arming watches its RoleBinding and Role with a client of its own,
	// outside the tracking below: they are no cache the policy reads.
	armCfg := rest.CopyConfig(cfg)
	// Watches sees the caches' watches end and resume, so the guard reads
	// live while its caches may be stale (after an API server restart).
	watches := webhooks.NewWatches()
	cfg.Wrap(watches.Wrap)
	// The content of a control plane or worker pool the cache saw last,
	// kept until the history reconciler records it.
	pending := history.NewPending(history.DefaultPendingCapacity)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Metrics: metricsserver.Options{
			BindAddress:    o.metricsAddr,
			SecureServing:  true,
			FilterProvider: metricsauth.NewFilter,
			TLSOpts:        []func(*tls.Config){minTLS12},
		},
		WebhookServer: webhooks.DrainingServer{Server: webhook.NewServer(webhook.Options{
			Host:    o.webhookHost,
			Port:    o.webhookPort,
			CertDir: o.certDir,
			// controller-runtime reads <CertDir>/<ClientCAName> when the
			// server starts and then requires and verifies client
			// certificates (tls.RequireAndVerifyClientCert).
			ClientCAName: o.clientCAName,
			TLSOpts:      []func(*tls.Config){minTLS12},
		})},
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "rollout-guard-leader",
		LeaderElectionNamespace: o.leaderElectNS,
		// The process exits once the manager stops, so handing the lease
		// over at once is safe and lets the next replica's reconciler
		// start without waiting for the lease to expire.
		LeaderElectionReleaseOnCancel: true,
		// The cache holds only what the guard reads; of RolloutRevisions
		// the revision index (history.Index) keeps the metadata of the
		// guard's own, their data is read live.
		Cache:  webhooks.CacheOptions(pending),
		Client: webhooks.ClientOptions(),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	// Read directly: a cached read would list and watch every Secret.
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating the client that reads the stamp key: %w", err)
	}
	stampKey, err := webhooks.LoadStampKey(ctx, direct, armNamespace, o.stampKeySecret)
	if err != nil {
		return err
	}
	self, err := webhooks.SelfUser(ctx, direct)
	if err != nil {
		return err
	}
	recorder := &history.Recorder{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()}
	if o.revisionIndex {
		if recorder.Index, err = history.NewIndex(mgr); err != nil {
			return err
		}
	}
	guard := webhooks.Options{
		OverrideGroups:    splitList(o.overrideGroups),
		Recorder:          recorder,
		Watches:           watches,
		ControlPlaneKinds: controlPlaneKinds,
		Enforcement:       enforcement,
		StampKey:          stampKey,
		Self:              self,
	}
	if err := webhooks.SetupWithManager(ctx, mgr, guard); err != nil {
		return err
	}
	if o.waveHold {
		// Uncached reads: the cache keeps no Cluster status, and the
		// decision reads its conditions.
		ext := &upgradehold.Extension{Reader: mgr.GetAPIReader(), Soak: o.waveSoak, Log: ctrl.Log.WithName("wave-hold")}
		ext.Register(mgr.GetWebhookServer())
	}
	// The reconcilers tell the stamps the guard wrote as its webhooks do.
	stamps := webhooks.StampsOf(guard)
	migrated := &history.MigrationDone{}
	historyKinds := kinds.WithRevisions()
	for _, gk := range controlPlaneKinds {
		kind, err := webhooks.ContractHistoryKind(mgr, gk)
		if err != nil {
			return err
		}
		historyKinds = append(historyKinds, kind)
	}
	for _, kind := range historyKinds {
		r := &history.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder, Kind: kind, Limit: o.historyLimit, PruneBatch: o.pruneBatch,
			Stamps: stamps, Migrated: migrated}
		if !webhooks.RevisionContentCached(kind.GVK) {
			r.ObjectReader = mgr.GetAPIReader()
			r.Pending = pending
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if err := mgr.Add(history.Migration{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: recorder, Done: migrated}); err != nil {
		return fmt.Errorf("adding the history migration: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding the health check: %w", err)
	}
	// Ready means: the webhook server is serving, the caches the policy
	// reads are filled, so no request is judged against an empty cluster,
	// and the API server serves the RolloutRevisions history is kept in.
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("adding the webhook readiness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("caches", webhooks.CachesReady(mgr)); err != nil {
		return fmt.Errorf("adding the cache readiness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("history-store", webhooks.HistoryStoreServed(mgr.GetRESTMapper())); err != nil {
		return fmt.Errorf("adding the history store readiness check: %w", err)
	}
	// Once serving, the guard arms its webhooks, and keeps them armed; until
	// then the API server does not call them, so a guard that never starts
	// blocks nothing.
	armWatch, err := client.NewWithWatch(armCfg, client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("the client that watches what arms the webhooks: %w", err)
	}
	armer := &arming.Armer{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Watch: armWatch, Namespace: armNamespace,
		Ready: []healthz.Checker{mgr.GetWebhookServer().StartedChecker(), webhooks.CachesReady(mgr), webhooks.HistoryStoreServed(mgr.GetRESTMapper())}, Log: ctrl.Log.WithName("arming")}
	if err := mgr.Add(armer); err != nil {
		return fmt.Errorf("adding the arming of the webhooks: %w", err)
	}
	if err := mgr.AddReadyzCheck("armed", armer.Checker); err != nil {
		return fmt.Errorf("adding the armed readiness check: %w", err)
	}
	// Not ready once shutdown began, so the Service takes the replica out
	// while it still serves (--shutdown-delay).
	if err := mgr.AddReadyzCheck("shutdown", webhooks.NotDraining(draining)); err != nil {
		return fmt.Errorf("adding the shutdown readiness check: %w", err)
	}
	log.Info("starting rollout-guard webhook", "version", version, "webhookPort", o.webhookPort, "certDir", o.certDir, "clientCAName", o.clientCAName,
		"overrideGroups", o.overrideGroups, "enforcement", enforcement, "controlPlaneKinds", o.controlPlanes, "historyLimit", o.historyLimit, "pruneBatch", o.pruneBatch, "revisionIndex", o.revisionIndex, "shutdownDelay", o.shutdownDelay.String(), "armNamespace", armNamespace,
		"waveHold", o.waveHold, "waveSoak", o.waveSoak.String())
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// minTLS12 refuses TLS 1.0 and 1.1 on the webhook and metrics servers,
// stated here rather than left to the Go release's default.
func minTLS12(c *tls.Config) { c.MinVersion = tls.VersionTLS12 }

// defaultGCPercent is the garbage collector's target when GOGC is not set.
const defaultGCPercent = 50

// collectAtHalfGrowth sets the collector's target to defaultGCPercent
// unless GOGC is set. The guard's heap is mostly its informer caches, which
// live as long as the process, and once they are synced it allocates
// little; Go's default (100) lets the heap grow to twice the caches before
// collecting. The price is collector CPU per recorded edit and a slower
// tail in bursts; the figures of both are in docs/benchmarks.md and
// docs/install.md, Sizing.
func collectAtHalfGrowth() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}
