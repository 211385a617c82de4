package cli

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// resourceVersions reads the resourceVersion of each object.
func resourceVersions(t *testing.T, objs ...client.Object) []string {
	t.Helper()
	var rvs []string
	for _, obj := range objs {
		require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
		rvs = append(rvs, obj.GetResourceVersion())
	}
	return rvs
}

// TestFlagsThatReadNeverWrite runs `rollout KIND/NAME` with flags that only
// print, the bare immediate rollout and a control plane's restart without
// a terminal and without --yes: none of them changes the Cluster, the
// control plane or the worker pool (their resourceVersions are as before),
// each exits with its code and says why.
func TestFlagsThatReadNeverWrite(t *testing.T) {
	w := newWorld(t, "cli-read-only", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	ns := w.Namespace
	kcp, md := "kcp/"+kcpName, "md/"+mdName
	notConfirmed := func(what string) string {
		return what + ", replacing every machine: add --yes (-y) to do it (at a terminal it asks); nothing was changed"
	}
	readOnly := func(flags, ref, resource, name string) string {
		return flags + " only says how to print what a change did, and rollout " + ref + " with no --template, --bootstrap-template or --version would restart it; nothing was changed: to see it, run kubectl get " + resource + " " + name + " -o yaml (or rollout history " + ref + "); to restart it and print it, add --yes"
	}
	kcpRef, mdRef := "kubeadmcontrolplane/"+kcpName, "machinedeployment/"+mdName
	kcpResource, mdResource := "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io", "machinedeployments.cluster.x-k8s.io"
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"kcp -o yaml", []string{kcp, "-o", "yaml"}, rollout.ExitError, readOnly("--output", kcpRef, kcpResource, kcpName)},
		{"kcp -o json", []string{kcp, "-o", "json"}, rollout.ExitError, readOnly("--output", kcpRef, kcpResource, kcpName)},
		{"kcp -o name", []string{kcp, "-o", "name"}, rollout.ExitError, readOnly("--output", kcpRef, kcpResource, kcpName)},
		{"kcp --show-managed-fields -o yaml", []string{kcp, "--show-managed-fields", "-o", "yaml"}, rollout.ExitError, readOnly("--output and --show-managed-fields", kcpRef, kcpResource, kcpName)},
		{"md -o yaml", []string{md, "-o", "yaml"}, rollout.ExitError, readOnly("--output", mdRef, mdResource, mdName)},
		{"kcp --dry-run=server", []string{kcp, "--dry-run=server"}, rollout.ExitError, "--dry-run goes with --template, --bootstrap-template or --version"},
		{"bare kcp", []string{kcp}, rollout.ExitNotConfirmed, notConfirmed("rollout " + kcpRef + " with no --template, --bootstrap-template or --version restarts KubeadmControlPlane " + ns + "/" + kcpName)},
		{"bare md", []string{md}, rollout.ExitNotConfirmed, notConfirmed("rollout " + mdRef + " with no --template, --bootstrap-template or --version restarts MachineDeployment " + ns + "/" + mdName)},
		{"bare kcp with a change-cause", []string{kcp, "--change-cause", "why"}, rollout.ExitNotConfirmed, notConfirmed("rollout " + kcpRef + " with no --template, --bootstrap-template or --version restarts KubeadmControlPlane " + ns + "/" + kcpName)},
		{"restart kcp", []string{"restart", kcp}, rollout.ExitNotConfirmed, notConfirmed("restarting KubeadmControlPlane " + ns + "/" + kcpName)},
		{"restart kcp -o yaml", []string{"restart", kcp, "-o", "yaml"}, rollout.ExitNotConfirmed, notConfirmed("restarting KubeadmControlPlane " + ns + "/" + kcpName)},
		{"restart cluster", []string{"restart", "cluster/" + clusterName}, rollout.ExitNotConfirmed, notConfirmed("restarting Cluster " + ns + "/" + clusterName)},
		{"restart md and kcp", []string{"restart", md, kcp}, rollout.ExitNotConfirmed, notConfirmed("restarting KubeadmControlPlane " + ns + "/" + kcpName)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := resourceVersions(t, w.Cluster, w.KCP, w.MD)
			r := rolloutCmd(t, append(tc.args, "-n", ns)...)
			assert.Equal(t, tc.code, r.code, "exit code; stderr:\n%s", r.stderr)
			assert.Equal(t, "error: "+tc.err+"\n", r.stderr)
			assert.Empty(t, r.stdout)
			assert.Equal(t, before, resourceVersions(t, w.Cluster, w.KCP, w.MD), "nothing was written")
		})
	}
}

// TestRestartAsksAtATerminal restarts a control plane from a terminal: it
// names the machines it replaces and asks; "n" changes nothing, "y"
// restarts, and --yes does not ask.
func TestRestartAsksAtATerminal(t *testing.T) {
	w := newWorld(t, "cli-confirm", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	ns := w.Namespace
	for _, m := range []string{kcpName + "-a", kcpName + "-b"} {
		w.AddMachine(t, m, "v1.34.2", map[string]string{clusterv1.ClusterNameLabel: clusterName, clusterv1.MachineControlPlaneLabel: "", clusterv1.MachineControlPlaneNameLabel: kcpName})
	}
	question := "This restart replaces every machine of:\n  KubeadmControlPlane " + ns + "/" + kcpName + ": 2 machines (" + kcpName + "-a, " + kcpName + "-b)\nRestart? [y/N]: "
	fixed := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	t.Cleanup(func() { setNow(time.Time{}) })
	for i, args := range [][]string{{"restart", "kcp/" + kcpName}, {"kcp/" + kcpName}} {
		setNow(fixed.Add(time.Duration(i) * time.Minute))
		before := resourceVersions(t, w.KCP)
		r := runCLI(t, runOptions{user: "admin", terminal: true, stdin: "n\n"}, append(args, "-n", ns)...)
		assert.Equal(t, rollout.ExitNotConfirmed, r.code)
		assert.Equal(t, question+"error: restart not confirmed; nothing was changed\n", r.stderr)
		assert.Equal(t, before, resourceVersions(t, w.KCP), "answered no: nothing was written")

		r = runCLI(t, runOptions{user: "admin", terminal: true, stdin: "y\n"}, append(args, "-n", ns)...)
		assert.Equal(t, rollout.ExitOK, r.code, r.stderr)
		assert.Equal(t, question, r.stderr)
		assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/"+kcpName+" restarted\n", r.stdout)
		assert.NotEqual(t, before, resourceVersions(t, w.KCP), "answered yes: restarted")
	}
	// A worker pool's restart does not ask, as kubectl rollout restart.
	r := runCLI(t, runOptions{user: "admin", terminal: true}, "restart", "md/"+mdName, "-n", ns)
	assert.Equal(t, rollout.ExitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	// --yes does not ask.
	r = runCLI(t, runOptions{user: "admin", terminal: true}, "restart", "kcp/"+kcpName, "-n", ns, "--yes", "--at", "2032-01-02T03:04:05Z")
	assert.Equal(t, rollout.ExitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)
}

// TestVersion prints the CLI's version, as a flag and as a command.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		assert.Equal(t, "test\n", rolloutCmd(t, args...).ok(t))
	}
}
