// Command kube-controller-manager is the upstream Kubernetes controller
// manager, built from k8s.io/kubernetes for the test environment's node
// (test/framework, Node): it runs the controllers of Deployments,
// ReplicaSets, EndpointSlices, ServiceAccounts and Nodes. make node-tools
// builds it.
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
