// Package install proves that rollout-guard installs as it ships: the
// kustomize bases under config/ build and every object they make is accepted
// by a real kube-apiserver (with cert-manager's CRDs installed); the guard
// runs with nothing but the shipped RBAC (as its ServiceAccount) and uses
// every right it is given for what it is given for; its metrics answer only
// authorized callers; and its serving certificate and the CA bundle of its
// webhook configurations can be replaced while it runs, without a restart
// and without one failed admission request; with client-certificate
// authentication on (--client-ca-name, kube-apiserver's admission
// kubeconfig), the API server's calls are judged and a client without the
// API server's certificate is refused at the TLS handshake; and, at its default
// --history-limit, it prunes each object's history to 20 revisions, keeping
// the live one and those that raised a control plane's highest versions.
package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// env is the package's one API server, with the guard running as its
// ServiceAccount, leader election on, metrics served and client
// certificates required: the API server presents the environment's client
// certificate (framework.Options.GuardClientAuth), and so must every test
// that dials the guard's webhook port itself.
var env *framework.Environment

// TestMain starts the package's environment, installs cert-manager's CRDs,
// runs the tests and stops everything again.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logFile, err := os.CreateTemp("", "rollout-guard-install-*.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating the log file:", err)
		return 1
	}
	defer logFile.Close()
	fmt.Fprintln(os.Stderr, "guard and API server logs:", logFile.Name())
	// The clients' own log (API server warnings, for one) goes there too.
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile), zap.ConsoleEncoder()))
	begin := time.Now()
	env, err = framework.Start(ctx, framework.Options{
		StartGuard:      true,
		GuardMetrics:    true,
		GuardClientAuth: true,
		GuardArgs:       []string{"--leader-elect", "--leader-election-namespace=" + framework.GuardNamespace},
		// As the Deployment's terminationGracePeriodSeconds.
		GuardStopTimeout: 20 * time.Second,
		Log:              logFile,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test environment:", err)
		return 1
	}
	code := func() int {
		if err := env.InstallCertManagerCRDs(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "environment with the guard and cert-manager's CRDs ready in %s\n", time.Since(begin).Round(time.Millisecond))
		return m.Run()
	}()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test environment:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// repoPath returns path (slash-separated, relative to the repository root)
// as an absolute path.
func repoPath(path string) string {
	return filepath.Join(env.RepoRoot, filepath.FromSlash(path))
}
