package rollout

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// TestPlanFlags: one change at a time, fitting the kind, each mistake named
// with the way out (exit 1, before anything is read).
func TestPlanFlags(t *testing.T) {
	cl := newFakeClient()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"plan"}, "plan needs a change: write plan KIND/NAME with --template, --version, --to-revision or --restart, or plan -f FILE (use machinedeployment (md), machinepool (mp), kubeadmcontrolplane (kcp), cluster, or another provider's control plane as RESOURCE.controlplane.cluster.x-k8s.io)"},
		{[]string{"plan", "md/md-0"}, "plan needs a change to preview: --template KIND/NAME, --bootstrap-template KIND/NAME, --version V, --to-revision N or --restart (or -f FILE)"},
		{[]string{"plan", "md/md-0", "--version", "v1.35.2", "--restart"}, "plan previews one change at a time: use either --template/--bootstrap-template/--version, or --to-revision, or --restart, or -f"},
		{[]string{"plan", "cluster/c1", "--template", "devmachinetemplate/x"}, "--template and --bootstrap-template work on machinedeployment and kubeadmcontrolplane objects, not cluster/c1: a ClusterClass cluster's templates are in its ClusterClass"},
		{[]string{"plan", "cluster/c1", "--to-revision", "2"}, "--to-revision works on machinedeployment and kubeadmcontrolplane objects, not cluster/c1: plan the undo of its control plane or of one of its worker pools"},
		{[]string{"plan", "kcp/cp", "--bootstrap-template", "kubeadmconfigtemplate/x"}, "--bootstrap-template works on machinedeployments only: a KubeadmControlPlane's bootstrap config is inline, in spec.kubeadmConfigSpec"},
		{[]string{"plan", "md/md-0", "--to-revision", "-1"}, "--to-revision -1: revision numbers start at 1 (0 is the previous revision)"},
		{[]string{"plan", "md/md-0", "--restart", "-R"}, "-R/--recursive goes with -f DIR"},
		{[]string{"plan", "md/md-0", "-f", "x.yaml"}, "plan -f FILE takes no resource argument (the objects are in the file), got md/md-0"},
		{[]string{"plan", "md/md-0", "--restart", "-o", "name"}, `unknown output format "name": use -o json or -o yaml`},
		{[]string{"plan", "md/a", "md/b", "--restart"}, "plan works on one object at a time; got 2"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, errOut, code := runFake(t, cl, gitOpsNow, tt.args...)
			assert.Equal(t, core.ExitError, code)
			assert.Empty(t, out)
			assert.Equal(t, "error: "+tt.want+"\n", errOut)
		})
	}
}
