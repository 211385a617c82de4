// Command rollout is the rollout-guard CLI: restart, pause, resume, status,
// history, undo and the template switch for Cluster API MachineDeployments
// and KubeadmControlPlanes, and restart, status and history for whole
// Clusters (ClusterClass upgrades included), and plan, the preview of any of
// these changes. Installed as
// kubectl-capi-rollout on the PATH it is also `kubectl capi rollout`. The
// work lives in package rollout.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/rollout-guard/rollout-guard/rollout"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := rollout.Execute(ctx, rollout.Options{
		IOStreams:   genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
		Version:     version,
		DisplayName: rollout.PluginDisplayName(os.Args[0]),
	}, os.Args[1:])
	stop()
	os.Exit(code)
}
