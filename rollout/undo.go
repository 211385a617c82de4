package rollout

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
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

	ref      core.Ref
	dry      core.DryRun
	emit     core.EmitFormat
	cause    string
	causeSet bool
}

func newUndoCommand(c *core.Session) *cobra.Command {
	o := &UndoOptions{Session: c, PrintFlags: core.NewPrintFlags()}
	cmd := &cobra.Command{
		Use:   "undo KIND/NAME [--to-revision N]",
		Short: "Roll a worker pool or control plane back to an earlier revision",
		Long: `Roll a MachineDeployment, MachinePool, KubeadmControlPlane or another provider's control
plane (RESOURCE.controlplane.cluster.x-k8s.io: its spec.version and spec.machineTemplate) back
to an earlier revision of its history (see rollout history): by default the previous one, or
--to-revision N.

Before sending anything, undo checks that
  - the object is not paused and not managed by a Cluster's topology;
  - the revision has a known author. One changed while rollout-guard was not admitting
    changes (recorded afterwards by its reconciler), or live before the guard saw the
    object (made before it was installed), has none: rollout history shows "unknown (*)",
    and nothing says its content was meant. Undo to it is refused, with what it would
    change, unless --force (read that first);
  - the object is not managed by a GitOps controller (Argo CD: annotation
    argocd.argoproj.io/tracking-id or label app.kubernetes.io/instance; Flux: labels
    kustomize.toolkit.fluxcd.io/name or helm.toolkit.fluxcd.io/name; or a field manager
    argocd-controller, kustomize-controller or helm-controller), which would revert the
    rollback at its next sync: make the change in Git instead (--emit), or add --force;
  - every template the revision references (infrastructureRef, bootstrap configRef) still
    exists;
  - rollout-guard's policy allows the change, judged as the guard judges it (version skew,
    etcd downgrades, the highest versions the control plane has run); a refusal is printed
    with the guard's own text.
When the revision's content is already live it does nothing ("skipped rollback: already
at revision N") and succeeds.

Before sending anything (and with --dry-run, --dry-run=server and --emit), undo prints the
fields the revision changes against the live object, every value in full (kubeadm commands
and files with their content included), as rollout plan and history --diff print them,
"(rolls out)" where Cluster API replaces machines for it: on stdout, or on stderr with -o
or --emit, whose output is data.

The rollback is one patch with a resourceVersion precondition. If the object changed in the
meantime (a conflict), undo reads it again and decides anew: it reports "skipped rollback"
if the revision is now live, stops if "the previous revision" no longer means the same
thing, and otherwise checks everything again; it never overwrites a change it has not seen.

--dry-run=client prints what would change and the local verdict; --dry-run=server asks the
API server and the guard, changing nothing; both are checked as the rollback itself. --force
rolls back an object a GitOps controller manages, and to a revision of unknown author.
--force --reason TEXT also sends rollout-guard's break-glass override annotation: the guard
lets a refused change through only for members of its override groups, and records the
override, its reason and its user in the history.

--emit yaml changes nothing and prints the manifest to commit to Git: the live object with
the revision's fields, without what the API server and controllers fill in (status,
managedFields, resourceVersion, uid, creationTimestamp, generation, ownerReferences,
finalizers) and without rollout-guard's stamps, which the guard writes itself when the
GitOps controller applies it. --emit patch prints the JSON merge patch instead. Both are
checked exactly as the rollback itself (the same checks, the same refusals and exit codes);
with --emit, --force only lets a revision of unknown author be printed.

` + core.ExitCodesHelp,
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
  rollout undo md/md-0 --to-revision 3 --emit yaml > clusters/prod/md-0.yaml`,
		RunE: core.RunE(o),
	}
	cmd.Flags().Int64Var(&o.ToRevision, "to-revision", 0, "The revision to roll back to (default: the previous revision).")
	cmd.Flags().StringVar(&o.DryRun, "dry-run", "none", `"none": roll back; "client": print what would change, send nothing; "server": send with dry run, so the API server and the guard answer without changing anything.`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = string(core.DryRunClient)
	cmd.Flags().BoolVar(&o.Force, "force", false, "Roll back even if a GitOps controller (Argo CD, Flux) manages the object, which reverts the rollback at its next sync unless Git has it too; and to a revision of unknown author (changed while rollout-guard was not admitting changes, or live before it was installed), once you have read what undo shows it changes. With --reason, also send rollout-guard's override annotation: the guard lets a refused change through for members of its override groups, and records it. With --emit, only the unknown author.")
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
	if o.ref.Kind.GVK == core.Cluster.GVK {
		return fmt.Errorf("undo works on worker pools and control planes, not %s: undo the cluster's control plane or one of its worker pools", o.ref)
	}
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
