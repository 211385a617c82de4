package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

const (
	// rolloutTimeout bounds a wait for the controllers (a rollout, a
	// chained upgrade).
	rolloutTimeout = 6 * time.Minute
	// pollInterval is how often waits read the API server.
	pollInterval = 500 * time.Millisecond
)

// cli runs the rollout CLI in-process against the sandbox, in the
// clusters' namespace.
func cli(t *testing.T, args ...string) sandbox.CLIRun {
	t.Helper()
	run := sb.RunCLI(t.TempDir(), demo.Namespace, args...)
	t.Logf("rollout %s → exit %d (%s)", strings.Join(args, " "), run.Code, run.Took.Round(time.Millisecond))
	return run
}

// plan runs `rollout plan ARGS -o json`, validates the output against
// rollout/api/v1alpha1/plan.schema.json and decodes the plan; it fails the test unless
// the exit code is want.
func plan(t *testing.T, want int, args ...string) (*v1alpha1.RolloutPlan, sandbox.CLIRun) {
	t.Helper()
	return decodePlan(t, want, args, cli(t, append(append([]string{"plan"}, args...), "-o", "json")...))
}

// decodePlan checks a run of `rollout plan ARGS -o json`: its exit code is
// want, its output matches rollout/api/v1alpha1/plan.schema.json and decodes into a
// RolloutPlan with no field the type does not know.
func decodePlan(t *testing.T, want int, args []string, run sandbox.CLIRun) (*v1alpha1.RolloutPlan, sandbox.CLIRun) {
	t.Helper()
	require.Equal(t, want, run.Code, "rollout plan %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), run.Stdout, run.Stderr)
	requireSchemaValid(t, run.Stdout)
	p := &v1alpha1.RolloutPlan{}
	dec := json.NewDecoder(strings.NewReader(run.Stdout))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(p), run.Stdout)
	require.Equal(t, v1alpha1.PlanAPIVersion, p.APIVersion)
	require.Equal(t, v1alpha1.PlanKind, p.Kind)
	return p, run
}

// report runs `rollout plan ARGS` for people and logs it.
func report(t *testing.T, want int, args ...string) sandbox.CLIRun {
	t.Helper()
	run := cli(t, append([]string{"plan"}, args...)...)
	require.Equal(t, want, run.Code, "rollout plan %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), run.Stdout, run.Stderr)
	t.Logf("rollout plan %s:\n%s%s", strings.Join(args, " "), run.Stdout, run.Stderr)
	return run
}

// kubectl runs the repository's bin/kubectl against the sandbox in the
// clusters' namespace and fails the test when it fails.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(sb.Env.BinDir, "kubectl"), append([]string{"--kubeconfig", sb.Kubeconfig, "-n", demo.Namespace}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "kubectl %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out.String(), errOut.String())
	return out.String()
}

// machines returns the Machines matching labels that are not being
// deleted: name → version.
func machines(t *testing.T, labels client.MatchingLabels) map[string]string {
	t.Helper()
	list := &clusterv1.MachineList{}
	require.NoError(t, sb.Client.List(context.Background(), list, client.InNamespace(demo.Namespace), labels))
	out := map[string]string{}
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() {
			out[m.Name] = m.Spec.Version
		}
	}
	return out
}

// keys returns the sorted keys of m.
func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// workers select demo's worker Machines; controlPlane its control plane's.
func workers() client.MatchingLabels {
	return client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: demo.MachineDeploymentName()}
}

func controlPlane() client.MatchingLabels {
	return client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: demo.ControlPlaneName()}
}

// planned returns the names of a plan's machines with action, sorted.
func planned(op v1alpha1.ObjectPlan, action string) []string {
	var out []string
	for _, m := range op.Machines {
		if m.Action == action {
			out = append(out, m.Name)
		}
	}
	sort.Strings(out)
	return out
}

// rolledOut waits with `rollout status` until res is rolled out.
func rolledOut(t *testing.T, res string) {
	t.Helper()
	run := cli(t, "status", res, "--timeout", rolloutTimeout.String())
	require.Equal(t, 0, run.Code, "rollout status %s\nstdout: %s\nstderr: %s", res, run.Stdout, run.Stderr)
}

// stored is what the API server stores of an object and of its history:
// its resourceVersion and every RolloutRevision of it with its own.
type stored struct {
	resourceVersion string
	revisions       map[string]string
}

// storedOf reads obj (by kind and name) and its recorded history.
func storedOf(t *testing.T, obj client.Object) stored {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, sb.Client.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{revisions.LabelOwnerUID: string(obj.GetUID())}))
	s := stored{resourceVersion: obj.GetResourceVersion(), revisions: map[string]string{}}
	for _, cr := range list.Items {
		s.revisions[cr.Name] = cr.ResourceVersion
	}
	return s
}

func (s stored) String() string {
	return fmt.Sprintf("resourceVersion %s, revisions %v", s.resourceVersion, s.revisions)
}
