package monitoring

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// scrape is what one scrape of /metrics returned.
type scrape []framework.Sample

// find returns the samples of name whose labels include match.
func (s scrape) find(name string, match map[string]string) []framework.Sample {
	return framework.Select(s, name, match)
}

// value returns the value of the one sample of name matching match, and
// whether there is exactly one.
func (s scrape) value(name string, match map[string]string) (float64, bool) {
	found := s.find(name, match)
	if len(found) != 1 {
		return 0, false
	}
	return found[0].Value, true
}

// freePort returns a local TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// startKubeStateMetrics runs bin/kube-state-metrics against the sandbox
// with config/prometheus/kube-state-metrics.yaml, as an operator would (the
// Custom Resource State metrics only), and returns the URL of its metrics.
// It stops with the test; its log is printed when the test failed.
func startKubeStateMetrics(t *testing.T) string {
	t.Helper()
	port, telemetryPort := freePort(t), freePort(t)
	logPath := filepath.Join(t.TempDir(), "kube-state-metrics.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(binary(t, "kube-state-metrics"),
		"--kubeconfig", sb.Kubeconfig,
		"--custom-resource-state-only",
		"--custom-resource-state-config-file", filepath.Join(configDir(t), "kube-state-metrics.yaml"),
		"--host", "127.0.0.1", "--port", port,
		"--telemetry-host", "127.0.0.1", "--telemetry-port", telemetryPort)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childProcAttr()
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("kube-state-metrics log:\n%s", data)
		}
	})
	return "http://127.0.0.1:" + port + "/metrics"
}

// get scrapes url once.
func get(url string) (scrape, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return framework.ParseMetrics(resp.Body)
}

// TestKubeStateMetricsFollowARestart runs kube-state-metrics with the
// shipped configuration against the sandbox, checks what it reports of the
// demo cluster at rest, then restarts the cluster's worker pool with the CLI
// and scrapes it throughout: the up-to-date count must go 3, 0, 1, 2, 3
// (Cluster API replaces one Machine at a time: maxSurge 1, maxUnavailable
// 0), RollingOut must be seen True and end False, and the guard's revision
// must stay (a restart is no new revision).
func TestKubeStateMetricsFollowARestart(t *testing.T) {
	url := startKubeStateMetrics(t)
	ns, mdName, cpName := demo.Namespace, demo.MachineDeploymentName(), demo.ControlPlaneName()
	md, cp := map[string]string{"namespace": ns, "name": mdName}, map[string]string{"namespace": ns, "name": cpName}

	var s scrape
	began := time.Now()
	framework.WaitFor(t, 2*time.Minute, 250*time.Millisecond, "kube-state-metrics to report the demo cluster", func() (bool, string) {
		var err error
		if s, err = get(url); err != nil {
			return false, err.Error()
		}
		_, mdOK := s.value("capi_machinedeployment_status_replicas_uptodate", md)
		_, cpOK := s.value("capi_kubeadmcontrolplane_status_replicas_uptodate", cp)
		return mdOK && cpOK, fmt.Sprintf("%d samples", len(s))
	})
	figures.Add("kube-state-metrics: first full scrape %s after start", time.Since(began).Round(100*time.Millisecond))

	// The guard's revision stamps, as the objects carry them.
	liveMD, liveCP := &clusterv1.MachineDeployment{}, &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, sb.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: mdName}, liveMD))
	require.NoError(t, sb.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: cpName}, liveCP))
	mdRevision, err := strconv.ParseFloat(liveMD.Annotations[revisions.AnnotationRevision], 64)
	require.NoError(t, err, "the MachineDeployment's revision stamp")
	cpRevision, err := strconv.ParseFloat(liveCP.Annotations[revisions.AnnotationRevision], 64)
	require.NoError(t, err, "the control plane's revision stamp")
	require.Positive(t, mdRevision)
	require.Positive(t, cpRevision)

	with := func(base map[string]string, extra ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(extra); i += 2 {
			out[extra[i]] = extra[i+1]
		}
		return out
	}
	cluster := map[string]string{"namespace": ns, "name": demo.Name}
	version := demo.KubernetesVersion
	if version == "" {
		version = sandbox.DefaultKubernetesVersion
	}
	atRest := []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"capi_machinedeployment_spec_replicas", md, workerMachines},
		{"capi_machinedeployment_status_replicas", md, workerMachines},
		{"capi_machinedeployment_status_replicas_uptodate", md, workerMachines},
		{"capi_machinedeployment_status_replicas_ready", md, workerMachines},
		{"capi_machinedeployment_status_replicas_available", md, workerMachines},
		{"capi_machinedeployment_spec_paused", md, 0},
		{"capi_machinedeployment_status_condition", with(md, "type", "RollingOut", "status", "False"), 1},
		{"capi_machinedeployment_status_condition", with(md, "type", "RollingOut", "status", "True"), 0},
		{"capi_machinedeployment_status_condition", with(md, "type", "Available", "status", "True"), 1},
		{"capi_machinedeployment_info", with(md, "version", version, "cluster_name", demo.Name, "customresource_kind", "MachineDeployment"), 1},
		{"capi_machinedeployment_rollout_guard_revision", md, mdRevision},
		{"capi_kubeadmcontrolplane_spec_replicas", cp, cpMachines},
		{"capi_kubeadmcontrolplane_status_replicas_uptodate", cp, cpMachines},
		{"capi_kubeadmcontrolplane_status_replicas_available", cp, cpMachines},
		{"capi_kubeadmcontrolplane_status_condition", with(cp, "type", "RollingOut", "status", "False"), 1},
		{"capi_kubeadmcontrolplane_info", with(cp, "version", version, "cluster_name", demo.Name), 1},
		{"capi_kubeadmcontrolplane_rollout_guard_revision", cp, cpRevision},
		{"capi_cluster_spec_paused", cluster, 0},
		{"capi_cluster_status_workers_replicas_uptodate", cluster, workerMachines},
		{"capi_cluster_status_controlplane_replicas_uptodate", cluster, cpMachines},
		{"capi_cluster_status_condition", with(cluster, "type", "RollingOut", "status", "False"), 1},
	}
	for _, tc := range atRest {
		t.Run("at rest/"+tc.metric+fmt.Sprint(tc.labels), func(t *testing.T) {
			got, ok := s.value(tc.metric, tc.labels)
			require.True(t, ok, "no single sample of %s%v among %d:\n%s", tc.metric, tc.labels, len(s), s.find(tc.metric, nil))
			assert.Equal(t, tc.want, got)
		})
	}
	workers := machineNames(s, map[string]string{"namespace": ns, "machine_deployment": mdName, "version": version})
	require.Len(t, workers, workerMachines, "capi_machine_info of the pool's Machines")
	require.Len(t, machineNames(s, map[string]string{"namespace": ns, "control_plane": cpName, "version": version}), cpMachines)

	// The restart, scraped every 200 ms until the pool is back at rest.
	run := sb.RunCLI(t.TempDir(), ns, "restart", "machinedeployment/"+mdName)
	require.Equal(t, 0, run.Code, "rollout restart\nstdout: %s\nstderr: %s", run.Stdout, run.Stderr)
	restarted := time.Now()
	var upToDate []float64
	var steps []string
	sawRollingOut := false
	framework.WaitFor(t, 5*time.Minute, 200*time.Millisecond, "the restart to end in kube-state-metrics", func() (bool, string) {
		var err error
		if s, err = get(url); err != nil {
			return false, err.Error()
		}
		n, ok := s.value("capi_machinedeployment_status_replicas_uptodate", md)
		if !ok {
			return false, "no up-to-date count"
		}
		if len(upToDate) == 0 || upToDate[len(upToDate)-1] != n {
			upToDate = append(upToDate, n)
			steps = append(steps, fmt.Sprintf("%g at %s", n, time.Since(restarted).Round(100*time.Millisecond)))
		}
		rolling, _ := s.value("capi_machinedeployment_status_condition", with(md, "type", "RollingOut", "status", "True"))
		sawRollingOut = sawRollingOut || rolling == 1
		available, _ := s.value("capi_machinedeployment_status_replicas_available", md)
		now := machineNames(s, map[string]string{"namespace": ns, "machine_deployment": mdName})
		replaced := len(now) == workerMachines && !slices.ContainsFunc(now, func(n string) bool { return slices.Contains(workers, n) })
		return n == workerMachines && available == workerMachines && rolling == 0 && replaced && sawRollingOut,
			fmt.Sprintf("up-to-date %v, available %g, RollingOut %g, machines %v", upToDate, available, rolling, now)
	})
	figures.Add("restart of %s: up-to-date count %s", mdName, strings.Join(steps, ", "))
	t.Logf("up-to-date count seen by kube-state-metrics: %s", strings.Join(steps, ", "))

	assert.Equal(t, []float64{3, 0, 1, 2, 3}, upToDate, "the up-to-date count of %s during the restart", mdName)
	assert.True(t, sawRollingOut, "RollingOut was never True")
	got, ok := s.value("capi_machinedeployment_rollout_guard_revision", md)
	assert.True(t, ok)
	assert.Equal(t, mdRevision, got, "a restart keeps the revision")
	got, ok = s.value("capi_cluster_status_workers_replicas_uptodate", cluster)
	assert.True(t, ok)
	assert.EqualValues(t, workerMachines, got)
	for _, name := range machineNames(s, map[string]string{"namespace": ns, "machine_deployment": mdName}) {
		v, ok := s.value("capi_machine_status_condition", map[string]string{"namespace": ns, "name": name, "type": "UpToDate", "status": "True"})
		assert.True(t, ok && v == 1, "Machine %s is not reported UpToDate", name)
	}
}

// machineNames returns the names of the Machines whose capi_machine_info
// matches labels, sorted.
func machineNames(s scrape, labels map[string]string) []string {
	var names []string
	for _, x := range s.find("capi_machine_info", labels) {
		names = append(names, x.Labels["name"])
	}
	sort.Strings(names)
	return names
}
