package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestHistory builds a MachineDeployment's history with the CLI itself —
// a template switch, a bootstrap and version change with a change-cause, a
// restart and an undo — and pins the table, -o json, --revision and --diff.
func TestHistory(t *testing.T) {
	w := newWorld(t, "cli-history", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	md := "machinedeployment/" + mdName

	out := rolloutCmd(t, md, "--template", "devmachinetemplate/c1-md-1", "-n", w.Namespace).ok(t)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 rolling out: infrastructureRef c1-md-0 → c1-md-1\n", out)
	rolloutCmd(t, md, "--bootstrap-template", "KubeadmConfigTemplate/c1-md-1", "--version", "v1.34.1", "-n", w.Namespace,
		"--change-cause", "CVE-2031-0001: new bootstrap").ok(t)
	rolloutCmd(t, "restart", md, "--at", "2030-01-01T00:00:00Z", "-n", w.Namespace).ok(t)
	out = rolloutCmd(t, "undo", md, "--to-revision", "1", "-n", w.Namespace).ok(t)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 rolled back to revision 1 (now revision 4)\n", lastLine(out))

	settle(t, w.MD)
	golden(t, "history/md-table.txt", rolloutCmd(t, "history", md, "-n", w.Namespace).ok(t))
	golden(t, "history/md.json", stable(rolloutCmd(t, "history", md, "-n", w.Namespace, "-o", "json").ok(t)))
	golden(t, "history/md-name.txt", rolloutCmd(t, "history", md, "-n", w.Namespace, "-o", "name").ok(t))
	golden(t, "history/md-revision-3.yaml", stable(rolloutCmd(t, "history", md, "-n", w.Namespace, "--revision", "3").ok(t)))
	golden(t, "history/md-diff-3.txt", rolloutCmd(t, "history", md, "-n", w.Namespace, "--revision", "3", "--diff").ok(t))
	golden(t, "history/md-diff-previous.txt", rolloutCmd(t, "history", md, "-n", w.Namespace, "--diff").ok(t))

	rolloutCmd(t, "history", md, "-n", w.Namespace, "--revision", "9").fails(t,
		"MachineDeployment cli-history/c1-md-0 has no revision 9; recorded revisions: 1, 2, 3, 4")
}
