package topology

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

const (
	// rolloutTimeout bounds a wait for the controllers (a machine, a
	// rollout, a chained upgrade).
	rolloutTimeout = 8 * time.Minute
	// pollInterval is how often waits read the API server.
	pollInterval = 500 * time.Millisecond
	// bypass is Cluster API's annotation that skips its own topology
	// version checks (not the guard's).
	bypass = clusterv1.ClusterTopologyUnsafeUpdateVersionAnnotation
	// Some of the guard's webhooks, as the API server names them: validating
	// and stamping (mutating) updates.
	guardClusterWebhook  = "validate.cluster.rollout-guard.io"
	guardKCPWebhook      = "validate.kubeadmcontrolplane.rollout-guard.io"
	guardMDWebhook       = "validate.machinedeployment.rollout-guard.io"
	guardStampKCPWebhook = "stamp.kubeadmcontrolplane.rollout-guard.io"
	guardStampMDWebhook  = "stamp.machinedeployment.rollout-guard.io"
	// guardWebhookSuffix ends the name of every webhook of the guard.
	guardWebhookSuffix = ".rollout-guard.io"
)

// kubectl runs the repository's bin/kubectl against the sandbox, in the
// clusters' namespace, and returns its stdout and stderr.
func kubectl(args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(filepath.Join(sb.Env.BinDir, "kubectl"),
		append([]string{"--kubeconfig", sb.Kubeconfig, "-n", cc.Namespace}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// mustKubectl runs kubectl and fails the test when it fails.
func mustKubectl(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, err := kubectl(args...)
	require.NoError(t, err, "kubectl %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), stdout, stderr)
	return stdout, stderr
}

// patchTopologyVersion sets spec.topology.version of Cluster name with one
// kubectl patch, as an operator would.
func patchTopologyVersion(name, version string) (stdout, stderr string, err error) {
	return kubectl("patch", "cluster", name, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"topology":{"version":%q}}}`, version))
}

// setBypass sets or removes Cluster API's bypass annotation on Cluster name.
func setBypass(t *testing.T, name string, on bool) {
	t.Helper()
	if on {
		mustKubectl(t, "annotate", "--overwrite", "cluster", name, bypass+"=")
		return
	}
	mustKubectl(t, "annotate", "cluster", name, bypass+"-")
}

// setPaused pauses or resumes Cluster name (spec.paused): Cluster API's
// controllers, the topology controller among them, leave it alone meanwhile.
func setPaused(t *testing.T, name string, paused bool) {
	t.Helper()
	mustKubectl(t, "patch", "cluster", name, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"paused":%t}}`, paused))
}

// controlPlaneMachines returns the versions of the control-plane Machines of
// Cluster name, by Machine name.
func controlPlaneMachines(t *testing.T, name string) map[string]string {
	t.Helper()
	list := &clusterv1.MachineList{}
	require.NoError(t, sb.Client.List(context.Background(), list, client.InNamespace(cc.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: name}, client.HasLabels{clusterv1.MachineControlPlaneLabel}))
	out := map[string]string{}
	for _, m := range list.Items {
		out[m.Name] = m.Spec.Version
	}
	return out
}

// allMachines returns the versions of every Machine of Cluster name that is
// not being deleted, by Machine name.
func allMachines(t *testing.T, name string) map[string]string {
	t.Helper()
	list := &clusterv1.MachineList{}
	require.NoError(t, sb.Client.List(context.Background(), list, client.InNamespace(cc.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: name}))
	out := map[string]string{}
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() {
			out[m.Name] = m.Spec.Version
		}
	}
	return out
}

// waitForControlPlaneMachineAt waits until Cluster name has a control-plane
// Machine with version.
func waitForControlPlaneMachineAt(t *testing.T, name, version string) {
	t.Helper()
	framework.WaitFor(t, rolloutTimeout, pollInterval, "a control-plane Machine of "+name+" at "+version, func() (bool, string) {
		got := controlPlaneMachines(t, name)
		for _, v := range got {
			if v == version {
				return true, ""
			}
		}
		return false, fmt.Sprint(got)
	})
}

// kcp reads KubeadmControlPlane name.
func kcp(t *testing.T, name string) *controlplanev1.KubeadmControlPlane {
	t.Helper()
	k := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, sb.Client.Get(context.Background(), client.ObjectKey{Namespace: cc.Namespace, Name: name}, k))
	return k
}

// guardRejections returns how many requests each of the guard's webhooks
// has refused, as the API server counts them
// (apiserver_admission_webhook_rejection_count), by webhook name: the
// validating ones (validate.*, validate-create.*) and the stamping ones
// (stamp.*, stamp-create.*), every one named in the registration, those
// that never refused anything at 0. It counts every refusal, or with
// deniedOnly only the requests the guard answered with a denial (error type
// no_error), leaving out calls that failed to reach it. The counts start
// again at zero when kube-apiserver restarts. It retries for a minute while
// the API server does not answer.
func guardRejections(t *testing.T, deniedOnly bool) map[string]float64 {
	t.Helper()
	var samples []framework.Sample
	var err error
	require.Eventually(t, func() bool {
		samples, err = framework.APIServerMetrics(context.Background(), sb.Config)
		return err == nil
	}, time.Minute, 500*time.Millisecond, "reading the API server's metrics")
	out := map[string]float64{}
	for _, name := range guardWebhookNames(t) {
		out[name] = 0
	}
	for _, sample := range samples {
		if sample.Name != "apiserver_admission_webhook_rejection_count" ||
			deniedOnly && sample.Labels["error_type"] != "no_error" {
			continue
		}
		if name := sample.Labels["name"]; strings.HasSuffix(name, guardWebhookSuffix) {
			out[name] += sample.Value
		}
	}
	return out
}

// guardWebhookNames returns the names of the webhooks of the guard's
// validating and mutating configurations as registered in the sandbox.
func guardWebhookNames(t *testing.T) []string {
	t.Helper()
	var names []string
	validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	require.NoError(t, sb.Client.List(context.Background(), validating))
	for _, cfg := range validating.Items {
		for _, w := range cfg.Webhooks {
			if strings.HasSuffix(w.Name, guardWebhookSuffix) {
				names = append(names, w.Name)
			}
		}
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	require.NoError(t, sb.Client.List(context.Background(), mutating))
	for _, cfg := range mutating.Items {
		for _, w := range cfg.Webhooks {
			if strings.HasSuffix(w.Name, guardWebhookSuffix) {
				names = append(names, w.Name)
			}
		}
	}
	require.NotEmpty(t, names, "the guard's webhooks are registered")
	return names
}

// history returns `rollout history RES -o json` of a resource of the
// clusters' namespace.
func history(t *testing.T, resource string) v1alpha1.RolloutHistory {
	t.Helper()
	run := sb.RunCLI(t.TempDir(), cc.Namespace, "history", resource, "-o", "json")
	require.Equal(t, 0, run.Code, "rollout history %s\nstdout: %s\nstderr: %s", resource, run.Stdout, run.Stderr)
	var h v1alpha1.RolloutHistory
	require.NoError(t, json.Unmarshal([]byte(run.Stdout), &h), run.Stdout)
	return h
}
