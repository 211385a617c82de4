// Package e2e proves the guard through a real kube-apiserver: every request
// goes from a client, through the API server (and Cluster API's conversion
// webhook for v1beta1), over TLS to the guard registered from
// config/webhook/manifests.yaml, exactly as in a management cluster. The
// concurrent writers' test runs bin/webhook-race, the guard built with the
// race detector (env.WithRaceGuard): a data race it reports fails it.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// env is the one API server and guard that every test of this package shares.
var env *framework.Environment

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	logFile, err := os.CreateTemp("", "rollout-guard-e2e-*.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating the log file:", err)
		return 1
	}
	defer logFile.Close()
	fmt.Fprintln(os.Stderr, "guard and API server logs:", logFile.Name())
	// The guard starts once the control-plane kind it lists is served
	// (contract_controlplane_test.go). It serves the BeforeClusterUpgrade
	// extension too (wavehold_test.go), which only adds its paths.
	env, err = framework.Start(ctx, framework.Options{Log: logFile, GuardMetrics: true, GuardArgs: []string{"--override-groups=" + overrideGroup, "--history-limit=1000", controlPlaneKindsArg,
		"--wave-hold", "--wave-soak=" + waveSoak}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test environment:", err)
		return 1
	}
	if err := installContractKinds(ctx, env); err != nil {
		fmt.Fprintln(os.Stderr, "installing the control-plane kinds of other providers:", err)
		_ = env.Stop()
		return 1
	}
	if err := env.StartGuard(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "starting the guard:", err)
		_ = env.Stop()
		return 1
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test environment:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
