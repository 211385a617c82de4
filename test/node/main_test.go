// Package node proves the test environment's node (framework.StartNode):
// containerd, kube-controller-manager, kube-scheduler and the kubelet run
// against the environment's API server, the Node becomes Ready, an image
// imported without a registry runs as a Deployment of two replicas under the
// restricted Pod Security Standard, the host reaches the Pods at their IPs,
// the API server reaches them through their Service and reads their logs
// from the kubelet, and the Pods reach the API server as their
// ServiceAccount through the kubernetes Service, with no kube-proxy.
//
// It needs root on Linux (it is skipped otherwise) and make node-tools.
package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

var (
	// env and node are the package's environment and its node; nil when
	// skipReason is set.
	env  *framework.Environment
	node *framework.Node
	// skipReason says why the package's tests skip.
	skipReason string
)

// TestMain starts the environment (without the guard) and the node, runs the
// tests and stops both.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	switch {
	case runtime.GOOS != "linux":
		skipReason = "the node runs only on Linux"
		return m.Run()
	case os.Geteuid() != 0:
		skipReason = "the node needs root (containerd, the kubelet, iptables)"
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	logFile, err := os.CreateTemp("", "rollout-guard-node-*.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating the log file:", err)
		return 1
	}
	defer logFile.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))
	workDir, err := os.MkdirTemp("", "rollout-guard-node-env-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating the work directory:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "environment log:", logFile.Name(), "- files and node logs:", workDir, "(both removed after a pass)")

	args, err := framework.NodeAPIServerArgs(filepath.Join(workDir, "node-apiserver"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	begin := time.Now()
	env, err = framework.Start(ctx, framework.Options{Log: logFile, WorkDir: workDir, APIServerArgs: args})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the environment:", err)
		return 1
	}
	envReady := time.Since(begin)
	node, err = framework.StartNode(ctx, env, framework.NodeOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if stopErr := env.Stop(); stopErr != nil {
			fmt.Fprintln(os.Stderr, "stopping the environment:", stopErr)
		}
		return 1
	}
	fmt.Fprintf(os.Stderr, "environment ready after %s, node %s Ready %s later\n",
		envReady.Round(time.Millisecond), node.Name, (time.Since(begin) - envReady).Round(time.Millisecond))

	code := m.Run()

	if err := node.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the node:", err)
		code = 1
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the environment:", err)
		code = 1
	}
	if code == 0 {
		_ = os.RemoveAll(workDir)
		_ = os.Remove(logFile.Name())
	}
	return code
}

// requireNode skips the test where the package cannot run a node.
func requireNode(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}
