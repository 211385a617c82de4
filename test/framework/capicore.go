package framework

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/cert"
)

const (
	// ClusterAPICoreBinary is Cluster API's core manager
	// (sigs.k8s.io/cluster-api/core, the main package of the image
	// clusterctl installs as capi-controller-manager) in BinDir, built by
	// make capi-core at the Cluster API version the test module pins.
	ClusterAPICoreBinary = "capi-core"
	// ClusterAPIKubeadmControlPlaneBinary is Cluster API's kubeadm control
	// plane manager (sigs.k8s.io/cluster-api/controlplane/kubeadm, the main
	// package of the image clusterctl installs as
	// capi-kubeadm-control-plane-controller-manager) in BinDir, built by
	// make capi-kcp at the Cluster API version the test module pins.
	ClusterAPIKubeadmControlPlaneBinary = "capi-kcp"
	// clusterAPIManagerReadyTimeout bounds the wait for a manager's
	// /readyz.
	clusterAPIManagerReadyTimeout = 60 * time.Second
	// defaultClusterAPIManagerStopTimeout bounds its graceful stop before a
	// SIGKILL, unless ClusterAPIManagerOptions says otherwise.
	defaultClusterAPIManagerStopTimeout = 30 * time.Second
)

// clusterAPIManagerKind is one of Cluster API's manager programs that the
// framework runs as a child process.
type clusterAPIManagerKind struct {
	binary      string // its file in BinDir, and the make target that builds it
	mainPackage string // the Go main package it must be built from
	title       string // what it is, for messages
}

var (
	clusterAPICoreManager = clusterAPIManagerKind{
		binary: ClusterAPICoreBinary, mainPackage: clusterAPIModule + "/core",
		title: "Cluster API's core manager",
	}
	clusterAPIKubeadmControlPlaneManager = clusterAPIManagerKind{
		binary: ClusterAPIKubeadmControlPlaneBinary, mainPackage: clusterAPIModule + "/controlplane/kubeadm",
		title: "Cluster API's kubeadm control plane manager",
	}
)

// ClusterAPIManagerOptions configures StartClusterAPICore and
// StartClusterAPIKubeadmControlPlane.
type ClusterAPIManagerOptions struct {
	// FeatureGates are Cluster API's feature gates, passed as
	// --feature-gates; the others keep Cluster API's defaults.
	FeatureGates map[string]bool
	// Args are extra flags, after the ones the framework sets (a later
	// flag wins).
	Args []string
	// StopTimeout is how long Stop waits after SIGTERM before it sends
	// SIGKILL. Default: 30s.
	StopTimeout time.Duration
}

// ClusterAPIManager is one of Cluster API's managers running unmodified as
// a child process against an Environment's API server, as the admin:
// the core manager (StartClusterAPICore) — the Cluster, Machine,
// MachineSet, MachineDeployment, MachinePool, MachineHealthCheck,
// ClusterResourceSet, ClusterClass, topology and (with the RuntimeSDK
// feature gate) ExtensionConfig controllers, with its own cluster cache and,
// with RuntimeSDK, its Runtime SDK client — or the kubeadm control plane
// manager (StartClusterAPIKubeadmControlPlane) — the KubeadmControlPlane
// controller and, with the InPlaceUpdates feature gate, a read-only
// ExtensionConfig controller and its own Runtime SDK client. Its webhook
// server serves a self-signed certificate on a free port, but no webhook
// configuration or CRD points at it: the environment's in-process webhooks
// keep answering Cluster API's admission and conversion requests.
type ClusterAPIManager struct {
	// Log is its log file in the environment's WorkDir (capi-core.log,
	// capi-kcp.log).
	Log string
	// Args are the flags it was started with.
	Args []string
	// ReadyzURL is its readiness endpoint (http://127.0.0.1:PORT/readyz).
	ReadyzURL string

	proc        *childProcess
	certDir     string
	stopTimeout time.Duration
	stopOnce    sync.Once
	stopErr     error
}

// StartClusterAPICore starts BinDir/capi-core (ClusterAPICoreBinary),
// Cluster API's core manager, as startClusterAPIManager says.
//
// The binary must be built from the Cluster API version whose CRDs the
// environment installed: a stale build is an error naming make capi-core.
func (e *Environment) StartClusterAPICore(ctx context.Context, opts ClusterAPIManagerOptions) (*ClusterAPIManager, error) {
	return e.startClusterAPIManager(ctx, clusterAPICoreManager, opts)
}

// StartClusterAPIKubeadmControlPlane starts BinDir/capi-kcp
// (ClusterAPIKubeadmControlPlaneBinary), Cluster API's kubeadm control
// plane manager, as startClusterAPIManager says. Only one KubeadmControlPlane
// controller may run against an API server: the caller must not run one
// of its own.
//
// The binary must be built from the Cluster API version whose CRDs the
// environment installed: a stale or foreign build is an error naming make
// capi-kcp.
func (e *Environment) StartClusterAPIKubeadmControlPlane(ctx context.Context, opts ClusterAPIManagerOptions) (*ClusterAPIManager, error) {
	return e.startClusterAPIManager(ctx, clusterAPIKubeadmControlPlaneManager, opts)
}

// startClusterAPIManager starts BinDir/kind.binary with the admin
// kubeconfig, without leader election, with opts.FeatureGates, its health
// endpoint on a free local port, its webhook server on another (with a
// self-signed certificate for 127.0.0.1 in WorkDir/<binary>/; the server
// listens on every interface, which Cluster API's flags do not change), no
// metrics, and Cluster API's CRD migration skipped (the environment
// installed the CRDs at their storage versions; the migrator would patch
// every CRD and rewrite every object for nothing), then opts.Args. It
// returns once /readyz answers 200 (its webhook server serves; its
// controllers may still be syncing their caches).
//
// The process dies with the test process (SIGKILL at its death); Stop stops
// it gracefully, and should come before the Environment's Stop (which also
// stops it, as a last resort, after the API server).
func (e *Environment) startClusterAPIManager(ctx context.Context, kind clusterAPIManagerKind, opts ClusterAPIManagerOptions) (_ *ClusterAPIManager, retErr error) {
	if err := e.running(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", kind.title, err)
	}
	begin := time.Now()
	if err := checkClusterAPIManagerBinary(e.BinDir, e.ClusterAPIDir, kind); err != nil {
		return nil, fmt.Errorf("starting %s: %w", kind.title, err)
	}
	c := &ClusterAPIManager{
		Log:         filepath.Join(e.WorkDir, kind.binary+".log"),
		certDir:     filepath.Join(e.WorkDir, kind.binary),
		stopTimeout: opts.StopTimeout,
	}
	if c.stopTimeout <= 0 {
		c.stopTimeout = defaultClusterAPIManagerStopTimeout
	}
	defer func() {
		if retErr != nil {
			if err := c.Stop(); err != nil {
				retErr = errors.Join(retErr, err)
			}
			retErr = fmt.Errorf("starting %s: %w\nlast lines of %s:\n%s", kind.title, retErr, c.Log, c.LogTail())
		}
	}()
	if err := writeSelfSignedServingCert(c.certDir); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	healthAddr := net.JoinHostPort(localHost, strconv.Itoa(ports[1]))
	c.ReadyzURL = "http://" + healthAddr + "/readyz"
	c.Args = append([]string{
		"--kubeconfig=" + e.Kubeconfig,
		"--leader-elect=false",
		"--feature-gates=" + featureGatesFlag(opts.FeatureGates),
		"--webhook-port=" + strconv.Itoa(ports[0]),
		"--webhook-cert-dir=" + c.certDir,
		"--health-addr=" + healthAddr,
		"--diagnostics-address=0",
		"--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields",
	}, opts.Args...)
	// Should a test end without Stop, the environment's Stop ends it.
	e.closers = append(e.closers, closerFunc(c.Stop))
	if c.proc, err = e.startChildProcess(kind.binary, c.Log, c.Args); err != nil {
		return nil, err
	}
	httpClient := &http.Client{Timeout: 2 * time.Second}
	if err := waitReadyz(ctx, httpClient, c.ReadyzURL, clusterAPIManagerReadyTimeout, c.proc.done, func() error {
		return fmt.Errorf("%s exited before it was ready: %v", kind.binary, c.proc.exitErr)
	}); err != nil {
		return nil, err
	}
	e.logger.Info(kind.title+" ready", "pid", c.proc.cmd.Process.Pid, "log", c.Log,
		"after", time.Since(begin).Round(time.Millisecond).String())
	return c, nil
}

// Stop stops the manager (SIGTERM to its process group, SIGKILL after
// ClusterAPIManagerOptions.StopTimeout), waits for it, closes its log and
// removes its certificate directory. It is idempotent; it returns an error
// if the process had exited by itself with an error.
func (c *ClusterAPIManager) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		if err := c.proc.stop(c.stopTimeout); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(c.certDir); err != nil {
			errs = append(errs, fmt.Errorf("removing the manager's certificate directory: %w", err))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// Running reports whether the process still runs.
func (c *ClusterAPIManager) Running() bool {
	if c.proc == nil {
		return false
	}
	select {
	case <-c.proc.done:
		return false
	default:
		return true
	}
}

// LogTail returns the last lines the manager wrote.
func (c *ClusterAPIManager) LogTail() string {
	if c.proc == nil {
		return ""
	}
	return c.proc.tail.String()
}

// featureGatesFlag renders gates as --feature-gates takes them, sorted.
func featureGatesFlag(gates map[string]bool) string {
	var pairs []string
	for name, on := range gates {
		pairs = append(pairs, name+"="+strconv.FormatBool(on))
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

// checkClusterAPIManagerBinary checks that binDir holds kind's binary and
// that it was built from kind's main package at the Cluster API version of
// capiDir (a module cache directory, cluster-api@VERSION).
func checkClusterAPIManagerBinary(binDir, capiDir string, kind clusterAPIManagerKind) error {
	path := filepath.Join(binDir, kind.binary)
	rebuild := "make " + kind.binary
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%s is missing (build it with: %s): %w", path, rebuild, err)
	}
	if err := checkBinary(binDir, kind.binary); err != nil {
		return err
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the build information of %s: %w (rebuild it with: %s)", path, err, rebuild)
	}
	if info.Path != kind.mainPackage {
		return fmt.Errorf("%s is %s, not %s: rebuild it with: %s", path, info.Path, kind.mainPackage, rebuild)
	}
	_, want, ok := strings.Cut(filepath.Base(capiDir), "@")
	if !ok {
		return nil // a local replacement: no version to compare
	}
	got := info.Main.Version
	if info.Main.Replace != nil {
		got = info.Main.Replace.Version
	}
	if info.Main.Path != clusterAPIModule || got != want {
		return fmt.Errorf("%s was built from %s %s, not %s %s: rebuild it with: %s", path, info.Main.Path, got, clusterAPIModule, want, rebuild)
	}
	return nil
}

// writeSelfSignedServingCert writes a self-signed serving certificate and
// key for 127.0.0.1 into dir (tls.crt, tls.key), creating it.
func writeSelfSignedServingCert(dir string) error {
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(localHost, []net.IP{net.ParseIP(localHost)}, nil)
	if err != nil {
		return fmt.Errorf("generating a serving certificate: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, tlsKeyFile), keyPEM, 0o600); err != nil {
		return fmt.Errorf("writing the serving key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, tlsCertFile), certPEM, 0o644); err != nil {
		return fmt.Errorf("writing the serving certificate: %w", err)
	}
	return nil
}
