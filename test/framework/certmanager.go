package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// CertManagerController and CertManagerCAInjector are the binaries of
	// cert-manager's controller and CA injector in BinDir, built from
	// hack/tools/cert-manager (make cert-manager-tools).
	CertManagerController = "cert-manager-controller"
	CertManagerCAInjector = "cert-manager-cainjector"
	// DefaultCertManagerNamespace is the namespace of the Secrets that
	// ClusterIssuers refer to (cert-manager's --cluster-resource-namespace)
	// unless CertManagerOptions says otherwise. StartCertManager creates it.
	DefaultCertManagerNamespace = "cert-manager"

	// certManagerModule is the module whose controllers the binaries run
	// and whose zip ships the CRDs (deploy/crds).
	certManagerModule = "github.com/cert-manager/cert-manager"
	// certManagerToolsDir is the module, relative to the repository root,
	// that pins certManagerModule and builds the binaries.
	certManagerToolsDir = "hack/tools/cert-manager"
	// certManagerReadyTimeout bounds the wait for each process's health
	// endpoint; the CA injector answers only once the Certificate CRD is
	// served and its manager runs.
	certManagerReadyTimeout = 60 * time.Second
	// defaultCertManagerStopTimeout bounds each process's graceful stop
	// before a SIGKILL.
	defaultCertManagerStopTimeout = 15 * time.Second
)

// CertManagerOptions configures StartCertManager. The zero value runs both
// processes as the environment's admin, without leader election.
type CertManagerOptions struct {
	// ClusterResourceNamespace is the controller's
	// --cluster-resource-namespace. Default: DefaultCertManagerNamespace.
	ClusterResourceNamespace string
	// ControllerArgs and CAInjectorArgs are extra flags of each binary,
	// after the ones StartCertManager sets (a later flag wins).
	ControllerArgs, CAInjectorArgs []string
	// StopTimeout is how long Stop waits for each process after SIGTERM
	// before it sends SIGKILL. Default: 15s.
	StopTimeout time.Duration
}

// CertManager is cert-manager's own controller and CA injector, built from
// source at the version hack/tools/cert-manager pins, running as child
// processes against an Environment's API server: Certificates of CA and
// SelfSigned Issuers and ClusterIssuers are issued into their Secrets, and
// the CA of the Certificate a cert-manager.io/inject-ca-from annotation
// names is injected into webhook configurations, CRDs and APIServices, as
// in a management cluster with cert-manager installed. There is no
// cert-manager webhook: the API server does not validate or default
// cert-manager's objects beyond their CRDs' schemas.
type CertManager struct {
	// Version is the cert-manager version both binaries report.
	Version string
	// ClusterResourceNamespace is the namespace of ClusterIssuers' Secrets.
	ClusterResourceNamespace string
	// ControllerLog and CAInjectorLog are the processes' log files in the
	// environment's WorkDir.
	ControllerLog, CAInjectorLog string

	controller, cainjector *childProcess
	stopTimeout            time.Duration
	stopOnce               sync.Once
	stopErr                error
}

// CertManagerModule returns the directory (in the module cache, downloaded
// if needed) and the version of the cert-manager module that
// repoRoot/hack/tools/cert-manager pins: the source of the binaries and of
// the CRDs StartCertManager installs.
func CertManagerModule(repoRoot string) (dir, version string, err error) {
	cmd := exec.Command("go", "list", "-m", "-json", certManagerModule)
	cmd.Dir = filepath.Join(repoRoot, filepath.FromSlash(certManagerToolsDir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("go list -m %s in %s: %w: %s", certManagerModule, cmd.Dir, err, strings.TrimSpace(stderr.String()))
	}
	var mod struct{ Dir, Version string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", "", fmt.Errorf("reading go list's answer for %s: %w", certManagerModule, err)
	}
	if mod.Version == "" {
		return "", "", fmt.Errorf("%s does not pin %s", cmd.Dir, certManagerModule)
	}
	if mod.Dir == "" {
		if mod.Dir, err = ModuleDir(certManagerModule, mod.Version); err != nil {
			return "", "", err
		}
	}
	return mod.Dir, mod.Version, nil
}

// InstallCertManagerCRDs installs (creates or updates) the CRDs shipped in
// cert-manager's module at the version hack/tools/cert-manager pins, and
// waits until they are served.
func (e *Environment) InstallCertManagerCRDs() error {
	if err := e.running(); err != nil {
		return fmt.Errorf("installing cert-manager's CRDs: %w", err)
	}
	dir, _, err := CertManagerModule(e.RepoRoot)
	if err != nil {
		return fmt.Errorf("finding cert-manager's CRDs: %w", err)
	}
	crdDir := filepath.Join(dir, "deploy", "crds")
	crds, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{
		Paths:              []string{crdDir},
		ErrorIfPathMissing: true,
		Scheme:             e.Scheme,
	})
	if err != nil {
		return fmt.Errorf("installing cert-manager's CRDs from %s: %w", crdDir, err)
	}
	if len(crds) == 0 {
		return fmt.Errorf("no CRD in %s", crdDir)
	}
	return nil
}

// StartCertManager installs cert-manager's CRDs (InstallCertManagerCRDs),
// creates the cluster resource namespace, and starts BinDir's
// cert-manager-controller and cert-manager-cainjector with the admin
// kubeconfig, their health endpoints on free local ports and no metrics,
// so that several environments can run side by side. It returns once both
// answer their health endpoint. Both must report the version
// hack/tools/cert-manager pins: a stale build is an error, not a silent
// mismatch with the CRDs.
//
// The processes die with the test process (SIGKILL at its death); Stop
// stops them gracefully, and must come before the Environment's Stop (which
// also stops them, as a last resort, after the API server).
func (e *Environment) StartCertManager(ctx context.Context, opts CertManagerOptions) (_ *CertManager, retErr error) {
	if err := e.running(); err != nil {
		return nil, fmt.Errorf("starting cert-manager: %w", err)
	}
	begin := time.Now()
	_, version, err := CertManagerModule(e.RepoRoot)
	if err != nil {
		return nil, fmt.Errorf("starting cert-manager: %w", err)
	}
	for _, name := range []string{CertManagerController, CertManagerCAInjector} {
		if err := checkCertManagerBinary(e.BinDir, name, version); err != nil {
			return nil, fmt.Errorf("starting cert-manager: %w", err)
		}
	}
	if err := e.InstallCertManagerCRDs(); err != nil {
		return nil, fmt.Errorf("starting cert-manager: %w", err)
	}
	cm := &CertManager{
		Version:                  version,
		ClusterResourceNamespace: opts.ClusterResourceNamespace,
		ControllerLog:            filepath.Join(e.WorkDir, CertManagerController+".log"),
		CAInjectorLog:            filepath.Join(e.WorkDir, CertManagerCAInjector+".log"),
		stopTimeout:              opts.StopTimeout,
	}
	if cm.ClusterResourceNamespace == "" {
		cm.ClusterResourceNamespace = DefaultCertManagerNamespace
	}
	if cm.stopTimeout <= 0 {
		cm.stopTimeout = defaultCertManagerStopTimeout
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cm.ClusterResourceNamespace}}
	if err := e.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("starting cert-manager: creating namespace %s: %w", cm.ClusterResourceNamespace, err)
	}
	defer func() {
		if retErr != nil {
			if err := cm.Stop(); err != nil {
				retErr = errors.Join(retErr, err)
			}
			retErr = fmt.Errorf("%w\nlast lines of cert-manager's logs:\n%s", retErr, cm.LogTail())
		}
	}()
	// Should a test end without Stop, the environment's Stop ends them.
	e.closers = append(e.closers, closerFunc(cm.Stop))

	ports, err := freePorts(2)
	if err != nil {
		return nil, fmt.Errorf("starting cert-manager: %w", err)
	}
	controllerHealth := net.JoinHostPort(localHost, strconv.Itoa(ports[0]))
	cainjectorHealth := net.JoinHostPort(localHost, strconv.Itoa(ports[1]))
	if cm.controller, err = e.startChildProcess(CertManagerController, cm.ControllerLog, append([]string{
		"--kubeconfig", e.Kubeconfig,
		"--cluster-resource-namespace", cm.ClusterResourceNamespace,
		"--leader-elect=false",
		"--healthz-listen-address", controllerHealth,
	}, opts.ControllerArgs...)); err != nil {
		return nil, err
	}
	if cm.cainjector, err = e.startChildProcess(CertManagerCAInjector, cm.CAInjectorLog, append([]string{
		"--kubeconfig", e.Kubeconfig,
		"--leader-elect=false",
		"--health-probe-bind-address", cainjectorHealth,
		"--metrics-bind-address", "0",
	}, opts.CAInjectorArgs...)); err != nil {
		return nil, err
	}
	httpClient := &http.Client{Timeout: 2 * time.Second}
	for _, p := range []struct {
		proc *childProcess
		url  string
	}{
		{cm.controller, "http://" + controllerHealth + "/livez"},
		{cm.cainjector, "http://" + cainjectorHealth + "/readyz"},
	} {
		if err := waitReadyz(ctx, httpClient, p.url, certManagerReadyTimeout, p.proc.done, func() error {
			return fmt.Errorf("%s exited before it was ready: %v", p.proc.name, p.proc.exitErr)
		}); err != nil {
			return nil, fmt.Errorf("starting cert-manager: %w", err)
		}
	}
	e.logger.Info("cert-manager ready", "version", version, "controller", cm.controller.cmd.Process.Pid,
		"cainjector", cm.cainjector.cmd.Process.Pid, "after", time.Since(begin).Round(time.Millisecond).String())
	return cm, nil
}

// checkCertManagerBinary checks that binDir/name exists and reports
// version.
func checkCertManagerBinary(binDir, name, version string) error {
	path := filepath.Join(binDir, name)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%s is missing (build it with: make cert-manager-tools): %w", path, err)
	}
	if err := checkBinary(binDir, name); err != nil {
		return err
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", path, err)
	}
	if got, want := strings.TrimSpace(string(out)), name+" "+version; got != want {
		return fmt.Errorf("%s reports %q, not %q: rebuild it with: make cert-manager-tools", path, got, want)
	}
	return nil
}

// Stop stops the CA injector, then the controller (SIGTERM to each process
// group, SIGKILL after CertManagerOptions.StopTimeout), waits for them and
// closes their logs. It is idempotent; it returns an error if a process
// had exited by itself with an error.
func (c *CertManager) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		for _, p := range []*childProcess{c.cainjector, c.controller} {
			if err := p.stop(c.stopTimeout); err != nil {
				errs = append(errs, err)
			}
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// LogTail returns the last lines each process wrote, headed by its name.
func (c *CertManager) LogTail() string {
	var b strings.Builder
	for _, p := range []*childProcess{c.controller, c.cainjector} {
		if p != nil {
			fmt.Fprintf(&b, "--- %s\n%s\n", p.name, p.tail.String())
		}
	}
	return b.String()
}

// closerFunc is an io.Closer that calls itself.
type closerFunc func() error

// Close calls f.
func (f closerFunc) Close() error { return f() }

// RenewCertificate asks cert-manager to issue the Certificate ns/name anew,
// as cmctl renew does: it sets the Certificate's Issuing condition, which
// is what cert-manager's trigger controller sets when a certificate is due.
func RenewCertificate(ctx context.Context, c client.Client, ns, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crt := &unstructured.Unstructured{}
		crt.SetAPIVersion("cert-manager.io/v1")
		crt.SetKind("Certificate")
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, crt); err != nil {
			return fmt.Errorf("renewing Certificate %s/%s: %w", ns, name, err)
		}
		conds, _, _ := unstructured.NestedSlice(crt.Object, "status", "conditions")
		conds = slices.DeleteFunc(conds, func(c any) bool { m, _ := c.(map[string]any); return m["type"] == "Issuing" })
		conds = append(conds, map[string]any{
			"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
			"message":            "Certificate re-issuance manually triggered",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
			"observedGeneration": crt.GetGeneration(),
		})
		if err := unstructured.SetNestedSlice(crt.Object, conds, "status", "conditions"); err != nil {
			return fmt.Errorf("renewing Certificate %s/%s: %w", ns, name, err)
		}
		return c.Status().Update(ctx, crt)
	})
}
