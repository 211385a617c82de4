package clusterctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout"
	historyv1 "github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
)

// rolloutTimeout bounds one restart of the demo.
const rolloutTimeout = 3 * time.Minute

// result is one run of clusterctl.
type result struct {
	code           int
	stdout, stderr string
}

// runClusterctl runs bin/clusterctl with args against the sandbox, with a
// configuration directory of its own and no version check (which would
// ask the internet).
func runClusterctl(t *testing.T, args ...string) result {
	t.Helper()
	return clusterctlRun(t, append(args, "--kubeconfig", sb.Kubeconfig)...)
}

// clusterctlRun runs bin/clusterctl with args alone, as runClusterctl does.
func clusterctlRun(t *testing.T, args ...string) result {
	t.Helper()
	bin := filepath.Join(sb.Env.BinDir, "clusterctl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run make clusterctl (%v)", bin, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running clusterctl %v: %v", args, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// requireClusterctl runs clusterctl and fails the test unless it succeeds.
func requireClusterctl(t *testing.T, args ...string) string {
	t.Helper()
	r := runClusterctl(t, args...)
	require.Equal(t, 0, r.code, "clusterctl %v exit code; stdout:\n%s\nstderr:\n%s", args, r.stdout, r.stderr)
	return r.stdout
}

// history reads `rollout history REF -o json`.
func history(t *testing.T, ref string) historyv1.RolloutHistory {
	t.Helper()
	r := sb.RunCLI(t.TempDir(), demo.Namespace, "history", ref, "-o", "json")
	require.Equal(t, 0, r.Code, "rollout history %s; stderr:\n%s", ref, r.Stderr)
	var h historyv1.RolloutHistory
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &h), "rollout history %s -o json:\n%s", ref, r.Stdout)
	return h
}

// liveRestarts returns the restarts recorded of the live revision of h.
func liveRestarts(h historyv1.RolloutHistory) []string {
	var out []string
	for _, rev := range h.Revisions {
		if rev.Live {
			for _, r := range rev.Restarts {
				out = append(out, r.After+" by "+r.By+" via "+r.FieldManager)
			}
		}
	}
	return out
}

func TestDescribeClusterShowsTheDemo(t *testing.T) {
	sb.RequireClusterReady(t, demo.Namespace, demo.Name, rolloutTimeout)
	out := requireClusterctl(t, "describe", "cluster", demo.Name, "-n", demo.Namespace)
	for _, want := range []string{
		"Cluster " + demo.Namespace + "/" + demo.Name,
		"KubeadmControlPlane " + demo.Namespace + "/" + demo.ControlPlaneName(),
		"MachineDeployment " + demo.Namespace + "/" + demo.MachineDeploymentName(),
	} {
		assert.Contains(t, out, want, "clusterctl describe cluster")
	}
}

// pausable is an object clusterctl's alpha rollout pauses, resumes and
// restarts.
type pausable struct {
	ref    string
	paused func(ctx context.Context) (bool, error)
}

// pausables are the demo's MachineDeployment (spec.paused) and
// KubeadmControlPlane (Cluster API's paused annotation), as clusterctl
// pauses each.
func pausables() []pausable {
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: demo.Namespace, Name: name} }
	return []pausable{
		{ref: "machinedeployment/" + demo.MachineDeploymentName(), paused: func(ctx context.Context) (bool, error) {
			md := &clusterv1.MachineDeployment{}
			if err := sb.Client.Get(ctx, key(demo.MachineDeploymentName()), md); err != nil {
				return false, err
			}
			return md.Spec.Paused != nil && *md.Spec.Paused, nil
		}},
		{ref: "kubeadmcontrolplane/" + demo.ControlPlaneName(), paused: func(ctx context.Context) (bool, error) {
			kcp := &controlplanev1.KubeadmControlPlane{}
			if err := sb.Client.Get(ctx, key(demo.ControlPlaneName()), kcp); err != nil {
				return false, err
			}
			_, ok := kcp.GetAnnotations()[clusterv1.PausedAnnotation]
			return ok, nil
		}},
	}
}

// The objects clusterctl pauses are paused for Cluster API and for
// `rollout status` (exit 4, without waiting), clusterctl then refuses to
// restart them, and resumed `rollout status` sees them done.
func TestClusterctlPauseAndResume(t *testing.T) {
	sb.RequireClusterReady(t, demo.Namespace, demo.Name, rolloutTimeout)
	ctx := context.Background()
	for _, p := range pausables() {
		t.Run(p.ref, func(t *testing.T) {
			requireClusterctl(t, "alpha", "rollout", "pause", p.ref, "-n", demo.Namespace)
			paused, err := p.paused(ctx)
			require.NoError(t, err)
			require.True(t, paused, "%s paused after clusterctl alpha rollout pause", p.ref)

			r := sb.RunCLI(t.TempDir(), demo.Namespace, "status", p.ref, "--timeout", rolloutTimeout.String())
			assert.Equal(t, rollout.ExitPaused, r.Code, "rollout status of a paused object; stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)

			refused := runClusterctl(t, "alpha", "rollout", "restart", p.ref, "-n", demo.Namespace)
			assert.NotEqual(t, 0, refused.code, "clusterctl restarts a paused %s; stdout:\n%s", p.ref, refused.stdout)
			assert.Contains(t, refused.stderr, "paused", "clusterctl's refusal to restart a paused object")

			requireClusterctl(t, "alpha", "rollout", "resume", p.ref, "-n", demo.Namespace)
			paused, err = p.paused(ctx)
			require.NoError(t, err)
			require.False(t, paused, "%s paused after clusterctl alpha rollout resume", p.ref)
			r = sb.RunCLI(t.TempDir(), demo.Namespace, "status", p.ref, "--timeout", rolloutTimeout.String())
			assert.Equal(t, rollout.ExitOK, r.Code, "rollout status once resumed; stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
		})
	}
}

// A restart by clusterctl replaces the machines and is recorded by the
// guard as a restart of the live revision, by the request's user, through
// clusterctl; no new revision is made.
func TestClusterctlRestartIsRecorded(t *testing.T) {
	for _, p := range pausables() {
		t.Run(p.ref, func(t *testing.T) {
			sb.RequireClusterReady(t, demo.Namespace, demo.Name, rolloutTimeout)
			before := history(t, p.ref)
			requireClusterctl(t, "alpha", "rollout", "restart", p.ref, "-n", demo.Namespace)

			r := sb.RunCLI(t.TempDir(), demo.Namespace, "status", p.ref, "--timeout", rolloutTimeout.String())
			require.Equal(t, rollout.ExitOK, r.Code, "rollout status after clusterctl's restart; stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)

			var after historyv1.RolloutHistory
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				after = history(t, p.ref)
				assert.Len(c, liveRestarts(after), len(liveRestarts(before))+1, "restarts recorded of the live revision")
			}, 30*time.Second, time.Second)
			assert.Equal(t, before.LiveRevision, after.LiveRevision, "a restart makes no new revision")
			restarts := liveRestarts(after)
			assert.Regexp(t, ` by \S+ via clusterctl$`, restarts[len(restarts)-1], "the restart clusterctl made")
		})
	}
}

// A backup with `clusterctl move --to-directory` finds the demo's objects:
// the sandbox's CRDs carry clusterctl's labels as `clusterctl init` leaves
// them (without them clusterctl finds no Cluster at all).
func TestMoveToDirectoryFindsTheDemo(t *testing.T) {
	sb.RequireClusterReady(t, demo.Namespace, demo.Name, rolloutTimeout)
	dir := t.TempDir()
	requireClusterctl(t, "move", "--to-directory", dir, "-n", demo.Namespace)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	for _, want := range []string{
		"Cluster_" + demo.Namespace + "_" + demo.Name,
		"KubeadmControlPlane_" + demo.Namespace + "_" + demo.ControlPlaneName(),
		"MachineDeployment_" + demo.Namespace + "_" + demo.MachineDeploymentName(),
	} {
		assert.True(t, slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, want) }),
			"clusterctl move --to-directory wrote no %s*; it wrote %v", want, files)
	}
}
