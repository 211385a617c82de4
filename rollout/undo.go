package rollout

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/plan"
)

// UndoOptions are the options of `rollout undo`.
type UndoOptions struct {
	// Session is the invocation: its clients, streams and checks.
	Session *core.Session
	// PrintFlags is -o/--output.
	PrintFlags *core.PrintFlags
	// ToRevision is --to-revision; 0 is the previous revision.
	ToRevision int64
	// DryRun is --dry-run: none, client or server.
	DryRun string
	// Force is --force: change the object even if a GitOps controller
	// manages it; with Reason, also send rollout-guard's override
	// annotation.
	Force bool
	// Reason is --reason, the override's reason.
	Reason string
	// ChangeCause is --change-cause.
	ChangeCause string
	// Emit is --emit: print the manifest (yaml) or merge patch (patch) for
	// Git instead of changing the object.
	Emit string
	// PreviewClass, when set, shows what the rollback of a ClusterClass
	// (live, as it would be after the rollback) rolls of the Clusters on
	// the class, before it is sent or printed: the place of rollout plan's
	// preview of a class change. nil: no preview (the change itself is
	// shown, field by field).
	PreviewClass func(ctx context.Context, cl *core.Clients, live, rolledBack *clusterv1.ClusterClass) error

	ref      core.Ref
	dry      core.DryRun
	emit     core.EmitFormat
	cause    string
	causeSet bool
}

func newUndoCommand(c *core.Session) *cobra.Command {
	o := &UndoOptions{Session: c, PrintFlags: core.NewPrintFlags(), PreviewClass: func(ctx context.Context, cl *core.Clients, live, rolledBack *clusterv1.ClusterClass) error {
		return previewClassRollback(ctx, c, cl, live, rolledBack)
	}}
	cmd := &cobra.Command{
		Use:   "undo KIND/NAME [--to-revision N]",
		Short: "Roll a worker pool, control plane, ClusterClass or cluster topology back to an earlier revision",
		Long: `Roll a worker pool or control plane back to the previous revision of its history (rollout
history), or to --to-revision N. Before sending, undo prints the fields it changes (files and
commands in full) and checks the object (not paused, not topology-managed), the revision's
author, GitOps management, the templates it references and rollout-guard's policy; the
rollback is one patch that never overwrites a change it has not seen. --dry-run=server asks
the guard; --emit yaml|patch prints the change for Git; --force --reason is the guard's
break-glass override. clusterclass/NAME rolls a ClusterClass back to the spec of a revision,
after the plan of what that rolls on each Cluster of the class (as rollout plan -f computes it);
cluster/NAME rolls a ClusterClass cluster's spec.topology back, after the plan of what that rolls.
More: docs/undo.md.`,
		Example: `  # Back to the previous revision
  rollout undo machinedeployment/md-0

  # Back to revision 3, showing first what would change
  rollout undo kcp/my-cluster-control-plane --to-revision 3 --dry-run=client

  # Ask the guard without changing anything
  rollout undo kcp/my-cluster-control-plane --to-revision 3 --dry-run=server

  # Back to a revision of unknown author, after reading what it changes
  rollout undo kcp/my-cluster-control-plane --to-revision 4 --dry-run=server --force

  # Break glass (members of the guard's override groups only; recorded)
  rollout undo kcp/my-cluster-control-plane --to-revision 3 --force --reason "INC-42: restore from backup follows"

  # Managed by Argo CD or Flux: print the manifest of revision 3 to commit to Git
  rollout undo md/md-0 --to-revision 3 --emit yaml > clusters/prod/md-0.yaml

  # A ClusterClass back to revision 1, asking the API server first
  rollout undo clusterclass/my-class --to-revision 1 --dry-run=server`,
		RunE: core.RunE(o),
	}
	core.SetExitStatus(cmd, core.ExitHelpOK+` (also "skipped rollback: already at revision N")`,
		"  1   error: bad arguments, no such revision, a paused, topology- or GitOps-managed object or a\n      revision of unknown author without --force, conflict, permission denied, unreachable", core.ExitHelpRefused+" (also with --dry-run and --emit)")
	cmd.Flags().Int64Var(&o.ToRevision, "to-revision", 0, "The revision to roll back to (default: the previous revision).")
	cmd.Flags().StringVar(&o.DryRun, "dry-run", "none", `"none": roll back; "client": print what would change, send nothing; "server": send with dry run, so the API server and the guard answer without changing anything.`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = string(core.DryRunClient)
	cmd.Flags().BoolVar(&o.Force, "force", false, "Roll back even if a GitOps controller manages the object (it reverts the rollback at its next sync unless Git has it), or to a revision of unknown author; with --reason, also send rollout-guard's break-glass override (its override groups only; recorded). With --emit, only the unknown author.")
	cmd.Flags().StringVar(&o.Reason, "reason", "", "The reason of a --force override, recorded in the history.")
	cmd.Flags().StringVar(&o.Emit, "emit", "", core.EmitHelp)
	addChangeCauseFlag(cmd, &o.ChangeCause)
	o.PrintFlags.AddFlags(cmd)
	return cmd
}

// Complete reads the argument and flags.
func (o *UndoOptions) Complete(cmd *cobra.Command, args []string) error {
	ref, err := core.ParseOne("undo", args)
	if err != nil {
		return err
	}
	o.ref = ref
	if o.dry, err = core.ParseDryRun(o.DryRun); err != nil {
		return err
	}
	if o.emit, err = core.ParseEmit(o.Emit); err != nil {
		return err
	}
	o.cause = o.Session.ChangeCause(cmd, o.ChangeCause)
	o.causeSet = cmd.Flags().Changed("change-cause")
	return nil
}

// Validate checks the flags.
func (o *UndoOptions) Validate() error {
	if o.ToRevision < 0 {
		return fmt.Errorf("--to-revision %d: revision numbers start at 1", o.ToRevision)
	}
	switch {
	case o.Force && o.Reason != "" && strings.TrimSpace(o.Reason) == "":
		return fmt.Errorf("--reason is blank: the reason is recorded with the override in the revision history")
	case !o.Force && o.Reason != "":
		return fmt.Errorf("--reason goes with --force: it is the reason of an override")
	}
	if o.emit != core.EmitNone && o.Reason != "" {
		return fmt.Errorf("--reason is sent with a live change, as the override annotation; --emit changes nothing: give the reason in the Git commit message")
	}
	// With --emit, --force only lets a revision of unknown author be
	// printed: there is no live change for it to force.
	if err := core.ValidateEmit(o.emit, o.dry, o.PrintFlags.Output, o.causeSet, false); err != nil {
		return err
	}
	return o.PrintFlags.Validate()
}

// previewClusterRollback prints what rolling a Cluster's topology back
// does to its objects, as rollout plan computes a topology change; a
// refusal stops the undo (exit 6), a preview that cannot be computed is a
// warning.
func previewClusterRollback(ctx context.Context, c *core.Session, cl *core.Clients, live, rolledBack *clusterv1.Cluster) error {
	if cl.Config == nil {
		return nil // clients given in-process, without a connection to run the reconciler with
	}
	c.Notef("What the rollback of the topology of Cluster %s/%s rolls (computed with Cluster API's topology reconciler, every write a server-side dry run):", live.Namespace, live.Name)
	err := plan.PreviewClusterChange(ctx, c, cl, rolledBack)
	if err == nil || core.ExitCode(err) == core.ExitRefused {
		return err
	}
	c.Warnf("the preview of what the rollback rolls is incomplete: %v", err)
	return nil
}

// previewClassRollback prints what rolling the ClusterClass live back to
// rolledBack rolls on each Cluster of the class, as rollout plan -f of the
// class computes it, and refuses the undo (exit 6) when the topology
// controller's change of a cluster would be refused. A preview that cannot
// be computed is a warning: the rollback itself is still judged by the API
// server when it is sent.
func previewClassRollback(ctx context.Context, c *core.Session, cl *core.Clients, live, rolledBack *clusterv1.ClusterClass) error {
	if cl.Config == nil {
		return nil // clients given in-process, without a connection to run the reconciler with
	}
	c.Notef("What the rollback of ClusterClass %s/%s rolls (computed with Cluster API's topology reconciler, every write a server-side dry run):", live.Namespace, live.Name)
	err := plan.PreviewClassChange(ctx, c, cl, live, rolledBack)
	if err == nil || core.ExitCode(err) == core.ExitRefused {
		return err
	}
	c.Warnf("the preview of what the rollback rolls is incomplete: %v", err)
	return nil
}
