package rollout

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// RestartOptions are the options of `rollout restart`.
type RestartOptions struct {
	// Session is the invocation: its clients, streams and checks.
	Session *core.Session
	// PrintFlags is -o/--output.
	PrintFlags *core.PrintFlags
	// Selector selects objects by label (-l).
	Selector string
	// AllNamespaces selects in every namespace (-A).
	AllNamespaces bool
	// At is the --at time, RFC 3339; "" is now.
	At string
	// ChangeCause is --change-cause.
	ChangeCause string
	// Yes is --yes: restart control planes without asking.
	Yes bool

	targets core.Targets
	at      time.Time
	cause   string
	// bare is the command line of `rollout KIND/NAME` with no switch flag,
	// a restart that asks for every kind; "" for rollout restart.
	bare string
}

func newRestartCommand(c *core.Session) *cobra.Command {
	o := &RestartOptions{Session: c, PrintFlags: core.NewPrintFlags()}
	cmd := &cobra.Command{
		Use:   "restart (KIND/NAME ... | KIND -l SELECTOR)",
		Short: "Replace every machine of a worker pool or control plane, or of a whole cluster",
		Long: `Restart a MachineDeployment, a control plane or a whole Cluster (its control plane, then
every worker pool): set spec.rollout.after to now, or to --at TIME, so Cluster API replaces
every machine created before that time. A control plane's or Cluster's restart names the
machines it replaces and asks at a terminal; elsewhere it needs --yes. Topology-managed
objects are restarted through their Cluster. More: docs/rollouts.md.`,
		Example: `  # Replace every machine of a worker pool now
  rollout restart machinedeployment/md-0

  # Replace the control plane's machines after a given time, without asking
  rollout restart kcp/my-cluster-control-plane --at 2030-01-02T03:00:00Z --yes

  # The control plane, then every worker pool of a cluster
  rollout restart cluster/my-cluster

  # Every worker pool labelled pool=gpu
  rollout restart md -l pool=gpu`,
		RunE: core.RunE(o),
	}
	core.SetExitStatus(cmd, core.ExitHelpOK, core.ExitHelpChangeError, core.ExitHelpRefused, core.ExitHelpNotConfirmed)
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "Label selector (e.g. pool=gpu): restart every object of the KIND it matches.")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "With -l, select in every namespace.")
	cmd.Flags().StringVar(&o.At, "at", "", "Restart at this time (RFC 3339, e.g. 2030-01-02T03:00:00Z) instead of now.")
	addYesFlag(cmd, &o.Yes, "Restart control planes and clusters without asking (needed when not at a terminal).")
	addChangeCauseFlag(cmd, &o.ChangeCause)
	o.PrintFlags.AddFlags(cmd)
	return cmd
}

// addYesFlag registers --yes/-y.
func addYesFlag(cmd *cobra.Command, v *bool, usage string) {
	cmd.Flags().BoolVarP(v, "yes", "y", false, usage)
}

// addChangeCauseFlag registers --change-cause.
func addChangeCauseFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "change-cause", "", "Why this change is made, recorded by rollout-guard in the revision history (default: the command line, without connection flags).")
}

// Complete reads the arguments and the time.
func (o *RestartOptions) Complete(cmd *cobra.Command, args []string) error {
	t, err := core.ParseTargets("restart", args, cmd.Flags().Changed("selector"))
	if err != nil {
		return err
	}
	o.targets = t
	if o.At != "" {
		at, err := time.Parse(time.RFC3339, o.At)
		if err != nil {
			return fmt.Errorf("--at %q is not an RFC 3339 time such as 2030-01-02T03:00:00Z: %w", o.At, err)
		}
		o.at = at.UTC().Truncate(time.Second)
	}
	o.cause = o.Session.ChangeCause(cmd, o.ChangeCause)
	return nil
}

// Validate checks the flags.
func (o *RestartOptions) Validate() error {
	if o.AllNamespaces && o.targets.Kind == nil {
		return fmt.Errorf("-A/--all-namespaces works with -l/--selector only")
	}
	return o.PrintFlags.Validate()
}

// Run restarts every object.
func (o *RestartOptions) Run(ctx context.Context) error {
	cl, err := o.Session.Clients()
	if err != nil {
		return err
	}
	objs, err := o.Session.Resolve(ctx, cl, o.targets, o.Selector, o.AllNamespaces, "restart")
	if err != nil {
		return err
	}
	if err := o.confirm(ctx, cl, objs); err != nil {
		return err
	}
	return o.Session.ForEach("restart", objs, o.Selector, func(obj client.Object) error {
		if cluster, ok := obj.(*clusterv1.Cluster); ok {
			return o.restartCluster(ctx, cl, cluster)
		}
		if kind := core.KindOf(obj); kind.NoRestart != "" {
			return fmt.Errorf("cannot restart %s: %s", core.Describe(obj, kind), kind.NoRestart)
		}
		return o.restart(ctx, cl, obj)
	})
}

// confirm asks before a restart that replaces a control plane's machines
// (or, for `rollout KIND/NAME` alone, any object's): at a terminal it names
// the machines and asks; elsewhere it needs --yes.
func (o *RestartOptions) confirm(ctx context.Context, cl *core.Clients, objs []client.Object) error {
	if o.Yes {
		return nil
	}
	var asked []client.Object
	var ids []string
	for _, obj := range objs {
		if o.bare != "" || core.IsControlPlane(obj) {
			asked = append(asked, obj)
			ids = append(ids, core.Describe(obj, core.KindOf(obj)))
		}
	}
	if len(asked) == 0 {
		return nil
	}
	what := "restarting " + strings.Join(ids, ", ")
	if o.bare != "" {
		what = o.bare + " with no --template, --bootstrap-template or --version restarts " + strings.Join(ids, ", ")
	}
	if !o.Session.Interactive() {
		return core.NotConfirmedError{Msg: fmt.Sprintf("%s, replacing every machine: add --yes (-y) to do it (at a terminal it asks); nothing was changed", what)}
	}
	lines := []string{"This restart replaces every machine of:"}
	for _, obj := range asked {
		lines = append(lines, "  "+core.ReplacedMachines(ctx, cl, obj))
	}
	yes, err := o.Session.Ask(lines, "Restart?")
	if err != nil {
		return err
	}
	if !yes {
		return core.NotConfirmedError{Msg: "restart not confirmed; nothing was changed"}
	}
	return nil
}

// when is the restart time: --at, or now.
func (o *RestartOptions) when() time.Time {
	if !o.at.IsZero() {
		return o.at
	}
	return o.Session.Now().UTC().Truncate(time.Second)
}

// restart restarts one MachineDeployment or KubeadmControlPlane.
func (o *RestartOptions) restart(ctx context.Context, cl *core.Clients, obj client.Object) error {
	if core.TopologyOwned(obj) {
		return o.restartTopologyOwned(ctx, cl, obj)
	}
	kind := core.KindOf(obj)
	purpose := "restart " + core.Describe(obj, kind)
	at := o.when()
	var already bool
	err, _ := core.RetryConflicts(func() error {
		if how := core.PausedBy(obj); how != "" {
			return o.Session.PausedError("restart", obj, how)
		}
		if current := kind.RolloutAfter(obj); current.Equal(at) {
			already = true
			return nil
		}
		data, err := core.PatchOf(obj.GetResourceVersion(), core.CauseAnnotations(o.cause),
			map[string]any{"rollout": map[string]any{"after": metav1.NewTime(at)}})
		if err != nil {
			return fmt.Errorf("cannot %s: %w", purpose, err)
		}
		if kind.Contract {
			if err := o.checkRolloutAfter(ctx, cl, obj, data, purpose); err != nil {
				return err
			}
		}
		return o.Session.Send(ctx, cl, obj, types.MergePatchType, data, core.DryRunNone, purpose)
	}, func() (err error) {
		o.Session.Notef("conflict: %s changed while restarting; reading it again", core.Describe(obj, kind))
		obj, err = o.Session.Reread(ctx, cl, obj, purpose)
		return err
	})
	if err != nil {
		return err
	}
	if already {
		return o.print(obj, fmt.Sprintf("already restarted (spec.rollout.after is %s)", at.Format(time.RFC3339)))
	}
	op := "restarted"
	if at.After(o.Session.Now()) {
		op = "restart scheduled at " + at.Format(time.RFC3339)
	}
	return o.print(obj, op)
}

// restartTopologyOwned restarts a topology-managed object through its Cluster.
func (o *RestartOptions) restartTopologyOwned(ctx context.Context, cl *core.Clients, obj client.Object) error {
	r, err := core.TopologyRestartOf(obj, "restart")
	if err != nil {
		return err
	}
	u, fields, err := o.Session.RestartThroughCluster(ctx, cl, obj.GetNamespace(), r, o.when(), o.cause)
	if err != nil {
		return err
	}
	if o.PrintFlags.Data() {
		return o.print(u, "")
	}
	_, err = fmt.Fprintf(o.Session.IOStreams.Out, "%s restarted through Cluster %s/%s (%s)\n", core.OperationName(obj), obj.GetNamespace(), r.Cluster, fields[0])
	return err
}

// restartCluster restarts a cluster's control plane, then its worker pools.
func (o *RestartOptions) restartCluster(ctx context.Context, cl *core.Clients, cluster *clusterv1.Cluster) error {
	ns := cluster.Namespace
	mds := &clusterv1.MachineDeploymentList{}
	if err := cl.Client.List(ctx, mds, client.InNamespace(ns)); err != nil {
		return core.Call{Verb: "list", GR: core.MachineDeployment.GroupResource(), Kind: "MachineDeployment", Namespace: ns, Purpose: "restart Cluster " + ns + "/" + cluster.Name}.Explain(err)
	}
	var workers []client.Object
	for i := range mds.Items {
		if mds.Items[i].Spec.ClusterName == cluster.Name {
			workers = append(workers, &mds.Items[i])
		}
	}
	sort.Slice(workers, func(i, j int) bool { return workers[i].GetName() < workers[j].GetName() })

	if cluster.Spec.Topology.IsDefined() {
		// One write to the Cluster restarts the control plane and every
		// topology pool; pools outside the topology are restarted directly.
		u, fields, err := o.Session.RestartThroughCluster(ctx, cl, ns, core.TopologyRestart{Cluster: cluster.Name, ControlPlane: true, AllWorkers: true}, o.when(), o.cause)
		if err != nil {
			return err
		}
		if o.PrintFlags.Data() {
			if err := o.print(u, ""); err != nil {
				return err
			}
		} else {
			for _, f := range fields {
				fmt.Fprintf(o.Session.IOStreams.Out, "cluster.cluster.x-k8s.io/%s restarted (%s)\n", cluster.Name, f)
			}
		}
		var direct []client.Object
		for _, w := range workers {
			if !core.TopologyOwned(w) {
				direct = append(direct, w)
			}
		}
		return o.restartAll(ctx, cl, direct)
	}

	ref := cluster.Spec.ControlPlaneRef
	if !ref.IsDefined() {
		return fmt.Errorf("cannot restart Cluster %s/%s: it has no spec.controlPlaneRef", ns, cluster.Name)
	}
	if ref.Kind != core.KubeadmControlPlane.GVK.Kind || ref.APIGroup != core.KubeadmControlPlane.GVK.Group {
		return fmt.Errorf("cannot restart Cluster %s/%s: its control plane is a %s.%s; rollout restarts KubeadmControlPlanes only", ns, cluster.Name, ref.Kind, ref.APIGroup)
	}
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, kcp); err != nil {
		return core.Call{Verb: "get", GR: core.KubeadmControlPlane.GroupResource(), Kind: "KubeadmControlPlane", Namespace: ns, Name: ref.Name, Purpose: "restart Cluster " + ns + "/" + cluster.Name}.Explain(err)
	}
	if err := o.restart(ctx, cl, kcp); err != nil {
		return fmt.Errorf("%w\nthe control plane restarts first: its worker pools were not restarted", err)
	}
	return o.restartAll(ctx, cl, workers)
}

// restartAll restarts each object, printing each error and returning a summary.
func (o *RestartOptions) restartAll(ctx context.Context, cl *core.Clients, objs []client.Object) error {
	failed := 0
	for _, obj := range objs {
		if err := o.restart(ctx, cl, obj); err != nil {
			failed++
			fmt.Fprintf(o.Session.IOStreams.ErrOut, "error: %v\n", err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("restart failed for %d of %d worker pools", failed, len(objs))
	}
	return nil
}

func (o *RestartOptions) print(obj client.Object, op string) error {
	p, err := o.PrintFlags.ToPrinter(op)
	if err != nil {
		return err
	}
	return p.PrintObj(obj, o.Session.IOStreams.Out)
}

// checkRolloutAfter makes sure a control plane of another provider has
// the contract's optional spec.rollout.after, by sending the restart as a
// server dry run: the API server drops a field its schema does not have, and
// a restart that sets nothing must not be reported as done.
func (o *RestartOptions) checkRolloutAfter(ctx context.Context, cl *core.Clients, obj client.Object, patch []byte, purpose string) error {
	probe := obj.DeepCopyObject().(client.Object)
	if err := o.Session.Send(ctx, cl, probe, types.MergePatchType, patch, core.DryRunServer, purpose); err != nil {
		return err
	}
	if core.RolloutAfter(probe).IsZero() {
		return fmt.Errorf("cannot %s: its kind has no spec.rollout.after (the optional rolloutAfter rule of Cluster API's control-plane contract), so its provider cannot be asked to replace its machines; see the provider's documentation for how it rolls them", purpose)
	}
	return nil
}
