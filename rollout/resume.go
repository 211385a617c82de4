package rollout

import (
	"github.com/spf13/cobra"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// resume shares PauseOptions with pause (PauseOptions.Resume): the two
// verbs are one switch over kinds, in PauseOptions.one.

func newResumeCommand(c *core.Session) *cobra.Command {
	o := &PauseOptions{Session: c, PrintFlags: core.NewPrintFlags(), Resume: true}
	cmd := &cobra.Command{
		Use:   "resume (KIND/NAME ... | KIND -l SELECTOR)",
		Short: "Resume rollouts of a paused worker pool or control plane",
		Long: `Resume a paused MachineDeployment, MachinePool or control plane (clears spec.paused and
the annotation cluster.x-k8s.io/paused). Not paused: nothing to do.`,
		Example: `  rollout resume machinedeployment/md-0
  rollout resume kcp/my-cluster-control-plane`,
		RunE: core.RunE(o),
	}
	o.addFlags(cmd)
	return cmd
}
