package monitoring

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// update rewrites config/prometheus/prometheusrule.yaml from rules.yaml.
var update = flag.Bool("update", false, "rewrite config/prometheus/prometheusrule.yaml from rules.yaml")

// configDir returns config/prometheus of the repository.
func configDir(t *testing.T) string {
	t.Helper()
	root, err := framework.FindRepoRoot(".")
	require.NoError(t, err)
	return filepath.Join(root, "config", "prometheus")
}

// binary returns the path of bin/NAME, failing t when make tools has not
// built it: the tests prove the monitoring with the real tools or not at all.
func binary(t *testing.T, name string) string {
	t.Helper()
	root, err := framework.FindRepoRoot(".")
	require.NoError(t, err)
	path := filepath.Join(root, "bin", name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: %v (make tools builds it)", path, err)
	}
	return path
}

// promtool runs bin/promtool with args in dir and returns its combined
// output and whether it exited 0.
func promtool(t *testing.T, dir string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(binary(t, "promtool"), args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("running promtool %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), err == nil
}

// ruleTestFiles returns the rule unit-test files, relative to configDir.
func ruleTestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(configDir(t), "tests", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no rule tests in config/prometheus/tests")
	for i, f := range files {
		files[i] = filepath.Join("tests", filepath.Base(f))
	}
	return files
}

// ruleFile is the part of Prometheus's rule-file format the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert string `json:"alert"`
			Expr  string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// alerts returns the names of the alerts of rules.yaml.
func alerts(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(configDir(t), "rules.yaml"))
	require.NoError(t, err)
	var rf ruleFile
	require.NoError(t, yaml.Unmarshal(data, &rf))
	var names []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	return names
}

func TestPromtoolChecksTheRules(t *testing.T) {
	out, ok := promtool(t, configDir(t), "check", "rules", "rules.yaml")
	require.True(t, ok, out)
	assert.Contains(t, out, "SUCCESS: 7 rules found", "a rule added or lost: update this test and the tables of docs/monitoring.md")
}

func TestAlertRulesPassTheirUnitTests(t *testing.T) {
	for _, file := range ruleTestFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			out, ok := promtool(t, configDir(t), "test", "rules", file)
			t.Log(out)
			require.True(t, ok, "promtool test rules %s failed:\n%s", file, out)
			assert.Contains(t, out, "SUCCESS")
		})
	}
}

// TestEveryAlertIsTestedBothWays: every alert of rules.yaml has a test
// case in which it fires and one in which it must stay silent.
func TestEveryAlertIsTestedBothWays(t *testing.T) {
	type evalCase struct {
		Alert     string           `json:"alertname"`
		ExpAlerts []map[string]any `json:"exp_alerts"`
	}
	var tests struct {
		Tests []struct {
			Name   string     `json:"name"`
			Alerts []evalCase `json:"alert_rule_test"`
		} `json:"tests"`
	}
	fires, silent := map[string]int{}, map[string]int{}
	for _, file := range ruleTestFiles(t) {
		data, err := os.ReadFile(filepath.Join(configDir(t), file))
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(data, &tests))
		for _, tc := range tests.Tests {
			for _, e := range tc.Alerts {
				if len(e.ExpAlerts) > 0 {
					fires[e.Alert]++
				} else {
					silent[e.Alert]++
				}
			}
		}
	}
	names := alerts(t)
	require.Len(t, names, 7)
	for _, name := range names {
		assert.Positive(t, fires[name], "no case in which %s fires", name)
		assert.Positive(t, silent[name], "no case in which %s stays silent", name)
	}
	for name := range fires {
		assert.Contains(t, names, name, "a test of an alert rules.yaml does not have")
	}
}

// TestBrokenAlertsFailTheirTests: the unit tests catch a wrong alert. Each
// case breaks one alert of a copy of rules.yaml the way a careless edit
// would, and promtool test rules must then fail on that alert.
func TestBrokenAlertsFailTheirTests(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join(configDir(t), "rules.yaml"))
	require.NoError(t, err)
	for _, tc := range []struct {
		alert, why, old, new string
	}{
		{alert: "RolloutGuardDown", why: "absent() of the series alone misses targets that answer up == 0",
			old: `absent(up{job="rollout-guard-metrics"} == 1)`, new: `absent(up{job="rollout-guard-metrics"})`},
		{alert: "RolloutGuardDown", why: "without the readiness branch a guard that serves metrics but is not ready goes unseen",
			old: `kube_deployment_status_replicas_available{namespace="rollout-guard-system", deployment="rollout-guard-controller-manager"} == 0`,
			new: `kube_deployment_status_replicas_available{namespace="rollout-guard-system", deployment="rollout-guard-controller-manager"} < 0`},
		{alert: "RolloutGuardRefusalsSpiking", why: "a threshold no retry loop reaches",
			old: `{outcome="refused"}[15m])) > 10`, new: `{outcome="refused"}[15m])) > 100`},
		{alert: "RolloutGuardRefusalsSpiking", why: "a threshold every occasional refusal reaches",
			old: `{outcome="refused"}[15m])) > 10`, new: `{outcome="refused"}[15m])) > 0`},
		{alert: "RolloutGuardOverrideUsed", why: "increase() alone cannot see the first override of a new series",
			old: `rollout_guard_admission_decisions_total{outcome="overridden"} offset 15m`, new: `rollout_guard_admission_decisions_total{outcome="overridden"} offset 1m`},
		{alert: "RolloutGuardRevisionRecordingFailing", why: "one failure must be enough",
			old: `increase(rollout_guard_revision_record_errors_total[15m])) > 0`, new: `increase(rollout_guard_revision_record_errors_total[15m])) > 1`},
		{alert: "RolloutGuardUnverifiedRequests", why: "the API server's own retried calls are no forgery",
			old: `rollout_guard_unverified_requests_total{reason!="not-current"}`, new: `rollout_guard_unverified_requests_total`},
		{alert: "RolloutGuardNotArmed", why: "one armed replica is enough",
			old: `max(rollout_guard_armed) == 0`, new: `min(rollout_guard_armed) == 0`},
		{alert: "ClusterAPIRolloutStalled", why: "a MachineDeployment paused on purpose is not stalled",
			old: "unless on (namespace, name)\n              capi_machinedeployment_spec_paused == 1\n            ", new: ""},
		{alert: "ClusterAPIRolloutStalled", why: "a slow rollout that progresses is not stalled",
			old: `changes(capi_machinedeployment_status_replicas_uptodate[30m])`, new: `changes(capi_machinedeployment_status_replicas_uptodate[10m])`},
		{alert: "ClusterAPIRolloutStalled", why: "the control plane is watched too",
			old: `capi_kubeadmcontrolplane_status_condition{type="RollingOut", status="True"} == 1`, new: `capi_kubeadmcontrolplane_status_condition{type="RollingOut", status="True"} == 2`},
	} {
		t.Run(tc.alert+"/"+tc.why, func(t *testing.T) {
			require.Equal(t, 1, strings.Count(string(rules), tc.old), "the text to break must occur once in rules.yaml: %q", tc.old)
			dir := t.TempDir()
			broken := strings.Replace(string(rules), tc.old, tc.new, 1)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(broken), 0o644))
			require.NoError(t, os.Mkdir(filepath.Join(dir, "tests"), 0o755))
			var outs []string
			failed := false
			for _, file := range ruleTestFiles(t) {
				data, err := os.ReadFile(filepath.Join(configDir(t), file))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, file), data, 0o644))
				out, ok := promtool(t, dir, "test", "rules", file)
				outs = append(outs, out)
				failed = failed || !ok
			}
			out := strings.Join(outs, "\n")
			require.True(t, failed, "the tests pass with a broken %s:\n%s", tc.alert, out)
			assert.Contains(t, out, "alertname: "+tc.alert, "the failure names another alert:\n%s", out)
		})
	}
}

// prometheusRuleHeader is what prometheusrule.yaml has above the groups of
// rules.yaml.
const prometheusRuleHeader = `# Generated from rules.yaml (the source, unit-tested with promtool) by
#   cd test && go test ./monitoring -run TestPrometheusRuleIsTheRulesFile -update
# Do not edit: test/monitoring fails when the two differ.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: rollout-guard
  namespace: rollout-guard-system
  labels:
    app.kubernetes.io/name: rollout-guard
spec:
`

// prometheusRule returns the PrometheusRule of a rules file: its groups,
// comments included, indented under spec.
func prometheusRule(rules string) string {
	var b strings.Builder
	b.WriteString(prometheusRuleHeader)
	lines := strings.SplitAfter(rules, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "groups:") })
	for _, l := range lines[max(start, 0):] {
		if strings.TrimSpace(l) != "" {
			b.WriteString("  ")
		}
		b.WriteString(l)
	}
	return b.String()
}

// TestPrometheusRuleIsTheRulesFile: the PrometheusRule the Prometheus
// Operator installs carries exactly the rules the unit tests prove.
func TestPrometheusRuleIsTheRulesFile(t *testing.T) {
	dir := configDir(t)
	rules, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	require.NoError(t, err)
	want := prometheusRule(string(rules))
	path := filepath.Join(dir, "prometheusrule.yaml")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, string(got), "prometheusrule.yaml is not generated from rules.yaml: run this test with -update")

	// The same as YAML, not only as text: the indentation keeps every
	// block scalar and list where it was.
	var source, operator map[string]any
	require.NoError(t, yaml.Unmarshal(rules, &source))
	require.NoError(t, yaml.Unmarshal(got, &operator))
	spec, ok := operator["spec"].(map[string]any)
	require.True(t, ok, "no spec in prometheusrule.yaml")
	assert.Equal(t, source["groups"], spec["groups"])
	assert.Equal(t, "monitoring.coreos.com/v1", operator["apiVersion"])
	assert.Equal(t, "PrometheusRule", operator["kind"])
}
