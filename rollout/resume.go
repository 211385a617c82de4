package rollout

import (
	"github.com/spf13/cobra"
)

// resume shares PauseOptions with pause (PauseOptions.Resume): the two
// verbs are one switch over kinds, in PauseOptions.one.

func newResumeCommand(c *cli) *cobra.Command {
	o := &PauseOptions{c: c, PrintFlags: NewPrintFlags(), Resume: true}
	cmd := &cobra.Command{
		Use:   "resume (KIND/NAME ... | KIND -l SELECTOR)",
		Short: "Resume rollouts of a paused worker pool or control plane",
		Long: `Resume a paused MachineDeployment (clears spec.paused and the annotation
cluster.x-k8s.io/paused), MachinePool or KubeadmControlPlane (removes the annotation
cluster.x-k8s.io/paused). Resuming an object that is not paused does nothing and
succeeds.

` + exitCodesHelp,
		Example: `  rollout resume machinedeployment/md-0
  rollout resume kcp/my-cluster-control-plane`,
		RunE: runE(o),
	}
	o.addFlags(cmd)
	return cmd
}
