// Package certmanager proves the test environment's cert-manager: its own
// controller and CA injector (bin/cert-manager-controller and
// bin/cert-manager-cainjector, built by make cert-manager-tools from the
// version hack/tools/cert-manager pins), run against a real kube-apiserver
// with cert-manager's CRDs, issue Certificates of SelfSigned and CA Issuers
// into their Secrets, inject the CA of a Certificate into a webhook
// configuration that names it, and reissue a Certificate on request.
package certmanager

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

var (
	// env is the package's API server; cm runs cert-manager against it.
	env *framework.Environment
	cm  *framework.CertManager
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := framework.FindRepoRoot(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, name := range []string{framework.CertManagerController, framework.CertManagerCAInjector} {
		if _, err := os.Stat(filepath.Join(root, "bin", name)); err != nil {
			fmt.Fprintf(os.Stderr, "bin/%s is missing: build it with make cert-manager-tools (make e2e does)\n", name)
			return 1
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	logFile, err := os.CreateTemp("", "rollout-guard-certmanager-*.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating the log file:", err)
		return 1
	}
	defer logFile.Close()
	fmt.Fprintln(os.Stderr, "API server and environment logs:", logFile.Name())
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile), zap.ConsoleEncoder()))
	begin := time.Now()
	env, err = framework.Start(ctx, framework.Options{Log: logFile})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test environment:", err)
		return 1
	}
	code := func() int {
		if cm, err = env.StartCertManager(ctx, framework.CertManagerOptions{}); err != nil {
			fmt.Fprintln(os.Stderr, "starting cert-manager:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "environment with cert-manager %s ready in %s; its logs: %s, %s\n",
			cm.Version, time.Since(begin).Round(time.Millisecond), cm.ControllerLog, cm.CAInjectorLog)
		code := m.Run()
		if err := cm.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping cert-manager:", err)
			return 1
		}
		return code
	}()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test environment:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
