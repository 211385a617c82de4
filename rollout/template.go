package rollout

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/stage"
	"github.com/rollout-guard/rollout-guard/waves"
)

// SwitchOptions are the options of `rollout KIND/NAME --template ...`: the
// template switch, and with no flag a restart.
type SwitchOptions struct {
	// Session is the invocation: its clients, streams and checks.
	Session *core.Session
	// PrintFlags is -o/--output.
	PrintFlags *core.PrintFlags
	// Template is --template KIND/NAME: the infrastructure machine template.
	Template string
	// BootstrapTemplate is --bootstrap-template KIND/NAME (MachineDeployment).
	BootstrapTemplate string
	// Version is --version: the Kubernetes version.
	Version string
	// DryRun is --dry-run: none, client or server.
	DryRun string
	// ChangeCause is --change-cause.
	ChangeCause string
	// Force is --force: change the object even if a GitOps controller
	// manages it.
	Force bool
	// Emit is --emit: print the manifest (yaml) or merge patch (patch) for
	// Git instead of changing the object.
	Emit string
	// Yes is --yes: with no switch flag, restart without asking.
	Yes bool
	// Staged is the staged rollout of clusters: cluster -l SELECTOR (or
	// cluster/NAME ...) with --version or --class.
	Staged stage.Options

	ref      core.Ref
	dry      core.DryRun
	emit     core.EmitFormat
	cause    string
	causeSet bool
}

func newSwitchCommand(c *core.Session) *cobra.Command {
	o := &SwitchOptions{Session: c, PrintFlags: core.NewPrintFlags()}
	cmd := &cobra.Command{
		Use:   "rollout KIND/NAME [--template KIND/NAME] [--bootstrap-template KIND/NAME] [--version vX.Y.Z]",
		Short: "Safe, recorded rollouts of Cluster API worker pools and control planes",
		Long: `rollout rolls out Cluster API worker pools (machinedeployment, md; machinepool, mp) and
control planes (kubeadmcontrolplane, kcp, and other providers'), and restarts, watches and
shows the history of whole Clusters: restart, pause, resume, status, history and undo,
shaped like kubectl rollout, and plan, which previews any change. Every change goes through
rollout-guard, which refuses version-skew and etcd-downgrade mistakes and records who
changed what, when and why.

rollout KIND/NAME --template/--bootstrap-template/--version switches the object to other
templates or another Kubernetes version, checked against rollout-guard's policy before it is
sent. On an object Argo CD or Flux manages it stops: --emit yaml prints the change for Git,
--force makes it live anyway. rollout KIND/NAME with none of these flags restarts it now:
at a terminal it names the machines and asks; elsewhere it needs --yes.

rollout cluster -l SELECTOR --version V (or --class NAME) rolls many ClusterClass clusters
out in waves (--waves, --max-concurrent): every cluster's change is planned and checked
first, then wave by wave edited and watched, and each finished wave must stay healthy for
--soak before the next. A stall, a refusal or a remediation halts it (exit 3); the same
command run again goes on where it stopped and edits no cluster twice.

Every command, by task: docs/cli.md; every flag and exit code: docs/reference/cli.`,
		Example: `  # Roll a worker pool out to a new machine template
  rollout machinedeployment/md-0 --template devmachinetemplate/md-0-rev-1

  # A new Kubernetes version and machine template for the control plane
  rollout kcp/my-cluster-control-plane --template devmachinetemplate/cp-rev-2 --version v1.35.2

  # Roll out now (rollout restart); asks at a terminal, --yes in scripts
  rollout machinedeployment/md-0 --yes

  # Managed by Argo CD or Flux: print the manifest to commit to Git instead
  rollout machinedeployment/md-0 --version v1.35.2 --emit yaml

  # Upgrade the clusters labelled env=prod in waves: one cluster, then a quarter,
  # then the rest, each wave healthy for 10 minutes before the next
  rollout cluster -l env=prod --version v1.35.2 --waves 1,25%,100% --soak 10m

  # Rebase them on another ClusterClass, two clusters at a time
  rollout cluster -l env=prod --class gold-v2 --max-concurrent 2`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && cmd.Flags().NFlag() == 0 {
				return cmd.Help()
			}
			if staged, err := o.staged(cmd, args); staged || err != nil {
				if err != nil {
					return err
				}
				return o.Staged.Run(cmd.Context())
			}
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			if o.Template == "" && o.BootstrapTemplate == "" && o.Version == "" {
				if err := o.refuseReadOnly(cmd); err != nil {
					return err
				}
				return o.restart(cmd)
			}
			return o.Run(cmd.Context())
		},
	}
	core.SetExitStatus(cmd, core.ExitHelpOK, core.ExitHelpChangeError,
		"  3   a rollout of clusters halted: a cluster of the wave stalled, was refused, remediated\n      or paused; later waves were not touched",
		core.ExitHelpRefused+" (also with --dry-run and --emit)", core.ExitHelpNotConfirmed,
		"  Each command's --help lists its own.")
	cmd.Flags().StringVar(&o.Template, "template", "", "The infrastructure machine template to roll out to, KIND/NAME (e.g. devmachinetemplate/md-0-rev-1), in the object's namespace.")
	cmd.Flags().StringVar(&o.BootstrapTemplate, "bootstrap-template", "", "The bootstrap config template to roll out to, KIND/NAME (e.g. kubeadmconfigtemplate/md-0-rev-1); MachineDeployment only.")
	cmd.Flags().StringVar(&o.Version, "version", "", "The Kubernetes version to roll out to, e.g. v1.35.2 (alone, --version prints the CLI's version).")
	cmd.Flags().StringVar(&o.DryRun, "dry-run", "none", `"none": roll out; "client": print what would change, send nothing; "server": send with dry run, so the API server and the guard answer without changing anything.`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = string(core.DryRunClient)
	cmd.Flags().BoolVar(&o.Force, "force", false, "Change the object even if a GitOps controller (Argo CD, Flux) manages it, which reverts the change at its next sync unless Git has it too.")
	cmd.Flags().StringVar(&o.Emit, "emit", "", core.EmitHelp)
	addYesFlag(cmd, &o.Yes, "With no --template, --bootstrap-template or --version: restart now without asking (needed when not at a terminal).")
	addChangeCauseFlag(cmd, &o.ChangeCause)
	o.PrintFlags.AddFlags(cmd)
	st := &o.Staged
	st.Session, st.Waves, st.ProgressDeadline = c, stage.DefaultWaves, 10*time.Minute
	cmd.Flags().StringVarP(&st.Selector, "selector", "l", "", "With cluster: the Clusters to roll out, by label (e.g. env=prod), in waves (--waves); with --version or --class.")
	cmd.Flags().BoolVarP(&st.AllNamespaces, "all-namespaces", "A", false, "With cluster: roll out the selected Clusters of every namespace.")
	cmd.Flags().StringVar(&st.Class, "class", "", "With cluster: the ClusterClass to rebase the Clusters on (spec.topology.classRef), NAME or NAMESPACE/NAME.")
	cmd.Flags().StringVar(&st.Waves, "waves", st.Waves, "With cluster: the waves, cumulative counts or percentages of the clusters (1,25%,100%: one cluster, then up to a quarter, then the rest).")
	cmd.Flags().IntVar(&st.MaxConcurrent, "max-concurrent", 0, "With cluster: at most this many clusters of a wave rolling out at once (0: the whole wave).")
	cmd.Flags().DurationVar(&st.Soak, "soak", 0, "With cluster: how long a rolled-out wave must stay healthy (rolled out, every machine ready, no remediation) before the next starts, e.g. 10m.")
	cmd.Flags().StringVar(&st.Order, "order", waves.Label, "With cluster: the label that orders the clusters into waves (numbers in order, then words; clusters without it last), then their names; \"\" orders by name.")
	cmd.Flags().DurationVar(&st.ProgressDeadline, "progress-deadline", st.ProgressDeadline, "With cluster: halt (exit 3) when a cluster of the wave makes no progress for this long.")
	return cmd
}

// stagedFlags are the flags of the staged rollout of clusters alone.
var stagedFlags = []string{"selector", "all-namespaces", "class", "waves", "max-concurrent", "soak", "order", "progress-deadline"}

// staged reports whether the command is a staged rollout of clusters
// (cluster -l SELECTOR, cluster -A or cluster/NAME ..., with --version or
// --class), and readies o.Staged for it; the error of a flag of the staged
// rollout given to anything else.
func (o *SwitchOptions) staged(cmd *cobra.Command, args []string) (bool, error) {
	st := &o.Staged
	var given []string
	for _, name := range stagedFlags {
		if cmd.Flags().Changed(name) {
			given = append(given, "--"+name)
		}
	}
	t, err := core.ParseTargets(o.Session.Name(), args, st.Selector != "" || st.AllNamespaces)
	cluster := err == nil && (t.Kind != nil && t.Kind.GVK == core.Cluster.GVK || len(t.Refs) > 0 && allClusters(t.Refs))
	switching := o.Version != "" || st.Class != ""
	switch {
	case cluster && (o.Template != "" || o.BootstrapTemplate != ""):
		return true, fmt.Errorf("--template and --bootstrap-template work on machinedeployment and kubeadmcontrolplane objects; a ClusterClass cluster takes its templates from its class: roll it to another class with --class, or its version with --version")
	case cluster && switching:
	case cluster && t.Kind != nil:
		return true, fmt.Errorf("a rollout of clusters needs what to roll out: --version V (their spec.topology.version) or --class NAME (their spec.topology.classRef); to restart them instead: %s restart cluster -l SELECTOR", o.Session.Name())
	case len(given) > 0 && err == nil && !cluster:
		return true, fmt.Errorf("%s: for a rollout of clusters only (%s cluster -l SELECTOR --version V), not of %s", strings.Join(given, ", "), o.Session.Name(), strings.Join(args, " "))
	case len(given) > 0 && err != nil:
		return true, err
	default:
		return false, nil
	}
	if o.PrintFlags.Output != "" {
		return true, fmt.Errorf("-o/--output does not work with a staged rollout of clusters: it prints its waves and their progress as lines; rollout status cluster -l SELECTOR -o json reports the clusters as data")
	}
	if st.DryRun, err = core.ParseDryRun(o.DryRun); err != nil {
		return true, err
	}
	if st.Emit, err = core.ParseEmit(o.Emit); err != nil {
		return true, err
	}
	if st.Emit != core.EmitNone && st.DryRun != core.DryRunNone {
		return true, fmt.Errorf("--emit prints the change for Git and --dry-run sends it to check it: give one of the two")
	}
	st.Targets, st.Version, st.Force = t, o.Version, o.Force
	st.Cause = o.Session.ChangeCause(cmd, o.ChangeCause)
	return true, nil
}

// allClusters reports whether every ref names a Cluster.
func allClusters(refs []core.Ref) bool {
	for _, r := range refs {
		if r.Kind.GVK != core.Cluster.GVK {
			return false
		}
	}
	return true
}

// Complete reads the argument and flags.
func (o *SwitchOptions) Complete(cmd *cobra.Command, args []string) error {
	if len(args) > 0 && !strings.Contains(args[0], "/") {
		if _, err := core.ParseKind(args[0]); err != nil {
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				return fmt.Errorf("unknown command %q for %q; did you mean %q?", args[0], cmd.CommandPath(), s[0])
			}
			return fmt.Errorf("unknown command or resource %q: commands are %s; resources are KIND/NAME (%s)", args[0], subcommandNames(cmd), core.KindsHelp)
		}
	}
	ref, err := core.ParseOne(o.Session.Name(), args)
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

func subcommandNames(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}

// Validate checks the flags.
func (o *SwitchOptions) Validate() error {
	switching := o.Template != "" || o.BootstrapTemplate != "" || o.Version != ""
	if kind := o.ref.Kind; switching && kind.Switching == nil {
		return fmt.Errorf("--template, --bootstrap-template and --version work on machinedeployment and kubeadmcontrolplane objects, not %s%s", o.ref, kind.NoSwitch)
	}
	if err := o.ref.Kind.RefuseBootstrap(o.BootstrapTemplate); err != nil {
		return err
	}
	if !switching && o.dry != core.DryRunNone {
		return fmt.Errorf("--dry-run goes with --template, --bootstrap-template or --version")
	}
	if !switching && (o.emit != core.EmitNone || o.Force) {
		return fmt.Errorf("--emit and --force go with --template, --bootstrap-template or --version")
	}
	if err := core.ValidateEmit(o.emit, o.dry, o.PrintFlags.Output, o.causeSet, o.Force); err != nil {
		return err
	}
	return o.PrintFlags.Validate()
}

// restart is `rollout KIND/NAME` with no switch flag: a restart now, once
// confirmed.
func (o *SwitchOptions) restart(cmd *cobra.Command) error {
	r := &RestartOptions{Session: o.Session, PrintFlags: o.PrintFlags, targets: core.Targets{Refs: []core.Ref{o.ref}}, cause: o.cause,
		Yes: o.Yes, bare: o.Session.Name() + " " + o.ref.String()}
	return r.Run(cmd.Context())
}

// readOnlyFlags print what a command did; by themselves they ask for no
// change.
var readOnlyFlags = []string{"output", "show-managed-fields"}

// refuseReadOnly refuses `rollout KIND/NAME` with only flags that print
// (-o yaml, typed to see the object): without --yes it changes nothing.
func (o *SwitchOptions) refuseReadOnly(cmd *cobra.Command) error {
	if o.Yes {
		return nil
	}
	var given []string
	for _, name := range readOnlyFlags {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			given = append(given, "--"+name)
		}
	}
	if len(given) == 0 {
		return nil
	}
	return fmt.Errorf("%s only says how to print what a change did, and %s %s with no --template, --bootstrap-template or --version would restart it; nothing was changed: to see it, run kubectl get %s %s -o yaml (or %s history %s); to restart it and print it, add --yes",
		strings.Join(given, " and "), o.Session.Name(), o.ref, o.ref.Kind.GroupResource().String(), o.ref.Name, o.Session.Name(), o.ref)
}

// Run switches the templates and version.
func (o *SwitchOptions) Run(ctx context.Context) error {
	cl, err := o.Session.Clients()
	if err != nil {
		return err
	}
	purpose := "roll out " + o.ref.String()
	obj, err := o.Session.Get(ctx, cl, o.ref, purpose)
	if err != nil {
		return err
	}
	var infra, bootstrap *clusterv1.ContractVersionedObjectReference
	if o.Template != "" {
		if infra, err = o.Session.ResolveTemplate(ctx, cl, obj.GetNamespace(), "--template", o.Template, core.InfrastructureGroupSuffix, "an infrastructure machine template", "DevMachineTemplate"); err != nil {
			return err
		}
	}
	if o.BootstrapTemplate != "" {
		if bootstrap, err = o.Session.ResolveTemplate(ctx, cl, obj.GetNamespace(), "--bootstrap-template", o.BootstrapTemplate, core.BootstrapGroupSuffix, "a bootstrap config template", "KubeadmConfigTemplate"); err != nil {
			return err
		}
	}
	err, exhausted := core.RetryConflicts(func() error { return o.switchOnce(ctx, cl, obj, infra, bootstrap) }, func() (err error) {
		o.Session.Notef("conflict: %s changed after it was read; reading it again and checking again", core.Describe(obj, o.ref.Kind))
		obj, err = o.Session.Reread(ctx, cl, obj, purpose)
		return err
	})
	if exhausted {
		return fmt.Errorf("cannot %s: it kept changing (%d conflicts); nothing was changed: %w", purpose, core.MaxAttempts, err)
	}
	return err
}

// switchOnce makes one attempt on obj as read; a conflict is returned as is.
func (o *SwitchOptions) switchOnce(ctx context.Context, cl *core.Clients, obj client.Object, infra, bootstrap *clusterv1.ContractVersionedObjectReference) error {
	id := core.Describe(obj, o.ref.Kind)
	purpose := "roll out " + id
	spec, err := core.SwitchSpec(obj, infra, bootstrap, o.Version)
	if err != nil {
		return err
	}
	patch, err := core.PatchOf(obj.GetResourceVersion(), core.CauseAnnotations(o.cause), spec)
	if err != nil {
		return fmt.Errorf("cannot %s: %w", purpose, err)
	}
	newObj, err := core.ApplyMergePatch(obj, patch)
	if err != nil {
		return fmt.Errorf("cannot %s: %w", purpose, err)
	}
	oldSnap, newSnap, err := core.Snapshots(obj, newObj)
	if err != nil {
		return fmt.Errorf("cannot %s: %w", purpose, err)
	}
	if oldSnap.Hash == newSnap.Hash {
		if o.emit != core.EmitNone {
			o.Session.Notef("%s already uses these templates and version: nothing to change; printing it as it is live", id)
			return core.Emit(o.Session.IOStreams.Out, o.emit, obj, obj, patch)
		}
		return o.print(obj, "unchanged: it already uses these templates and version")
	}
	if o.emit == core.EmitNone && o.dry == core.DryRunNone {
		if err := o.Session.CheckGitOps(ctx, cl, "roll out", obj, o.Force, o.inGit(obj)); err != nil {
			return err
		}
	}
	if how := core.PausedBy(obj); how != "" && o.emit == core.EmitNone {
		o.Session.Warnf("%s is paused (%s): the change is stored now and rolls out when it is resumed", id, how)
	}
	if o.dry == core.DryRunClient && !o.PrintFlags.Data() {
		changes, _, err := core.FieldChanges(oldSnap, newSnap)
		if err != nil {
			return fmt.Errorf("cannot %s: %w", purpose, err)
		}
		fmt.Fprintf(o.Session.IOStreams.Out, "%s: would roll out (dry run: nothing sent)\n", id)
		if err := core.WriteFieldTable(o.Session.IOStreams.Out, "", "LIVE", "AFTER", changes); err != nil {
			return err
		}
	}
	if o.dry != core.DryRunServer {
		hint := "To ask the guard itself, add --dry-run=server."
		if o.emit != core.EmitNone {
			hint = "The guard refuses it the same way when a GitOps controller applies it. To ask the guard itself, run the command with --dry-run=server instead of --emit."
		}
		if refusal := o.Session.CheckPolicy(ctx, cl, obj, newObj, hint, o.dry == core.DryRunClient || o.emit != core.EmitNone); refusal != nil {
			return refusal
		}
	}
	if o.emit != core.EmitNone {
		return core.Emit(o.Session.IOStreams.Out, o.emit, obj, newObj, patch)
	}
	cause, err := revisions.ChangeCause(oldSnap, newSnap)
	if err != nil {
		return fmt.Errorf("cannot %s: %w", purpose, err)
	}
	if o.dry == core.DryRunClient {
		if o.PrintFlags.Data() {
			return o.print(newObj, "")
		}
		return o.print(obj, "rolling out (dry run): "+cause)
	}
	if err := o.Session.Send(ctx, cl, obj, types.MergePatchType, patch, o.dry, purpose); err != nil {
		return err
	}
	op := "rolling out: " + cause
	if o.dry == core.DryRunServer {
		op = "rolling out (server dry run): " + cause
	}
	return o.print(obj, op)
}

// inGit is the command that prints this switch for Git.
func (o *SwitchOptions) inGit(obj client.Object) string {
	words := []string{o.Session.Name(), o.ref.String()}
	for _, f := range []struct{ flag, value string }{{"--template", o.Template}, {"--bootstrap-template", o.BootstrapTemplate}, {"--version", o.Version}} {
		if f.value != "" {
			words = append(words, f.flag, core.Quote(f.value))
		}
	}
	return strings.Join(append(words, "-n", obj.GetNamespace(), "--emit", "yaml"), " ")
}

func (o *SwitchOptions) print(obj client.Object, op string) error {
	p, err := o.PrintFlags.ToPrinter(op)
	if err != nil {
		return err
	}
	return p.PrintObj(obj, o.Session.IOStreams.Out)
}
