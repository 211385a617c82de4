package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/builder"
)

const (
	// guardReadyTimeout bounds the wait for the guard's /readyz.
	guardReadyTimeout = 60 * time.Second
	// guardRoundTripTimeout bounds the wait for a first admission round trip.
	guardRoundTripTimeout = 30 * time.Second
	// defaultGuardStopTimeout bounds the guard's graceful stop before a
	// SIGKILL, unless Options.GuardStopTimeout says otherwise.
	defaultGuardStopTimeout = 30 * time.Second
	// probeName names the object of the admission round-trip probe.
	probeName = "rollout-guard-admission-probe"
)

// guardProcess is a running bin/webhook.
type guardProcess struct {
	cmd         *exec.Cmd
	done        chan struct{} // closed when the process has exited
	exitErr     error         // the process's exit, valid once done is closed
	webhookPort int
	healthPort  int
	metricsPort int // 0 when metrics are off
}

// exited reports whether the process has exited.
func (g *guardProcess) exited() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// GuardURL returns the base URL (https://127.0.0.1:PORT) of the running
// guard's webhook server, or "" when the guard is not running.
func (e *Environment) GuardURL() string {
	e.guardMu.Lock()
	defer e.guardMu.Unlock()
	if e.guard == nil {
		return ""
	}
	return "https://" + net.JoinHostPort(localHost, strconv.Itoa(e.guard.webhookPort))
}

// GuardReadyzURL returns the URL (http://127.0.0.1:PORT/readyz) of the
// running guard's readiness endpoint, or "" when the guard is not running.
func (e *Environment) GuardReadyzURL() string {
	e.guardMu.Lock()
	defer e.guardMu.Unlock()
	if e.guard == nil {
		return ""
	}
	return "http://" + net.JoinHostPort(localHost, strconv.Itoa(e.guard.healthPort)) + "/readyz"
}

// GuardMetricsURL returns the URL (https://127.0.0.1:PORT/metrics) of the
// running guard's metrics endpoint, or "" when the guard is not running or
// Options.GuardMetrics is off. The endpoint authenticates callers with the
// API server (TokenReview) and authorizes them (SubjectAccessReview for get
// on the non-resource URL /metrics); its certificate is self-signed.
func (e *Environment) GuardMetricsURL() string {
	e.guardMu.Lock()
	defer e.guardMu.Unlock()
	if e.guard == nil || e.guard.metricsPort == 0 {
		return ""
	}
	return "https://" + net.JoinHostPort(localHost, strconv.Itoa(e.guard.metricsPort)) + "/metrics"
}

// GuardLogTail returns the last lines the guard process wrote.
func (e *Environment) GuardLogTail() string { return e.guardTail.String() }

// StartGuard (re)starts BinDir/webhook on new ports, registers (creates or
// updates) the webhook configurations of RepoRoot/config/webhook/manifests.yaml
// pointed at it, and returns once its /readyz answers 200 and an admission
// request made through the API server reaches it. On error the guard is
// stopped again and the error ends with the last lines of its log.
//
// The first call sets up what every later one reuses:
//   - the guard's identity: unless Options.GuardAsAdmin, the RBAC objects of
//     config/rbac (InstallGuardRBAC) and a kubeconfig in which the admin
//     impersonates GuardServiceAccount, so the guard has exactly the rights
//     the shipped ClusterRoles and Role give it (GuardConfig);
//   - its cert directory (GuardCertDir) with a serving certificate for
//     127.0.0.1, and the CA bundle the webhook configurations trust
//     (GuardCABundle); WriteGuardServingCert and SetGuardCABundle replace
//     them, and a restarted guard keeps the replacements.
func (e *Environment) StartGuard(ctx context.Context) error {
	return e.StartGuardWith(ctx)
}

// StartGuardWith is StartGuard with extra flags after Options.GuardArgs
// (a later flag wins), for this start only: the next StartGuard starts
// the guard as configured.
func (e *Environment) StartGuardWith(ctx context.Context, extraArgs ...string) error {
	if err := e.running(); err != nil {
		return fmt.Errorf("starting the guard: %w", err)
	}
	e.guardMu.Lock()
	defer e.guardMu.Unlock()
	if err := e.stopGuardLocked(); err != nil {
		e.logger.Error(err, "stopping the previous guard")
	}
	if err := checkBinary(e.BinDir, e.guardBinary()); err != nil {
		return fmt.Errorf("starting the guard: %w", err)
	}
	if err := e.ensureGuardIdentity(ctx); err != nil {
		return fmt.Errorf("starting the guard: %w", err)
	}
	if err := e.ensureGuardCertDir(); err != nil {
		return fmt.Errorf("starting the guard: %w", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return fmt.Errorf("starting the guard: %w", err)
	}
	g := &guardProcess{done: make(chan struct{}), webhookPort: ports[0], healthPort: ports[1]}
	metricsAddr := "0"
	if e.opts.GuardMetrics {
		g.metricsPort = ports[2]
		metricsAddr = net.JoinHostPort(localHost, strconv.Itoa(g.metricsPort))
	}
	args := append([]string{
		"--kubeconfig", e.guardKubeconfig,
		"--webhook-host", localHost,
		"--webhook-port", strconv.Itoa(g.webhookPort),
		"--cert-dir", e.guardCertDir,
		"--arm-namespace", GuardNamespace,
		"--health-probe-bind-address", net.JoinHostPort(localHost, strconv.Itoa(g.healthPort)),
		"--metrics-bind-address", metricsAddr,
	}, e.guardClientAuthArgs()...)
	args = append(args, e.opts.GuardArgs...)
	args = append(args, extraArgs...)

	e.guardTail.reset()
	e.guardIndex.reset()
	out := io.MultiWriter(e.log, e.guardTail, e.races, e.guardIndex)
	g.cmd = exec.Command(filepath.Join(e.BinDir, e.guardBinary()), args...)
	g.cmd.Dir = e.WorkDir
	g.cmd.Stdout, g.cmd.Stderr = out, out
	g.cmd.SysProcAttr = childProcAttr()
	e.logger.Info("starting the guard", "command", g.cmd.String())
	if err := g.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", g.cmd.Path, err)
	}
	go func() {
		g.exitErr = g.cmd.Wait()
		close(g.done)
	}()
	e.guard = g

	fail := func(err error) error {
		if stopErr := e.stopGuardLocked(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return fmt.Errorf("starting the guard: %w\nlast lines of the guard's log:\n%s", err, e.guardTail.String())
	}
	if err := waitGuardReady(ctx, g); err != nil {
		return fail(err)
	}
	if err := e.registerGuardWebhooks(ctx, g.webhookPort); err != nil {
		return fail(err)
	}
	if err := e.waitAdmissionRoundTrip(ctx, g); err != nil {
		return fail(err)
	}
	e.logger.Info("guard ready", "pid", g.cmd.Process.Pid, "webhook", net.JoinHostPort(localHost, strconv.Itoa(g.webhookPort)))
	return nil
}

// StopGuard stops the guard (SIGTERM to its process group, SIGKILL after
// Options.GuardStopTimeout) and waits for it. The webhook configurations
// stay registered, so the edits they select fail closed while the guard is
// down. It is a no-op if the guard is not running; it returns an error if
// the guard had exited by itself with an error.
func (e *Environment) StopGuard() error {
	e.guardMu.Lock()
	defer e.guardMu.Unlock()
	return e.stopGuardLocked()
}

func (e *Environment) stopGuardLocked() error {
	g := e.guard
	if g == nil {
		return nil
	}
	e.guard = nil
	pid := g.cmd.Process.Pid
	if g.exited() {
		killGroup(pid, syscall.SIGKILL) // anything it left behind
		if g.exitErr != nil {
			return fmt.Errorf("the guard (pid %d) had exited by itself: %w", pid, g.exitErr)
		}
		return nil
	}
	stopTimeout := e.opts.GuardStopTimeout
	if stopTimeout <= 0 {
		stopTimeout = defaultGuardStopTimeout
	}
	killGroup(pid, syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(stopTimeout):
		e.logger.Info("the guard did not stop after SIGTERM; killing it", "pid", pid, "waited", stopTimeout.String())
		killGroup(pid, syscall.SIGKILL)
		<-g.done
	}
	killGroup(pid, syscall.SIGKILL) // anything it left behind
	e.logger.Info("guard stopped", "pid", pid, "exit", fmt.Sprint(g.exitErr))
	return nil
}

// killGroup signals the process group led by pid, ignoring a group that is gone.
func killGroup(pid int, sig syscall.Signal) {
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = syscall.Kill(pid, sig)
	}
}

// freePorts returns n distinct free TCP ports on the local host.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(localHost, "0"))
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitGuardReady polls the guard's /readyz until it answers 200.
func waitGuardReady(ctx context.Context, g *guardProcess) error {
	url := "http://" + net.JoinHostPort(localHost, strconv.Itoa(g.healthPort)) + "/readyz"
	httpClient := &http.Client{Timeout: 2 * time.Second}
	return waitReadyz(ctx, httpClient, url, guardReadyTimeout, g.done, func() error {
		return fmt.Errorf("the guard exited before it was ready: %v", g.exitErr)
	})
}

// waitAdmissionRoundTrip makes a server-side dry-run create of a
// MachineDeployment with a version, which the guard's MachineDeployment
// webhooks select, until the API server reaches the guard: the create comes
// back stamped by the guard's mutating webhook, or is refused by a webhook.
// Creates fail open (failurePolicy Ignore), so an admitted create without
// the stamp means the API server could not call the guard yet (as while the
// registration still names an old port).
func (e *Environment) waitAdmissionRoundTrip(ctx context.Context, g *guardProcess) error {
	deadline := time.Now().Add(guardRoundTripTimeout)
	for {
		probe := admissionProbe()
		err := e.Client.Create(ctx, probe, client.DryRunAll)
		if err == nil && probe.Annotations[revisions.AnnotationRevision] != "" || err != nil && strings.Contains(err.Error(), "denied the request") {
			return nil
		}
		if err == nil {
			err = errors.New("a dry-run create came back without the guard's stamp: the API server did not reach the guard")
		} else if !strings.Contains(err.Error(), "failed calling webhook") {
			return fmt.Errorf("admission round trip: %w", err)
		}
		select {
		case <-g.done:
			return fmt.Errorf("the guard exited: %v", g.exitErr)
		case <-ctx.Done():
			return fmt.Errorf("admission round trip: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no admission round trip within %s: %w", guardRoundTripTimeout, err)
		}
	}
}

// admissionProbe is a valid v1beta2 MachineDeployment with a version set.
func admissionProbe() *clusterv1.MachineDeployment {
	return builder.MachineDeployment(metav1.NamespaceDefault, probeName).WithClusterName(probeName).WithReplicas(0).
		WithSelector(map[string]string{"rollout-guard.io/probe": "true"}).WithVersion("v1.36.0").
		WithBootstrapDataSecret(probeName).WithInfrastructureRef("ProbeMachineTemplate", probeName).Build()
}
