package rollout

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// PauseOptions are the options of `rollout pause` and `rollout resume`.
type PauseOptions struct {
	// Session is the invocation: its clients, streams and checks.
	Session *core.Session
	// PrintFlags is -o/--output.
	PrintFlags *core.PrintFlags
	// Selector selects objects by label (-l).
	Selector string
	// AllNamespaces selects in every namespace (-A).
	AllNamespaces bool
	// Resume is true for `rollout resume`.
	Resume bool

	targets core.Targets
}

func newPauseCommand(c *core.Session) *cobra.Command {
	o := &PauseOptions{Session: c, PrintFlags: core.NewPrintFlags()}
	cmd := &cobra.Command{
		Use:   "pause (KIND/NAME ... | KIND -l SELECTOR)",
		Short: "Stop rollouts of a worker pool or control plane",
		Long: `Pause a MachineDeployment (spec.paused), MachinePool or control plane (the annotation
cluster.x-k8s.io/paused): Cluster API stops rolling it out until it is resumed. Pausing a
KubeadmControlPlane also stops its remediation. A topology-managed object is refused: pause
its Cluster. Already paused: nothing to do. More: docs/rollouts.md.`,
		Example: `  # Hold a worker pool while its template is changed
  rollout pause machinedeployment/md-0

  # Every worker pool labelled pool=gpu
  rollout pause md -l pool=gpu`,
		RunE: core.RunE(o),
	}
	o.addFlags(cmd)
	return cmd
}

func (o *PauseOptions) addFlags(cmd *cobra.Command) {
	core.SetExitStatus(cmd, core.ExitHelpOK+` (also "already paused", "already resumed")`,
		"  1   error: bad arguments, not found, a topology-managed object, conflict, permission\n      denied, API server unreachable")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "Label selector (e.g. pool=gpu): act on every object of the KIND it matches.")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "With -l, select in every namespace.")
	// No --change-cause: pausing changes no revision, so the guard records
	// nothing for it; and a pause must go through while the guard is down
	// (an incident is when it is needed most), which it does only while it
	// carries no rollout-guard.io/ annotation for the guard's webhook to match.
	o.PrintFlags.AddFlags(cmd)
}

func (o *PauseOptions) verb() string {
	if o.Resume {
		return "resume"
	}
	return "pause"
}

// Complete reads the arguments.
func (o *PauseOptions) Complete(cmd *cobra.Command, args []string) error {
	t, err := core.ParseTargets(o.verb(), args, cmd.Flags().Changed("selector"))
	if err != nil {
		return err
	}
	o.targets = t
	return nil
}

// Validate checks the flags.
func (o *PauseOptions) Validate() error {
	if o.AllNamespaces && o.targets.Kind == nil {
		return fmt.Errorf("-A/--all-namespaces works with -l/--selector only")
	}
	return o.PrintFlags.Validate()
}

// Run pauses or resumes every object.
func (o *PauseOptions) Run(ctx context.Context) error {
	cl, err := o.Session.Clients()
	if err != nil {
		return err
	}
	objs, err := o.Session.Resolve(ctx, cl, o.targets, o.Selector, o.AllNamespaces, o.verb())
	if err != nil {
		return err
	}
	return o.Session.ForEach(o.verb(), objs, o.Selector, func(obj client.Object) error {
		purpose := o.verb() + " " + core.Describe(obj, core.KindOf(obj))
		err, _ := core.RetryConflicts(func() error { return o.one(ctx, cl, obj) }, func() (err error) {
			o.Session.Notef("conflict: %s changed while this command ran; reading it again", core.Describe(obj, core.KindOf(obj)))
			obj, err = o.Session.Reread(ctx, cl, obj, purpose)
			return err
		})
		return err
	})
}

// one pauses or resumes one object as read: with spec.paused where its
// kind has it (a MachineDeployment), else with the annotation
// cluster.x-k8s.io/paused (Cluster API pauses a MachinePool and a
// KubeadmControlPlane with it, and so does the contract of other
// providers' control planes). A conflict is returned as is; Run reads the
// object again and decides anew.
func (o *PauseOptions) one(ctx context.Context, cl *core.Clients, obj client.Object) error {
	if cluster, ok := obj.(*clusterv1.Cluster); ok {
		return fmt.Errorf("cannot %s Cluster %s/%s: %s works on machinedeployment, machinepool and kubeadmcontrolplane objects; to %s a whole cluster, set its spec.paused (kubectl patch cluster %s -n %s --type merge -p '{\"spec\":{\"paused\":%t}}')",
			o.verb(), cluster.Namespace, cluster.Name, o.verb(), o.verb(), cluster.Name, cluster.Namespace, !o.Resume)
	}
	if !o.Resume && core.TopologyOwned(obj) {
		return core.TopologyError("pause", obj, "pause its whole Cluster instead: kubectl patch cluster CLUSTER -n "+obj.GetNamespace()+` --type merge -p '{"spec":{"paused":true}}'`)
	}
	kind := core.KindOf(obj)
	var (
		spec        map[string]any
		annotations = map[string]any{}
		done        string // non-empty: nothing to do
	)
	_, annotated := obj.GetAnnotations()[clusterv1.PausedAnnotation]
	paused := kind.PausedBy(obj) != ""
	switch {
	case !o.Resume && paused:
		done = "already paused"
	case !o.Resume && kind.SpecPaused != nil:
		spec = map[string]any{"paused": true}
	case !o.Resume:
		annotations[clusterv1.PausedAnnotation] = "true"
		if kind.PauseWarning != "" {
			o.Session.Warnf("pausing %s %s/%s %s", kind.GVK.Kind, obj.GetNamespace(), obj.GetName(), kind.PauseWarning)
		}
	case !paused:
		done = "already resumed"
	default:
		if kind.SpecPaused != nil {
			spec = map[string]any{"paused": false}
		}
		if annotated {
			annotations[clusterv1.PausedAnnotation] = nil
		}
	}
	if done != "" {
		return o.print(obj, done)
	}
	purpose := o.verb() + " " + core.Describe(obj, kind)
	data, err := core.PatchOf(obj.GetResourceVersion(), annotations, spec)
	if err != nil {
		return fmt.Errorf("cannot %s: %w", purpose, err)
	}
	if err := o.Session.Send(ctx, cl, obj, types.MergePatchType, data, core.DryRunNone, purpose); err != nil {
		return err
	}
	if o.Resume {
		return o.print(obj, "resumed")
	}
	return o.print(obj, "paused")
}

func (o *PauseOptions) print(obj client.Object, op string) error {
	p, err := o.PrintFlags.ToPrinter(op)
	if err != nil {
		return err
	}
	return p.PrintObj(obj, o.Session.IOStreams.Out)
}
