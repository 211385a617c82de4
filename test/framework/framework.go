package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

const (
	// localHost is the address every local server (the conversion webhooks,
	// the guard) listens on and the API server calls.
	localHost = "127.0.0.1"
	// controlPlaneStartTimeout bounds the start of etcd and of kube-apiserver
	// each; generous because the machine may be busy building.
	controlPlaneStartTimeout = 60 * time.Second
	// controlPlaneStopTimeout bounds their graceful stop before a SIGKILL.
	controlPlaneStopTimeout = 30 * time.Second
	// conversionServerTimeout bounds the start of the conversion webhook server.
	conversionServerTimeout = 30 * time.Second
)

// Options configures Start.
type Options struct {
	// RepoRoot is the product's repository. Default: found by walking up from
	// the working directory to the directory whose go.mod declares
	// github.com/rollout-guard/rollout-guard.
	RepoRoot string
	// BinDir holds etcd, kube-apiserver, kubectl and webhook. Default: RepoRoot/bin.
	BinDir string
	// StartGuard starts BinDir/webhook and registers
	// RepoRoot/config/webhook/manifests.yaml, pointed at it.
	StartGuard bool
	// GuardArgs are extra flags for bin/webhook, after the ones the
	// environment sets (a later flag wins).
	GuardArgs []string
	// GuardRace runs BinDir/webhook-race, the guard built with the race
	// detector (make build-race), instead of BinDir/webhook, for the
	// single guard and every replica; a data race it reports fails Stop
	// (GuardRaces). The race detector slows the guard several times and
	// multiplies its memory: for the packages whose tests fit it.
	// GuardRaceEnv overrides it.
	GuardRace bool
	// GuardAsAdmin runs the guard as a user in group system:masters. By
	// default the guard runs as its ServiceAccount (GuardServiceAccount)
	// with only the rights config/rbac gives it, so a missing verb fails.
	GuardAsAdmin bool
	// GuardClientAuth makes the guard accept only TLS clients with a
	// certificate signed by a client CA the environment makes in WorkDir
	// (admission/), as docs/client-certificates.md turns it on in a management cluster:
	// kube-apiserver starts with an --admission-control-config-file whose
	// ValidatingAdmissionWebhook and MutatingAdmissionWebhook plugins name
	// a kubeconfig with a client certificate of that CA (for user "*"), and
	// the guard (and every replica) with --client-ca-name naming the CA in
	// its cert directory. A request straight to GuardURL must then present
	// GuardClientCertificate. Off by default: the API server presents no
	// client certificate and the guard asks for none.
	GuardClientAuth bool
	// GuardMetrics serves the guard's metrics endpoint on a free local port
	// (GuardMetricsURL). By default the guard serves no metrics.
	GuardMetrics bool
	// ClusterAPIAdmission also installs Cluster API's own defaulting and
	// validating admission webhooks (core, kubeadm control plane, kubeadm
	// bootstrap), served by the environment's webhook server beside the
	// conversion webhooks and registered from the manifests shipped in the
	// Cluster API module (ClusterAPIWebhookManifests), as a management
	// cluster installed by clusterctl has them. Off by default: then every
	// refusal a test sees comes from the guard. Cluster API's webhooks follow
	// its feature gates (sigs.k8s.io/cluster-api/feature): topology Clusters
	// and ClusterClasses pass only with ClusterTopology enabled.
	ClusterAPIAdmission bool
	// GuardStopTimeout is how long StopGuard (and a restart) waits for the
	// guard to exit after SIGTERM before it sends SIGKILL. Default: 30s.
	GuardStopTimeout time.Duration
	// Log receives the guard's output and the environment's own (the
	// conversion webhook server's). Default: WorkDir/environment.log.
	Log io.Writer
	// APIServerArgs are extra kube-apiserver flags, by name without the
	// dashes; each replaces envtest's default of the same name (an empty
	// value gives the flag empty). NodeAPIServerArgs returns those that
	// StartNode needs.
	APIServerArgs map[string]string
	// WorkDir holds the environment's files: the admin kubeconfig
	// ("kubeconfig"), the guard's kubeconfig and cert directory, the logs
	// of etcd and kube-apiserver (etcd.log, kube-apiserver.log), with
	// GuardClientAuth the client CA and kube-apiserver's admission
	// configuration (admission/). Default: a new
	// temporary directory, removed by Stop when Log was given (otherwise it
	// holds the only copy of the log and is kept) and kept after a failed
	// Start.
	WorkDir string
}

// Environment is a running local management cluster: etcd and kube-apiserver,
// the Cluster API CRDs, Cluster API's conversion webhooks (and, with
// Options.ClusterAPIAdmission, its admission webhooks) served in-process
// and, if started, the guard as a child process. Only one Environment may run
// in a process at a time (Cluster API's conversion code keeps its API-version
// lookup in a package variable).
type Environment struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Client is an admin client with Scheme.
	Client client.Client
	// Scheme holds the client-go and apiextensions types and every served
	// version of the Cluster API types the environment installs.
	Scheme *runtime.Scheme
	// Kubeconfig is the path of an admin kubeconfig file written by Start.
	Kubeconfig string
	// RepoRoot, BinDir and WorkDir are the resolved options.
	RepoRoot, BinDir, WorkDir string
	// ClusterAPIDir is the directory of the sigs.k8s.io/cluster-api module
	// the CRDs were loaded from.
	ClusterAPIDir string

	opts          Options
	log           io.Writer
	logger        logr.Logger
	closers       []io.Closer
	removeWorkDir bool

	testEnv   *envtest.Environment
	mgrCancel context.CancelFunc
	mgrDone   chan error
	// reaper stops etcd and kube-apiserver if this process ends without
	// stopping them.
	reaper *reaper
	// removeCRDReader withdraws this environment from getAPIVersion.
	removeCRDReader func()

	guardMu         sync.Mutex
	guard           *guardProcess
	guardKubeconfig string
	guardConfig     *rest.Config
	guardCertDir    string
	guardCABundle   []byte
	guardTail       *tailWriter
	races           *raceWatcher  // race reports of the guard processes
	guardIndex      *indexWatcher // whether the running guard has filled its revision Index
	raceTest        atomic.Bool   // a test runs the race-enabled guard (WithRaceGuard)
	// clientAuth is the client CA and kube-apiserver's client certificate
	// of Options.GuardClientAuth; nil when it is off.
	clientAuth *clientAuth

	// apiServerMu guards apiServerCmd and apiServerDone: the kube-apiserver
	// RestartAPIServer started (nil until then) and its exit.
	apiServerMu   sync.Mutex
	apiServerCmd  *exec.Cmd
	apiServerDone chan struct{}
	// replicas is the running set of guard replicas, if any.
	replicas *GuardReplicas

	stopOnce sync.Once
	stopped  chan struct{}
	stopErr  error
}

// Start starts etcd and kube-apiserver from opts.BinDir, installs the Cluster
// API CRDs, serves their conversion webhooks and, if opts.StartGuard, starts
// the guard; it returns when all of it is ready. ctx bounds the start only:
// the environment runs until Stop. On any error everything started so far is
// stopped.
func Start(ctx context.Context, opts Options) (_ *Environment, retErr error) {
	begin := time.Now()
	e := &Environment{opts: opts, stopped: make(chan struct{}), guardTail: newTailWriter(40), races: &raceWatcher{}, guardIndex: &indexWatcher{}}
	defer func() {
		if retErr == nil {
			return
		}
		// Keep the logs of a failed start for diagnosis.
		keep := e.removeWorkDir
		e.removeWorkDir = false
		if err := e.Stop(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("stopping what had started: %w", err))
		}
		if keep {
			retErr = fmt.Errorf("%w\n(the environment's files and logs are kept in %s)", retErr, e.WorkDir)
		}
	}()

	if err := e.resolvePaths(); err != nil {
		return nil, err
	}
	if err := e.openLog(); err != nil {
		return nil, err
	}
	e.logger.Info("starting the environment", "repoRoot", e.RepoRoot, "binDir", e.BinDir, "workDir", e.WorkDir)

	capiDir, err := ClusterAPIDir(e.RepoRoot)
	if err != nil {
		return nil, fmt.Errorf("locating the Cluster API module: %w", err)
	}
	e.ClusterAPIDir = capiDir
	crds, err := LoadClusterAPICRDs(capiDir)
	if err != nil {
		return nil, fmt.Errorf("loading the Cluster API CRDs: %w", err)
	}
	infraCRDs, err := LoadInfrastructureCRDs(capiDir)
	if err != nil {
		return nil, fmt.Errorf("loading the development infrastructure CRDs: %w", err)
	}
	crds = append(crds, infraCRDs...)
	guardCRDs, err := LoadGuardCRDs(e.RepoRoot)
	if err != nil {
		return nil, err
	}
	crds = append(crds, guardCRDs...)
	if e.Scheme, err = NewScheme(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("starting the environment: %w", err)
	}

	if err := e.startControlPlane(crds); err != nil {
		return nil, err
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		return nil, fmt.Errorf("creating the admin client: %w", err)
	}
	e.Kubeconfig = filepath.Join(e.WorkDir, "kubeconfig")
	if err := e.WriteKubeconfig(e.Kubeconfig); err != nil {
		return nil, err
	}
	if err := e.startConversionWebhooks(ctx); err != nil {
		return nil, err
	}
	e.logger.Info("API server and Cluster API webhooks ready", "admission", opts.ClusterAPIAdmission, "after", time.Since(begin).Round(time.Millisecond).String())

	if opts.StartGuard {
		if err := e.StartGuard(ctx); err != nil {
			return nil, err
		}
	}
	e.logger.Info("environment ready", "after", time.Since(begin).Round(time.Millisecond).String(), "kubeconfig", e.Kubeconfig)
	return e, nil
}

// resolvePaths fills RepoRoot, BinDir and WorkDir and checks the binaries.
func (e *Environment) resolvePaths() error {
	e.RepoRoot = e.opts.RepoRoot
	if e.RepoRoot == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("finding the working directory: %w", err)
		}
		if e.RepoRoot, err = FindRepoRoot(wd); err != nil {
			return fmt.Errorf("finding the repository root: %w", err)
		}
	}
	e.BinDir = e.opts.BinDir
	if e.BinDir == "" {
		e.BinDir = filepath.Join(e.RepoRoot, "bin")
	}
	need := []string{"etcd", "kube-apiserver"}
	if e.opts.StartGuard {
		need = append(need, e.guardBinary())
	}
	for _, name := range need {
		if err := checkBinary(e.BinDir, name); err != nil {
			return err
		}
	}
	e.WorkDir = e.opts.WorkDir
	if e.WorkDir == "" {
		dir, err := os.MkdirTemp("", "rollout-guard-env-")
		if err != nil {
			return fmt.Errorf("creating the work directory: %w", err)
		}
		e.WorkDir = dir
		e.removeWorkDir = e.opts.Log != nil
	} else if err := os.MkdirAll(e.WorkDir, 0o755); err != nil {
		return fmt.Errorf("creating the work directory: %w", err)
	}
	return nil
}

// checkBinary reports a missing or non-executable binary with a hint.
func checkBinary(binDir, name string) error {
	path := filepath.Join(binDir, name)
	info, err := os.Stat(path)
	if err != nil {
		hint := "build it with hack/tools (see its go.mod) into bin/"
		switch name {
		case "webhook":
			hint = "build it with: go build -o bin/webhook ./cmd/webhook"
		case raceGuardBinary:
			hint = "build it with: make build-race (go build -race -o bin/" + raceGuardBinary + " ./cmd/webhook)"
		}
		return fmt.Errorf("%s is missing (%s): %w", path, hint, err)
	}
	if info.IsDir() || info.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// openLog sets up the shared log writer and the environment's logger.
func (e *Environment) openLog() error {
	w := e.opts.Log
	if w == nil {
		f, err := os.OpenFile(filepath.Join(e.WorkDir, "environment.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("opening the environment log: %w", err)
		}
		e.closers = append(e.closers, f)
		w = f
	}
	e.log = &lockedWriter{w: w}
	e.logger = zap.New(zap.WriteTo(e.log), zap.ConsoleEncoder()).WithName("environment")
	return nil
}

// startControlPlane starts etcd and kube-apiserver through envtest and
// installs the CRDs, with their conversion webhooks pointed at the local
// conversion webhook server.
func (e *Environment) startControlPlane(crds []*apiextensionsv1.CustomResourceDefinition) error {
	etcdLog, err := e.createLogFile("etcd.log")
	if err != nil {
		return err
	}
	apiServerLog, err := e.createLogFile("kube-apiserver.log")
	if err != nil {
		return err
	}
	e.testEnv = &envtest.Environment{
		BinaryAssetsDirectory:    e.BinDir,
		UseExistingCluster:       ptr.To(false),
		Scheme:                   e.Scheme,
		ControlPlaneStartTimeout: controlPlaneStartTimeout,
		ControlPlaneStopTimeout:  controlPlaneStopTimeout,
		CRDInstallOptions: envtest.CRDInstallOptions{
			CRDs:   crds,
			Scheme: e.Scheme,
		},
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			LocalServingHost: localHost,
			// Cluster API's types convert through hub/spoke converters, which
			// envtest does not recognise as convertible: without this it
			// silently removes the conversion webhook from every CRD.
			IgnoreSchemeConvertible: true,
		},
	}
	apiServer := e.testEnv.ControlPlane.GetAPIServer()
	apiServer.Path = filepath.Join(e.BinDir, "kube-apiserver")
	apiServer.Out, apiServer.Err = apiServerLog, apiServerLog
	e.testEnv.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(e.BinDir, "etcd"), Out: etcdLog, Err: etcdLog}
	e.testEnv.ControlPlane.KubectlPath = filepath.Join(e.BinDir, "kubectl")
	if e.opts.GuardClientAuth {
		if e.clientAuth, err = newClientAuth(filepath.Join(e.WorkDir, clientAuthDir)); err != nil {
			return fmt.Errorf("making the guard's client CA: %w", err)
		}
		apiServer.Configure().Set("admission-control-config-file", e.clientAuth.admissionConfig)
	}
	for name, value := range e.opts.APIServerArgs {
		apiServer.Configure().Set(name, value)
	}

	cfg, err := e.testEnv.Start()
	if err != nil {
		return fmt.Errorf("starting etcd and kube-apiserver from %s (logs in %s): %w", e.BinDir, e.WorkDir, err)
	}
	e.Config = cfg
	// Should this process end without Stop, something must still stop
	// them and remove their files (see reaperScript).
	dirs := []string{apiServer.CertDir, e.testEnv.ControlPlane.Etcd.DataDir, e.testEnv.WebhookInstallOptions.LocalServingCertDir}
	if e.removeWorkDir {
		dirs = append(dirs, e.WorkDir)
	}
	children := []watched{
		{binary: apiServer.Path, arg: "--cert-dir=" + apiServer.CertDir},
		{binary: e.testEnv.ControlPlane.Etcd.Path, arg: "--data-dir=" + e.testEnv.ControlPlane.Etcd.DataDir},
	}
	if e.reaper, err = startReaper(children, slices.DeleteFunc(dirs, func(d string) bool { return d == "" })); err != nil {
		return err
	}
	return nil
}

// createLogFile creates (truncates) a log file in the work directory; Stop closes it.
func (e *Environment) createLogFile(name string) (*os.File, error) {
	f, err := os.Create(filepath.Join(e.WorkDir, name))
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", name, err)
	}
	e.closers = append(e.closers, f)
	return f, nil
}

// startConversionWebhooks runs a controller-runtime manager whose webhook
// server answers the CRDs' conversion requests (and, with
// Options.ClusterAPIAdmission, Cluster API's admission requests) on
// envtest's serving host, port and certificates, and waits until it serves
// (and the API server calls the admission webhooks).
func (e *Environment) startConversionWebhooks(ctx context.Context) error {
	wio := &e.testEnv.WebhookInstallOptions
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 e.Scheme,
		Logger:                 e.logger.WithName("conversion"),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    wio.LocalServingHost,
			Port:    wio.LocalServingPort,
			CertDir: wio.LocalServingCertDir,
		}),
	})
	if err != nil {
		return fmt.Errorf("creating the conversion webhook manager: %w", err)
	}
	if e.opts.ClusterAPIAdmission {
		if err := setupAdmissionWebhooks(ctx, mgr); err != nil {
			return err
		}
	} else if err := setupConversionWebhooks(mgr); err != nil {
		return err
	}
	e.removeCRDReader = pushCRDReader(cachedFirst{cached: mgr.GetCache(), live: mgr.GetAPIReader()})
	mgrCtx, cancel := context.WithCancel(context.Background())
	e.mgrCancel = cancel
	e.mgrDone = make(chan error, 1)
	go func() { e.mgrDone <- mgr.Start(mgrCtx) }()

	started := mgr.GetWebhookServer().StartedChecker()
	deadline := time.Now().Add(conversionServerTimeout)
	for {
		err := started(nil)
		if err == nil {
			break
		}
		select {
		case mgrErr := <-e.mgrDone:
			e.mgrDone <- mgrErr // keep it for Stop
			return fmt.Errorf("the conversion webhook manager stopped: %w", mgrErr)
		case <-ctx.Done():
			return fmt.Errorf("waiting for the conversion webhook server: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the conversion webhook server on %s:%d did not start within %s: %w", wio.LocalServingHost, wio.LocalServingPort, conversionServerTimeout, err)
		}
	}
	if !e.opts.ClusterAPIAdmission {
		return nil
	}
	return e.registerClusterAPIWebhooks(ctx, mgr.GetWebhookServer().WebhookMux())
}

// Stop stops the guard, the conversion webhook server, kube-apiserver and
// etcd, in that order. It is idempotent: later calls return the first
// call's result.
func (e *Environment) Stop() error {
	e.stopOnce.Do(func() {
		e.stopErr = e.stop()
		close(e.stopped)
	})
	return e.stopErr
}

func (e *Environment) stop() error {
	var errs []error
	if r := e.currentReplicas(); r != nil {
		if err := r.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	e.guardMu.Lock()
	if err := e.stopGuardLocked(); err != nil {
		errs = append(errs, err)
	}
	e.guardMu.Unlock()
	if err := e.races.err(); err != nil {
		errs = append(errs, err)
	}

	if e.mgrCancel != nil {
		e.mgrCancel()
		select {
		case err := <-e.mgrDone:
			if err != nil {
				errs = append(errs, fmt.Errorf("conversion webhook manager: %w", err))
			}
		case <-time.After(30 * time.Second):
			errs = append(errs, errors.New("the conversion webhook manager did not stop within 30s"))
		}
	}
	if e.removeCRDReader != nil {
		e.removeCRDReader()
	}
	if err := e.stopRestartedAPIServer(); err != nil {
		errs = append(errs, err)
	}
	if err := e.reaper.stop(); err != nil {
		errs = append(errs, err)
	}
	if e.testEnv != nil {
		if err := e.testEnv.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping etcd and kube-apiserver: %w", err))
		}
	}
	if e.logger.GetSink() != nil {
		e.logger.Info("environment stopped")
	}
	for i := len(e.closers) - 1; i >= 0; i-- {
		if err := e.closers[i].Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing a log file: %w", err))
		}
	}
	if e.removeWorkDir && e.WorkDir != "" {
		if err := os.RemoveAll(e.WorkDir); err != nil {
			errs = append(errs, fmt.Errorf("removing the work directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// running reports an error if the environment was stopped or never started.
func (e *Environment) running() error {
	select {
	case <-e.stopped:
		return errors.New("the environment is stopped")
	default:
	}
	if e.Config == nil {
		return errors.New("the environment is not started")
	}
	return nil
}

// ClientAs returns a client with Scheme that impersonates user in groups
// (the API server adds system:authenticated). The API server authorises the
// impersonated user, not the admin: pass system:masters among groups for
// full rights, or grant some through RBAC.
func (e *Environment) ClientAs(user string, groups ...string) (client.Client, error) {
	if err := e.running(); err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme})
	if err != nil {
		return nil, fmt.Errorf("creating a client for user %q: %w", user, err)
	}
	return c, nil
}

// WriteKubeconfig writes an admin kubeconfig for the environment to path
// (mode 0600), creating its directory.
func (e *Environment) WriteKubeconfig(path string) error {
	if e.testEnv == nil || len(e.testEnv.KubeConfig) == 0 {
		return errors.New("writing a kubeconfig: the environment is not started")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing a kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, e.testEnv.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("writing a kubeconfig: %w", err)
	}
	return nil
}
