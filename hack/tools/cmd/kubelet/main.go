// Command kubelet is the upstream Kubernetes node agent, built from
// k8s.io/kubernetes so that the test environment's node (test/framework,
// Node) runs Pods against the real thing without downloading release
// binaries. make node-tools builds it.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
