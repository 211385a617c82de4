// Package monitoring proves the monitoring that config/prometheus ships with
// the real tools, as operators run them:
//
//   - the alert rules (config/prometheus/rules.yaml) pass `promtool check
//     rules` and their unit tests (config/prometheus/tests) pass `promtool
//     test rules`, Prometheus's own rule engine; every alert has a case
//     where it fires and one where it must not, and a broken copy of each
//     alert fails its tests;
//   - the PrometheusRule is the rules file, byte for byte under spec;
//   - kube-state-metrics, run with config/prometheus/kube-state-metrics.yaml
//     against the sandbox, reports the demo cluster's rollout state, and
//     during a real `rollout restart` of its 3 workers its up-to-date count
//     goes 3, 0, 1, 2, 3 as Cluster API's status does.
//
// promtool and kube-state-metrics are built from their Go modules into bin/
// by `make monitoring-tools` (hack/tools/install-monitoring.sh, a
// prerequisite of make e2e); the tests run the binaries, so neither enters
// the test module's dependencies.
package monitoring

import (
	"os"
	"testing"
	"time"

	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// The demo cluster: one control-plane Machine and the 3 workers whose
// restart the kube-state-metrics test watches.
const (
	cpMachines     = 1
	workerMachines = 3
)

var (
	sb   *sandbox.Sandbox
	demo sandbox.ClusterSpec
)

var figures sandbox.Figures

func TestMain(m *testing.M) {
	os.Exit(sandbox.RunTests(m, "monitoring", sandbox.Options{
		ControlPlaneMachines: cpMachines,
		WorkerMachines:       workerMachines,
	}, &figures, func(s *sandbox.Sandbox) {
		sb, demo = s, s.Clusters[0]
		figures.Add("sandbox ready (demo %d+%d machines): %s", cpMachines, workerMachines, s.ReadyAfter.Round(100*time.Millisecond))
	}))
}
