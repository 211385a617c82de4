package status

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// Exit codes of `rollout status`, besides ExitOK and ExitError.
const (
	// ExitTimeout: --timeout elapsed before the rollout was done.
	ExitTimeout = 2
	// ExitStalled: the rollout made no progress for --progress-deadline.
	ExitStalled = 3
	// ExitPaused: the object is paused, so it would never roll out.
	ExitPaused = 4
	// ExitSuperseded: with --revision N, the object is already past
	// revision N (a later change replaced it), so revision N will never be
	// the one rolled out.
	ExitSuperseded = 5
	// ExitNotRolledOut: with --watch=false, the one read found the rollout
	// not yet done.
	ExitNotRolledOut = 9
)

// statusExitStatus are the exit-status lines of status' help.
var statusExitStatus = []string{
	"  0   rolled out (with --watch=false: on that one read)",
	core.ExitHelpError,
	"  2   timeout: --timeout elapsed before the rollout was done",
	"  3   stalled: no progress for --progress-deadline; the blocking machines are listed",
	"  4   paused: the object is paused (spec.paused or annotation cluster.x-k8s.io/paused)",
	"  5   superseded: with --revision N, the object is already past revision N",
	"  6   refused (a fleet): the topology controller's write to a cluster was refused by an",
	"      admission webhook or policy (the Cluster's TopologyReconciled condition says so)",
	"  8   waiting for deletion: a MachineDeployment with the OnDelete strategy waits for its",
	"      old machines to be deleted by hand (they are listed)",
	"  9   with --watch=false: not rolled out yet",
	"  A fleet (clusterclass/NAME, cluster -l or -A) ends once every cluster has its verdict and",
	"  exits 0 when all are rolled out, else with the worst cluster's: 6, then 3, then 4.",
}

// StatusOptions are the options of `rollout status`.
type StatusOptions struct {
	// Session is the invocation: its clients, streams and checks.
	Session *core.Session
	// Output is -o: "" (lines for people) or "json" (one JSON object per change).
	Output string
	// Watch is --watch: false prints the state once.
	Watch bool
	// Timeout is --timeout; 0 waits forever.
	Timeout time.Duration
	// Grace is --grace: how long a complete state must hold.
	Grace time.Duration
	// ProgressDeadline is --progress-deadline: how long the rollout may
	// make no progress before it is reported stalled.
	ProgressDeadline time.Duration
	// Revision is --revision: wait for this revision (rollout-guard's
	// stamp) to be the one rolled out; 0 waits for whatever is live.
	Revision int64
	// Selector is -l: the fleet's Clusters by label (status cluster -l
	// SELECTOR, or a class's clusters that match it).
	Selector string
	// AllNamespaces is -A: the fleet's Clusters in every namespace.
	AllNamespaces bool

	ref core.Ref
	// fleet is set when status watches a fleet: clusterclass/NAME, or
	// cluster with -l or -A.
	fleet *fleetTarget
}

// NewCommand returns the `rollout status` command of the invocation c.
func NewCommand(c *core.Session) *cobra.Command {
	o := &StatusOptions{Session: c, Watch: true, ProgressDeadline: 10 * time.Minute}
	cmd := &cobra.Command{
		Use:   "status KIND/NAME | clusterclass/NAME | cluster (-l SELECTOR | -A)",
		Short: "Watch a rollout until it is done, stalled or paused",
		Long: `Watch the rollout of a worker pool, control plane or Cluster until it is done, and exit
with a verdict. It watches the object, its Machines and MachineSets (no polling) and is done
on the first read where the controller observed the generation and every machine is ready,
up to date and of the current MachineSet. cluster/NAME watches the control plane, then each
worker pool; a ClusterClass cluster is watched through every step of its upgrade. On a
terminal the view is redrawn in place; otherwise a line per change. More (when a rollout is
done, -o json's fields): docs/status.md.

A fleet is watched as one: clusterclass/NAME watches every Cluster of the class (its
spec.topology.classRef), cluster -l SELECTOR the Clusters the selector matches, -A in every
namespace. One line per cluster: up to date, rolling (which part, how many machines),
stalled (why), paused, or refused (the topology controller's write was refused by admission),
grouped worst first under the fleet's totals; a long group of up-to-date clusters is folded
to one line. Clusters labelled rollout-guard.io/wave are grouped by wave instead: done,
rolling, held (by a Runtime Extension, with its message), waiting, halted or paused. It ends
when every cluster has its verdict, and exits with the worst.`,
		Example: `  # Wait for a worker pool to roll out
  rollout status machinedeployment/md-0

  # Give up after 20 minutes; report a stall after 5 minutes without progress
  rollout status kcp/my-cluster-control-plane --timeout 20m --progress-deadline 5m

  # The control plane, then every worker pool of a cluster, as JSON events; on a
  # ClusterClass cluster, every step of an upgrade to spec.topology.version
  rollout status cluster/my-cluster -o json

  # One report, no waiting: exit 0 if rolled out
  rollout status md/md-0 --watch=false

  # Wait for the change that made revision 7 (exit 5 if a later change replaced it)
  rollout status md/md-0 --revision 7

  # Every cluster of a ClusterClass, until each is rolled out (a class or variable change)
  rollout status clusterclass/my-class

  # The clusters labelled env=prod in every namespace, once, one JSON object per cluster
  rollout status cluster -l env=prod -A --watch=false -o json`,
		RunE: core.RunE(o),
	}
	core.SetExitStatus(cmd, statusExitStatus...)
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json (one JSON object per change); default: one line per change.")
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", true, "Watch until the rollout is done; with --watch=false, report the current state once.")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "Give up after this long (e.g. 10m) and exit 2; 0 waits forever.")
	cmd.Flags().DurationVar(&o.Grace, "grace", o.Grace, "How long a complete state must hold before the rollout is declared done (0: done on the first read where it is complete).")
	cmd.Flags().Int64Var(&o.Revision, "revision", 0, "Wait for this revision (rollout history) to be rolled out; exit 5 if the object is already past it. Not with cluster/NAME.")
	cmd.Flags().DurationVar(&o.ProgressDeadline, "progress-deadline", o.ProgressDeadline, "Exit 3 (stalled) when the rollout makes no progress for this long.")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "Label selector of Clusters (e.g. env=prod): watch the fleet of those clusters (status cluster -l SELECTOR), or only those of clusterclass/NAME.")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "Watch the fleet's Clusters in every namespace (status cluster -A, or clusterclass/NAME's clusters in any namespace).")
	return cmd
}

// Complete reads the argument: one object, a ClusterClass, or the kind
// cluster alone with -l or -A.
func (o *StatusOptions) Complete(cmd *cobra.Command, args []string) error {
	selected := cmd.Flags().Changed("selector") || o.AllNamespaces
	if selected && len(args) == 1 && !strings.Contains(args[0], "/") {
		k, err := core.ParseKind(args[0])
		if err != nil {
			return err
		}
		if k.GVK != core.Cluster.GVK {
			return fmt.Errorf("status %s -l/-A: status selects Clusters only; write status cluster -l SELECTOR (or -A), or status clusterclass/NAME for a class's clusters", args[0])
		}
		o.fleet = &fleetTarget{}
		return nil
	}
	ref, err := core.ParseOne("status", args)
	if err != nil {
		return err
	}
	o.ref = ref
	switch {
	case ref.Kind.GVK == core.ClusterClass.GVK:
		o.fleet = &fleetTarget{class: &ref}
	case selected:
		return fmt.Errorf("-l/--selector and -A/--all-namespaces select a fleet of Clusters, not %s: write status cluster -l SELECTOR, status clusterclass/NAME -l SELECTOR, or drop them to watch %s", ref, ref)
	}
	return nil
}

// Validate checks the flags.
func (o *StatusOptions) Validate() error {
	switch strings.ToLower(o.Output) {
	case "", "json":
	default:
		return fmt.Errorf("unknown output format %q: status supports -o json only", o.Output)
	}
	if o.Timeout < 0 || o.Grace < 0 || o.ProgressDeadline <= 0 {
		return fmt.Errorf("--timeout and --grace must not be negative, --progress-deadline must be positive")
	}
	if o.Revision < 0 {
		return fmt.Errorf("--revision %d: a revision is a positive number (rollout history lists them)", o.Revision)
	}
	if o.Revision > 0 && o.fleet != nil {
		return fmt.Errorf("--revision applies to one machinedeployment/NAME or kubeadmcontrolplane/NAME, not to a fleet of clusters: their objects have revisions of their own")
	}
	if o.Revision > 0 && o.ref.Kind.GVK == core.Cluster.GVK {
		return fmt.Errorf("--revision applies to one machinedeployment/NAME or kubeadmcontrolplane/NAME, not to %s: its control plane and pools have revisions of their own", o.ref)
	}
	return nil
}

// Run watches the object (or the objects of a cluster, in turn).
func (o *StatusOptions) Run(ctx context.Context) error {
	cl, err := o.Session.Clients()
	if err != nil {
		return err
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	if o.fleet != nil {
		return o.runFleet(ctx, cl)
	}
	obj, err := o.Session.Get(ctx, cl, o.ref, "status "+o.ref.String())
	if err != nil {
		return o.timedOut(ctx, err)
	}
	p := &StatusPrinter{Out: o.Session.IOStreams.Out, JSON: strings.EqualFold(o.Output, "json"), Last: map[string]string{}}
	if !p.JSON && o.Watch {
		p.live = NewLiveTerminal(o.Session.IOStreams.Out, time.Now())
	}
	objs := []client.Object{obj}
	if cluster, ok := obj.(*clusterv1.Cluster); ok {
		if cluster.Spec.Topology.IsDefined() {
			return o.runTopology(ctx, cl, cluster, p)
		}
		if objs, err = o.clusterObjects(ctx, cl, cluster); err != nil {
			return o.timedOut(ctx, err)
		}
	}
	if !o.Watch {
		return o.reportObjects(ctx, cl, objs, p)
	}
	for _, obj := range objs {
		w := o.objectWatcher(cl, obj)
		if err := o.follow(ctx, w, func(now time.Time) (statusView, error) { return o.objectView(w, obj, now) }, p); err != nil {
			return err
		}
	}
	return nil
}

// timedOut turns an error caused by the --timeout into the timeout message.
func (o *StatusOptions) timedOut(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		what := o.ref.String()
		if o.fleet != nil && o.fleet.class == nil {
			what = "the clusters"
		}
		return core.StatusError{Code: ExitTimeout, Msg: fmt.Sprintf("timed out waiting for %s to roll out (--timeout %s)", what, o.Timeout)}
	}
	return err
}

// clusterObjects returns a Cluster's control plane, then its
// MachineDeployments and its MachinePools, each sorted by name.
func (o *StatusOptions) clusterObjects(ctx context.Context, cl *core.Clients, cluster *clusterv1.Cluster) ([]client.Object, error) {
	m, err := o.Session.ClusterPools(ctx, cl, cluster, "status Cluster "+cluster.Namespace+"/"+cluster.Name)
	if err != nil {
		return nil, err
	}
	if ref := m.Other; ref != nil {
		return nil, fmt.Errorf("cannot watch Cluster %s/%s: its control plane is a %s.%s; status watches KubeadmControlPlanes only", cluster.Namespace, cluster.Name, ref.Kind, ref.APIGroup)
	}
	return m.WithPools(), nil
}

// The sources of the watcher of one object (objectWatcher).
const (
	objectSource = iota
	objectMachines
	objectMachineSets
)

// objectWatcher reads one object: the object itself (field selector
// metadata.name), its Machines and, for a MachineDeployment, its
// MachineSets.
func (o *StatusOptions) objectWatcher(cl *core.Clients, obj client.Object) *watcher {
	kind := core.KindOf(obj)
	ns, name := obj.GetNamespace(), obj.GetName()
	sources := []watchSource{
		{kind: kind.GVK.Kind, GR: kind.GroupResource(), example: kind.New(), newList: kind.NewList,
			opts: []client.ListOption{client.InNamespace(ns), client.MatchingFields{"metadata.name": name}},
			keep: func(o client.Object) bool { return o.GetName() == name }},
		machineSource(ns, kind.Machines(obj)),
	}
	if kind.MachineSets != nil {
		sources = append(sources, machineSetSource(ns, kind.MachineSets(obj)))
	}
	return newWatcher(cl.Client, ns, "status "+core.Describe(obj, kind), o.Session.IOStreams.ErrOut, sources)
}

// objectView evaluates what w holds of obj at now; nil when obj is gone.
func (o *StatusOptions) objectView(w *watcher, obj client.Object, now time.Time) (statusView, error) {
	live := w.of(objectSource)
	if len(live) == 0 {
		return nil, fmt.Errorf("%s/%s was deleted while its rollout was watched", core.KindOf(obj).Singular(), obj.GetName())
	}
	var sets []clusterv1.MachineSet
	if len(w.sources) > objectMachineSets {
		sets = typed[clusterv1.MachineSet](w.of(objectMachineSets))
	}
	s, verdict := o.Evaluate(live[0], typed[clusterv1.Machine](w.of(objectMachines)), sets, now)
	return &objectView{s}, verdict
}

// Evaluate computes the state of obj's rollout at now and applies
// --revision: a revision not live yet keeps the rollout from being
// complete; one past it is the superseded verdict, returned as the error
// with the state.
func (o *StatusOptions) Evaluate(obj client.Object, machines []clusterv1.Machine, sets []clusterv1.MachineSet, now time.Time) (StatusReport, error) {
	s := EvaluateStatusAt(obj, machines, sets, now)
	rw, err := CheckRevision(obj, o.Revision)
	if err != nil {
		return s, err
	}
	if rw.Waiting {
		s.Complete, s.WaitRevision = false, o.Revision
	}
	return s, nil
}

// reportObjects prints each object's state once (--watch=false): an error
// unless every one is rolled out.
func (o *StatusOptions) reportObjects(ctx context.Context, cl *core.Clients, objs []client.Object, p *StatusPrinter) error {
	failed, waiting := 0, []StatusReport(nil)
	for _, obj := range objs {
		w := o.objectWatcher(cl, obj)
		w.seed(objectSource, obj)
		if err := w.list(ctx); err != nil {
			return err
		}
		now := time.Now()
		v, verdict := o.objectView(w, obj, now)
		s := v.report()
		s.Phase = PhaseProgressing
		if verdict != nil {
			_ = p.Print(*s, now)
			return verdict
		}
		if s.Complete {
			s.Phase, s.Done = PhaseRolledOut, true
		} else {
			failed++
		}
		if s.Paused != "" {
			s.Phase = PhasePaused
		}
		if len(s.OldToDelete) > 0 && s.Paused == "" {
			s.Phase = PhaseWaitingForDeletion
			waiting = append(waiting, *s)
		}
		if err := p.Print(*s, now); err != nil {
			return err
		}
	}
	if failed > 0 && failed == len(waiting) {
		// Nothing else holds them: the OnDelete verdict.
		return onDeleteVerdict(waiting[0], waiting[0].namespace)
	}
	if failed > 0 {
		return core.StatusError{Code: ExitNotRolledOut, Verdict: true, Msg: fmt.Sprintf("%d of %d objects not rolled out", failed, len(objs))}
	}
	return nil
}

// machineSource reads the Machines in namespace with labels sel.
func machineSource(ns string, sel client.MatchingLabels) watchSource {
	return labelled("Machine", clusterv1.GroupVersion.WithResource("machines").GroupResource(), &clusterv1.Machine{},
		func() client.ObjectList { return &clusterv1.MachineList{} }, ns, sel)
}

// machineSetSource reads the MachineSets in namespace with labels sel.
func machineSetSource(ns string, sel client.MatchingLabels) watchSource {
	return labelled("MachineSet", clusterv1.GroupVersion.WithResource("machinesets").GroupResource(), &clusterv1.MachineSet{},
		func() client.ObjectList { return &clusterv1.MachineSetList{} }, ns, sel)
}

// labelled reads the objects in namespace with labels sel.
func labelled(kind string, gr schema.GroupResource, example client.Object, newList func() client.ObjectList, ns string, sel client.MatchingLabels) watchSource {
	selector := labels.SelectorFromSet(labels.Set(sel))
	return watchSource{kind: kind, GR: gr, example: example, newList: newList, opts: []client.ListOption{client.InNamespace(ns), sel},
		keep: func(o client.Object) bool { return selector.Matches(labels.Set(o.GetLabels())) }}
}

// typed returns the objects of type *T among objs, as values.
func typed[T any, P interface {
	*T
	client.Object
}](objs []client.Object) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(P); ok {
			out = append(out, *p)
		}
	}
	return out
}
