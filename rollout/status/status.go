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
)

const statusExitCodesHelp = `Exit status:
  0  rolled out (with --watch=false: complete on that one read)
  1  error: bad arguments, object not found, API server unreachable;
     with --watch=false: not complete
  2  timeout: --timeout elapsed before the rollout was done
  3  stalled: no progress for --progress-deadline; the blocking machines are listed
  4  paused: the object is paused (spec.paused or annotation cluster.x-k8s.io/paused)
  5  superseded: with --revision N, the object is already past revision N
  8  waiting for deletion: a MachineDeployment with the OnDelete strategy waits for
     its old machines to be deleted by hand (they are listed)`

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

	ref core.Ref
}

// NewCommand returns the `rollout status` command of the invocation c.
func NewCommand(c *core.Session) *cobra.Command {
	o := &StatusOptions{Session: c, Watch: true, ProgressDeadline: 10 * time.Minute}
	cmd := &cobra.Command{
		Use:   "status KIND/NAME",
		Short: "Watch a rollout until it is done, stalled or paused",
		Long: `Watch the rollout of a MachineDeployment, MachinePool, KubeadmControlPlane, another
provider's control plane or Cluster until it is done, and exit with a verdict. The object, its
Machines and a MachineDeployment's MachineSets are watched (no polling).

On a terminal the view is redrawn in place: progress bars of up-to-date, available and
existing machines against spec.replicas, the MachineSets (new and old, wanted and existing
replicas), one line per machine (new or old, phase, and for a machine that is not ready or
not up to date the reason and message of its condition), and the elapsed time. Otherwise
every change is printed on one line, and a line is printed only when it changed: a summary
such as "machinedeployment/md-0: 1 of 3 machines up to date, 2 available (2 old machines
pending deletion)", and for each machine that is not ready its phase and the reason and
message of its Ready condition.

A rollout is done when the controller observed the latest generation,
spec.replicas = status.replicas = upToDateReplicas = availableReplicas, the RollingOut
condition is not True, and there are exactly spec.replicas machines, all ready, up to date
and not being deleted; for a MachineDeployment, also: every machine belongs to its current
MachineSet (the one whose revision the controller wrote on the MachineDeployment), which
wants and has spec.replicas machines, all available, and every other MachineSet wants and
has none. A MachineDeployment's counts and its machines' UpToDate conditions lag an edit by
a moment; which MachineSet owns each machine does not, so one read that meets all of this
is trusted and status exits as soon as the API server shows the rollout complete. A
KubeadmControlPlane writes its machines' UpToDate conditions before the status that observes
the new generation. A machine created before spec.rollout.after (a restart) counts as old
whatever its conditions say, unless rollout.after is more than a minute ahead of this
clock (a restart scheduled for later). A MachinePool is done on its status counts
(replicas, ready, up to date, available) and, when its infrastructure provider gives it
Machines (label cluster.x-k8s.io/pool-name), on those Machines as well; most providers run
a pool's instances without Machines. A MachineDeployment with the OnDelete strategy replaces
a machine only when someone deletes it: once its controller has done all it does by itself
(every machine deleted so far replaced, ready and up to date), status exits 8 at once,
"waiting for N old machines to be deleted (OnDelete strategy)", and names them.
A machine Cluster API updates in place (InPlaceUpdates: annotation
in-place-updates.internal.cluster.x-k8s.io/update-in-progress, condition Updating) is kept:
it is shown updating, with the reason and message of its update, and the rollout is done
once every machine is updated and up to date. A machine replaced without an edit is named
with its cause ("cause"): a MachineHealthCheck's remediation (its HealthCheckSucceeded
condition False, OwnerRemediated present), or certificates that expire within the
KubeadmControlPlane's spec.rollout.before.certificatesExpiryDays. Availability already
includes minReadySeconds. --grace D additionally
requires the done state to hold for D (default 0).

--revision N waits for revision N (rollout history; rollout-guard stamps it on every
change) to be the live one and rolled out. If the object is already past N, a later change
superseded it: status exits 5 at once instead of waiting for a revision that will not come.

cluster/NAME watches the cluster's control plane, then each of its MachineDeployments and
MachinePools, in turn, within one --timeout.

A ClusterClass cluster (one with spec.topology) is watched as a whole instead: its Cluster,
control plane, MachineDeployments, MachinePools, Machines and MachineSets at once. Cluster
API upgrades a topology in steps (a chained upgrade: the control plane one minor at a time,
the workers when the kubelet version skew requires it and at the end), and while it does,
it writes the versions still to apply in the Cluster's status.controlPlane.upgradePlan and
status.workers.upgradePlan. status shows these steps in order, each done, now (the current
one, the first not rolled out) or next, from the control plane's spec.version and its
machines' versions and the worker pools' versions, with the Cluster's TopologyReconciled
condition while it is not True. Such a cluster is done only when its spec.topology.version
is reached by the control plane (spec.version and every machine) and by every
MachineDeployment and MachinePool of the topology, and every object is rolled out: a step
rolled out on the way is not the end. Watching one topology-owned object instead ends at
its own step.

-o json prints one JSON object per change: {"time", "object", "phase" (Progressing,
Confirming, RolledOut, Paused, Stalled, WaitingForDeletion, TimedOut), "replicas",
"upToDate", "available", "ready", "machines": [{"name", "phase", "upToDate", "ready",
"deleting", "updating" (in place), "reason", "message", "cause"}], "oldMachinesToDelete"
(OnDelete),
"done"}. For a ClusterClass cluster the first event of each change is the cluster's
("object": "cluster/NAME", the counts summed over its objects, no machines) with
"upgrade": {"version", "reached", "controlPlane" and "workers": [{"object", "version",
"machines": [{"version", "machines"}]}], "controlPlanePlan", "workersPlan", "steps":
[{"version", "part" (controlPlane, workers), "state" (RolledOut, RollingOut, Pending),
"current", "objects", "applied", "rolledOut"}], "missing", "missingMachinePools",
"topologyReconciled"}; its objects' events follow, with the cluster's phase and done.

` + statusExitCodesHelp,
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
  rollout status md/md-0 --revision 7`,
		RunE: core.RunE(o),
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json (one JSON object per change); default: one line per change.")
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", true, "Watch until the rollout is done; with --watch=false, report the current state once.")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "Give up after this long (e.g. 10m) and exit 2; 0 waits forever.")
	cmd.Flags().DurationVar(&o.Grace, "grace", o.Grace, "How long a complete state must hold before the rollout is declared done (0: done on the first read where it is complete; see above).")
	cmd.Flags().Int64Var(&o.Revision, "revision", 0, "Wait for this revision (rollout history) to be rolled out; exit 5 if the object is already past it. Not with cluster/NAME.")
	cmd.Flags().DurationVar(&o.ProgressDeadline, "progress-deadline", o.ProgressDeadline, "Exit 3 (stalled) when the rollout makes no progress for this long.")
	return cmd
}

// Complete reads the argument.
func (o *StatusOptions) Complete(_ *cobra.Command, args []string) error {
	ref, err := core.ParseOne("status", args)
	if err != nil {
		return err
	}
	o.ref = ref
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
		return core.StatusError{Code: ExitTimeout, Msg: fmt.Sprintf("timed out waiting for %s to roll out (--timeout %s)", o.ref, o.Timeout)}
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
		return core.StatusError{Code: core.ExitError, Msg: fmt.Sprintf("%d of %d objects not rolled out", failed, len(objs))}
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
