package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// Exit codes of `rollout status`, besides ExitOK and ExitError.
const (
	// ExitTimeout: --timeout elapsed before the rollout was done.
	ExitTimeout = 2
	// ExitStalled: the rollout made no progress for --progress-deadline.
	ExitStalled = 3
	// ExitPaused: the object is paused, so it would never roll out.
	ExitPaused = 4
)

// Phases of a status report.
const (
	// PhaseProgressing: the rollout is not complete.
	PhaseProgressing = "Progressing"
	// PhaseConfirming: the rollout looks complete and must stay so for the
	// grace period.
	PhaseConfirming = "Confirming"
	// PhaseRolledOut: the rollout is complete and stayed so for the grace
	// period (or, with --watch=false, is complete on the one read).
	PhaseRolledOut = "RolledOut"
	// PhasePaused: the object is paused.
	PhasePaused = "Paused"
	// PhaseStalled: nothing moved for the progress deadline.
	PhaseStalled = "Stalled"
	// PhaseTimedOut: --timeout elapsed.
	PhaseTimedOut = "TimedOut"
)

const statusExitCodesHelp = `Exit status:
  0  rolled out (with --watch=false: complete on that one read)
  1  error: bad arguments, object not found, API server unreachable;
     with --watch=false: not complete
  2  timeout: --timeout elapsed before the rollout was done
  3  stalled: no progress for --progress-deadline; the blocking machines are listed
  4  paused: the object is paused (spec.paused or annotation cluster.x-k8s.io/paused)
  5  superseded: with --revision N, the object is already past revision N`

// StatusOptions are the options of `rollout status`.
type StatusOptions struct {
	c *cli
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

	ref Ref
	// lostAPIServer is the last "lost the API server" note printed, so an
	// outage retried every second is reported once, not once a second.
	lostAPIServer string
}

func newStatusCommand(c *cli) *cobra.Command {
	o := &StatusOptions{c: c, Watch: true, ProgressDeadline: 10 * time.Minute}
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
a pool's instances without Machines. Availability already includes minReadySeconds. --grace D additionally
requires the done state to hold for D (default 0).

--revision N waits for revision N (rollout history; rollout-guard stamps it on every
change) to be the live one and rolled out. If the object is already past N, a later change
superseded it: status exits 5 at once instead of waiting for a revision that will not come.

cluster/NAME watches the cluster's control plane, then each of its MachineDeployments, in
turn, within one --timeout.

A ClusterClass cluster (one with spec.topology) is watched as a whole instead: its Cluster,
control plane, MachineDeployments, Machines and MachineSets at once. Cluster API upgrades
a topology in steps (a chained upgrade: the control plane one minor at a time, the workers
when the kubelet version skew requires it and at the end), and while it does, it writes the
versions still to apply in the Cluster's status.controlPlane.upgradePlan and
status.workers.upgradePlan. status shows these steps in order, each done, now (the current
one, the first not rolled out) or next, from the control plane's spec.version and its
machines' versions and the MachineDeployments' versions, with the Cluster's
TopologyReconciled condition while it is not True. Such a cluster is done only when its
spec.topology.version is reached by the control plane (spec.version and every machine) and
by every MachineDeployment of the topology, and every object is rolled out: a step rolled
out on the way is not the end. Watching one topology-owned object instead ends at its own
step.

-o json prints one JSON object per change: {"time", "object", "phase" (Progressing,
Confirming, RolledOut, Paused, Stalled, TimedOut), "replicas", "upToDate", "available",
"ready", "machines": [{"name", "phase", "upToDate", "ready", "deleting", "reason",
"message"}], "done"}. For a ClusterClass cluster the first event of each change is the
cluster's ("object": "cluster/NAME", the counts summed over its objects, no machines) with
"upgrade": {"version", "reached", "controlPlane" and "workers": [{"object", "version",
"machines": [{"version", "machines"}]}], "controlPlanePlan", "workersPlan", "steps":
[{"version", "part" (controlPlane, workers), "state" (RolledOut, RollingOut, Pending),
"current", "objects", "applied", "rolledOut"}], "missing", "topologyReconciled"}; its
objects' events follow, with the cluster's phase and done.

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
		RunE: runE(o),
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
	ref, err := parseOne("status", args)
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
	if o.Revision > 0 && o.ref.Kind.GVK == Cluster.GVK {
		return fmt.Errorf("--revision applies to one machinedeployment/NAME or kubeadmcontrolplane/NAME, not to %s: its control plane and pools have revisions of their own", o.ref)
	}
	return nil
}

// Run watches the object (or the objects of a cluster, in turn).
func (o *StatusOptions) Run(ctx context.Context) error {
	cl, err := o.c.clients()
	if err != nil {
		return err
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	obj, err := o.c.get(ctx, cl, o.ref, "status "+o.ref.String())
	if err != nil {
		return o.timedOut(ctx, err)
	}
	p := &statusPrinter{out: o.c.IOStreams.Out, json: strings.EqualFold(o.Output, "json"), last: map[string]string{}}
	if !p.json && o.Watch {
		p.live = newLiveTerminal(o.c.IOStreams.Out, time.Now())
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
		failed := 0
		for _, obj := range objs {
			ms, err := o.listMachines(ctx, cl, obj)
			if err != nil {
				return err
			}
			sets, err := o.listMachineSets(ctx, cl, obj)
			if err != nil {
				return err
			}
			s, verdict := o.evaluate(obj, ms, sets)
			s.Phase = PhaseProgressing
			if verdict != nil {
				_ = p.print(s, time.Now())
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
			if err := p.print(s, time.Now()); err != nil {
				return err
			}
		}
		if failed > 0 {
			return statusError{code: ExitError, msg: fmt.Sprintf("%d of %d objects not rolled out", failed, len(objs))}
		}
		return nil
	}
	ww, err := o.watchClient(cl)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := o.watchOne(ctx, ww, cl, obj, p); err != nil {
			return err
		}
	}
	return nil
}

// timedOut turns an error caused by the --timeout into the timeout message.
func (o *StatusOptions) timedOut(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return statusError{code: ExitTimeout, msg: fmt.Sprintf("timed out waiting for %s to roll out (--timeout %s)", o.ref, o.Timeout)}
	}
	return err
}

// clusterObjects returns a Cluster's control plane, then its
// MachineDeployments sorted by name.
func (o *StatusOptions) clusterObjects(ctx context.Context, cl *clients, cluster *clusterv1.Cluster) ([]client.Object, error) {
	m, err := o.c.clusterMembers(ctx, cl, cluster, "status Cluster "+cluster.Namespace+"/"+cluster.Name)
	if err != nil {
		return nil, err
	}
	if ref := m.other; ref != nil {
		return nil, fmt.Errorf("cannot watch Cluster %s/%s: its control plane is a %s.%s; status watches KubeadmControlPlanes only", cluster.Namespace, cluster.Name, ref.Kind, ref.APIGroup)
	}
	return m.objects(), nil
}

// clusterMembers are the objects of a Cluster the CLI works on.
type clusterMembers struct {
	// controlPlane is its KubeadmControlPlane, nil when it has none.
	controlPlane *controlplanev1.KubeadmControlPlane
	// other is its control plane when it is not a KubeadmControlPlane.
	other *clusterv1.ContractVersionedObjectReference
	// machineDeployments are its MachineDeployments, by name.
	machineDeployments []*clusterv1.MachineDeployment
}

// objects are the control plane (if a KubeadmControlPlane), then the
// MachineDeployments.
func (m clusterMembers) objects() []client.Object {
	var objs []client.Object
	if m.controlPlane != nil {
		objs = append(objs, m.controlPlane)
	}
	for _, md := range m.machineDeployments {
		objs = append(objs, md)
	}
	return objs
}

// clusterMembers reads a Cluster's control plane (spec.controlPlaneRef) and
// its MachineDeployments (spec.clusterName).
func (c *cli) clusterMembers(ctx context.Context, cl *clients, cluster *clusterv1.Cluster, purpose string) (clusterMembers, error) {
	ns := cluster.Namespace
	var m clusterMembers
	if ref := cluster.Spec.ControlPlaneRef; ref.IsDefined() {
		if ref.Kind != KubeadmControlPlane.GVK.Kind || ref.APIGroup != KubeadmControlPlane.GVK.Group {
			m.other = &ref
		} else {
			kcp := &controlplanev1.KubeadmControlPlane{}
			if err := cl.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, kcp); err != nil {
				return m, call{verb: "get", gr: KubeadmControlPlane.GroupResource(), kind: "KubeadmControlPlane", namespace: ns, name: ref.Name, purpose: purpose}.explain(err)
			}
			m.controlPlane = kcp
		}
	}
	mds := &clusterv1.MachineDeploymentList{}
	if err := cl.client.List(ctx, mds, client.InNamespace(ns)); err != nil {
		return m, call{verb: "list", gr: MachineDeployment.GroupResource(), kind: "MachineDeployment", namespace: ns, purpose: purpose}.explain(err)
	}
	sort.Slice(mds.Items, func(i, j int) bool { return mds.Items[i].Name < mds.Items[j].Name })
	for i := range mds.Items {
		if mds.Items[i].Spec.ClusterName == cluster.Name {
			m.machineDeployments = append(m.machineDeployments, &mds.Items[i])
		}
	}
	return m, nil
}

// machineLabels selects the Machines of a MachineDeployment, MachinePool,
// KubeadmControlPlane or another provider's control plane.
func machineLabels(obj client.Object) client.MatchingLabels { return kindOf(obj).machines(obj) }

// listMachines reads the Machines of obj.
func (o *StatusOptions) listMachines(ctx context.Context, cl *clients, obj client.Object) ([]clusterv1.Machine, error) {
	list := &clusterv1.MachineList{}
	if err := cl.client.List(ctx, list, client.InNamespace(obj.GetNamespace()), machineLabels(obj)); err != nil {
		return nil, call{verb: "list", gr: clusterv1.GroupVersion.WithResource("machines").GroupResource(), kind: "Machine", namespace: obj.GetNamespace(), purpose: "status " + describe(obj, kindOf(obj))}.explain(err)
	}
	return list.Items, nil
}

// machineSetLabels selects the MachineSets of a MachineDeployment; nil for
// a kind without MachineSets.
func machineSetLabels(obj client.Object) client.MatchingLabels {
	if k := kindOf(obj); k.machineSets != nil {
		return k.machineSets(obj)
	}
	return nil
}

// listMachineSets reads the MachineSets of a MachineDeployment; nil for a
// KubeadmControlPlane.
func (o *StatusOptions) listMachineSets(ctx context.Context, cl *clients, obj client.Object) ([]clusterv1.MachineSet, error) {
	labels := machineSetLabels(obj)
	if labels == nil {
		return nil, nil
	}
	list := &clusterv1.MachineSetList{}
	if err := cl.client.List(ctx, list, client.InNamespace(obj.GetNamespace()), labels); err != nil {
		return nil, machineSetCall(obj, "list").explain(err)
	}
	return list.Items, nil
}

// machineSetCall describes a read of obj's MachineSets for error messages.
func machineSetCall(obj client.Object, verb string) call {
	return call{verb: verb, gr: clusterv1.GroupVersion.WithResource("machinesets").GroupResource(), kind: "MachineSet", namespace: obj.GetNamespace(), purpose: "status " + describe(obj, kindOf(obj))}
}

// evaluate computes the state of obj's rollout and applies --revision: a
// revision not live yet keeps the rollout from being complete; one past
// it is the superseded verdict, returned as the error with the state.
func (o *StatusOptions) evaluate(obj client.Object, machines []clusterv1.Machine, sets []clusterv1.MachineSet) (StatusReport, error) {
	s := EvaluateStatus(obj, machines, sets)
	rw, err := checkRevision(obj, o.Revision)
	if err != nil {
		return s, err
	}
	if rw.waiting {
		s.Complete, s.WaitRevision = false, o.Revision
	}
	return s, nil
}

// watchClient returns a client that can watch, on the invocation's connection.
func (o *StatusOptions) watchClient(cl *clients) (client.WithWatch, error) {
	if cl.watch != nil {
		return cl.watch, nil
	}
	cfg, err := o.c.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "rollout-guard-cli"
	ww, err := client.NewWithWatch(cfg, client.Options{Scheme: Scheme(), Mapper: cl.mapper})
	if err != nil {
		return nil, fmt.Errorf("connecting to the API server: %w", err)
	}
	return ww, nil
}

// watchOne watches one MachineDeployment or KubeadmControlPlane, its
// Machines and (a MachineDeployment's) MachineSets until a verdict. A watch
// that ends is resumed by listing and watching again; the tracker (and so
// the verdict) carries over.
func (o *StatusOptions) watchOne(ctx context.Context, ww client.WithWatch, cl *clients, obj client.Object, p *statusPrinter) error {
	kind := kindOf(obj)
	purpose := "status " + describe(obj, kind)
	tr := &StatusTracker{Grace: o.Grace, ProgressDeadline: o.ProgressDeadline}
	key := client.ObjectKeyFromObject(obj)
	for {
		// List, then watch from the lists' resourceVersions.
		objList := kind.NewList()
		nameSel := client.MatchingFields{"metadata.name": key.Name}
		if err := ww.List(ctx, objList, client.InNamespace(key.Namespace), nameSel); err != nil {
			if o.waitTransient(ctx, err) {
				continue
			}
			return o.timedOut(ctx, call{verb: "list", gr: kind.GroupResource(), kind: kind.GVK.Kind, namespace: key.Namespace, purpose: purpose}.explain(err))
		}
		items, err := apimeta.ExtractList(objList)
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return call{verb: "get", gr: kind.GroupResource(), kind: kind.GVK.Kind, namespace: key.Namespace, name: key.Name, purpose: purpose}.explain(notFound(kind, key.Name))
		}
		st := &watchState{obj: items[0].(client.Object), machines: map[string]clusterv1.Machine{}}
		machineList := &clusterv1.MachineList{}
		if err := ww.List(ctx, machineList, client.InNamespace(key.Namespace), machineLabels(obj)); err != nil {
			if o.waitTransient(ctx, err) {
				continue
			}
			return o.timedOut(ctx, call{verb: "list", gr: clusterv1.GroupVersion.WithResource("machines").GroupResource(), kind: "Machine", namespace: key.Namespace, purpose: purpose}.explain(err))
		}
		for _, m := range machineList.Items {
			st.machines[m.Name] = m
		}
		setLabels := machineSetLabels(obj)
		setList := &clusterv1.MachineSetList{}
		if setLabels != nil {
			st.sets = map[string]clusterv1.MachineSet{}
			if err := ww.List(ctx, setList, client.InNamespace(key.Namespace), setLabels); err != nil {
				if o.waitTransient(ctx, err) {
					continue
				}
				return o.timedOut(ctx, machineSetCall(obj, "list").explain(err))
			}
			for _, ms := range setList.Items {
				st.sets[ms.Name] = ms
			}
		}
		objW, err := ww.Watch(ctx, kind.NewList(), client.InNamespace(key.Namespace), nameSel, fromVersion(objList.(metav1.ListInterface).GetResourceVersion()))
		if err != nil {
			if o.waitTransient(ctx, err) {
				continue
			}
			return o.timedOut(ctx, call{verb: "watch", gr: kind.GroupResource(), kind: kind.GVK.Kind, namespace: key.Namespace, purpose: purpose}.explain(err))
		}
		mW, err := ww.Watch(ctx, &clusterv1.MachineList{}, client.InNamespace(key.Namespace), machineLabels(obj), fromVersion(machineList.ResourceVersion))
		if err != nil {
			objW.Stop()
			if o.waitTransient(ctx, err) {
				continue
			}
			return o.timedOut(ctx, call{verb: "watch", gr: clusterv1.GroupVersion.WithResource("machines").GroupResource(), kind: "Machine", namespace: key.Namespace, purpose: purpose}.explain(err))
		}
		// A KubeadmControlPlane has no MachineSets: a nil channel never
		// delivers.
		var setEvents <-chan watch.Event
		var setW watch.Interface
		if setLabels != nil {
			if setW, err = ww.Watch(ctx, &clusterv1.MachineSetList{}, client.InNamespace(key.Namespace), setLabels, fromVersion(setList.ResourceVersion)); err != nil {
				objW.Stop()
				mW.Stop()
				if o.waitTransient(ctx, err) {
					continue
				}
				return o.timedOut(ctx, machineSetCall(obj, "watch").explain(err))
			}
			setEvents = setW.ResultChan()
		}
		o.lostAPIServer = "" // watching again: the next outage is reported anew
		done, err := o.follow(ctx, tr, st, objW.ResultChan(), mW.ResultChan(), setEvents, p)
		objW.Stop()
		mW.Stop()
		if setW != nil {
			setW.Stop()
		}
		if done || err != nil {
			return err
		}
	}
}

// watchState is the latest object, Machines and MachineSets seen.
type watchState struct {
	obj      client.Object
	machines map[string]clusterv1.Machine
	// sets is nil for a KubeadmControlPlane.
	sets map[string]clusterv1.MachineSet
}

// apply records one watch event; it returns false when the watch must be
// resumed (an error event), and an error when the object was deleted.
func (w *watchState) apply(ev watch.Event, object string) (bool, error) {
	switch ev.Type {
	case watch.Error:
		return false, nil
	case watch.Bookmark:
		return true, nil
	}
	deleted := ev.Type == watch.Deleted
	switch o := ev.Object.(type) {
	case *clusterv1.Machine:
		if deleted {
			delete(w.machines, o.Name)
		} else {
			w.machines[o.Name] = *o
		}
	case *clusterv1.MachineSet:
		if deleted {
			delete(w.sets, o.Name)
		} else {
			w.sets[o.Name] = *o
		}
	case client.Object:
		if deleted {
			return true, fmt.Errorf("%s was deleted while its rollout was watched", object)
		}
		w.obj = o
	}
	return true, nil
}

// lists returns the Machines and MachineSets as slices.
func (w *watchState) lists() ([]clusterv1.Machine, []clusterv1.MachineSet) {
	ms := make([]clusterv1.Machine, 0, len(w.machines))
	for _, m := range w.machines {
		ms = append(ms, m)
	}
	var sets []clusterv1.MachineSet
	for _, set := range w.sets {
		sets = append(sets, set)
	}
	return ms, sets
}

// fromVersion starts a watch at a list's resourceVersion.
func fromVersion(rv string) client.ListOption {
	return &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}}
}

// follow consumes the watches, recomputing the state on every event and
// at the tracker's deadlines (and, for the live view, redrawing the elapsed
// time every second). It returns done true with the verdict's error, or
// done false when a watch ended and must be resumed.
func (o *StatusOptions) follow(ctx context.Context, tr *StatusTracker, st *watchState, objEvents, machineEvents, setEvents <-chan watch.Event, p *statusPrinter) (bool, error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var tick <-chan time.Time
	if p.live != nil {
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		machines, sets := st.lists()
		now := time.Now()
		s, verdict := o.evaluate(st.obj, machines, sets)
		if verdict != nil {
			s.Phase = PhaseProgressing
			_ = p.print(s, now)
			return true, verdict
		}
		v := tr.Observe(s, now)
		s.Phase, s.Done = v.Phase, v.Phase == PhaseRolledOut
		if !s.Done || p.json || p.live != nil {
			if err := p.print(s, now); err != nil {
				return true, err
			}
		}
		switch v.Phase {
		case PhaseRolledOut:
			if !p.json {
				_, err := fmt.Fprintf(p.out, "%s successfully rolled out%s\n", s.Object, revisionSuffix(st.obj))
				return true, err
			}
			return true, nil
		case PhasePaused:
			return true, statusError{code: ExitPaused, msg: fmt.Sprintf("%s is paused (%s): it will not roll out until resumed", s.Object, s.Paused)}
		case PhaseStalled:
			return true, statusError{code: ExitStalled, msg: fmt.Sprintf("%s made no progress for %s (--progress-deadline)%s", s.Object, o.ProgressDeadline, blocking(s))}
		}
		if !v.Wake.IsZero() {
			timer.Reset(max(time.Until(v.Wake), time.Millisecond))
		}
		for redraw := false; !redraw; {
			var (
				ev watch.Event
				ok bool
			)
			select {
			case <-ctx.Done():
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					if p.json || p.live != nil {
						s.Phase = PhaseTimedOut
						_ = p.print(s, time.Now())
					}
					return true, statusError{code: ExitTimeout, msg: fmt.Sprintf("timed out waiting for %s to roll out (--timeout %s); last state: %s%s", s.Object, o.Timeout, s.Summary(), blocking(s))}
				}
				return true, ctx.Err()
			case now := <-tick:
				if err := p.live.tick(now); err != nil {
					return true, err
				}
				continue
			case <-timer.C:
				redraw = true
				continue
			case ev, ok = <-objEvents:
			case ev, ok = <-machineEvents:
			case ev, ok = <-setEvents:
			}
			if !ok {
				return false, nil
			}
			keep, err := st.apply(ev, s.Object)
			if err != nil || !keep {
				return err != nil, err
			}
			redraw = true
		}
	}
}

// notFound is the API's NotFound for name.
func notFound(kind Kind, name string) error {
	return apierrors.NewNotFound(kind.GroupResource(), name)
}

// revisionSuffix is " (revision N)" from the guard's or Cluster API's
// revision annotation, or "".
func revisionSuffix(obj client.Object) string {
	if r := revisionOf(obj); r != "" {
		return " (revision " + r + ")"
	}
	return ""
}

// revisionOf is the guard's revision annotation of obj, else Cluster API's,
// else "".
func revisionOf(obj client.Object) string {
	ann := obj.GetAnnotations()
	for _, k := range []string{revisions.AnnotationRevision, clusterv1.RevisionAnnotation} {
		if r := ann[k]; r != "" {
			return r
		}
	}
	return ""
}

// blocking lists the machines that hold a rollout back, one per line.
func blocking(s StatusReport) string {
	var b strings.Builder
	for _, m := range s.Machines {
		if m.Ready && m.UpToDate && !m.Deleting {
			continue
		}
		b.WriteString("\n  " + m.line())
	}
	if b.Len() == 0 {
		return ""
	}
	return "; blocked by:" + b.String()
}

// statusError is a verdict other than done, with its exit code.
type statusError struct {
	code int
	msg  string
}

// Error is the verdict's message.
func (e statusError) Error() string { return e.msg }

// ExitCode is the verdict's exit code.
func (e statusError) ExitCode() int { return e.code }

// MachineStatus is what `rollout status` reports about one Machine.
type MachineStatus struct {
	// Name is the Machine's name.
	Name string `json:"name"`
	// Phase is status.phase.
	Phase string `json:"phase"`
	// UpToDate reports the UpToDate condition is True.
	UpToDate bool `json:"upToDate"`
	// Ready reports the Ready condition is True.
	Ready bool `json:"ready"`
	// Deleting reports the Machine is being deleted.
	Deleting bool `json:"deleting"`
	// Reason and Message say why the Machine is not ready (its Ready
	// condition), or else not up to date (its UpToDate condition).
	Reason  string `json:"reason"`
	Message string `json:"message"`

	// old: the Machine is being deleted, or belongs to a MachineSet other
	// than its MachineDeployment's current one, or (control plane, or
	// MachineSets not known) its UpToDate condition is False (a new
	// Machine has no UpToDate condition for a while).
	old bool
	// machineSet is the MachineSet that owns a worker Machine.
	machineSet string
}

// line is the machine's line: "machine NAME: PHASE, not ready: Reason: message",
// or "machine NAME: PHASE, being deleted".
func (m MachineStatus) line() string {
	s := fmt.Sprintf("machine %s: %s", m.Name, m.Phase)
	if m.Deleting {
		return s + ", being deleted"
	}
	var what []string
	if !m.Ready {
		what = append(what, "not ready")
	}
	if !m.UpToDate {
		what = append(what, "not up to date")
	}
	if len(what) > 0 {
		s += ", " + strings.Join(what, ", ")
	}
	if why := strings.TrimPrefix(strings.TrimSuffix(m.Reason+": "+m.Message, ": "), ": "); why != "" {
		s += ": " + why
	}
	return s
}

// lineKey is what must change for the machine's line to be printed again:
// its line without the message, which Cluster API rewrites often.
func (m MachineStatus) lineKey() string {
	m.Message = ""
	return m.line()
}

// StatusReport is the state of one rollout at one moment; -o json prints it.
type StatusReport struct {
	// Time is when the state was read.
	Time time.Time `json:"time"`
	// Object is "machinedeployment/NAME" or "kubeadmcontrolplane/NAME".
	Object string `json:"object"`
	// Phase is one of the Phase constants.
	Phase string `json:"phase"`
	// Replicas is spec.replicas; UpToDate, Available and Ready are the
	// status counts.
	Replicas  int32 `json:"replicas"`
	UpToDate  int32 `json:"upToDate"`
	Available int32 `json:"available"`
	Ready     int32 `json:"ready"`
	// Machines are the object's Machines, by name.
	Machines []MachineStatus `json:"machines"`
	// Done is true once the rollout is declared done.
	Done bool `json:"done"`
	// Upgrade is, on the report of a ClusterClass cluster (object
	// "cluster/NAME"), where it stands against its spec.topology.version;
	// nil on every other report.
	Upgrade *UpgradeStatus `json:"upgrade,omitempty"`

	// Current is status.replicas.
	Current int32 `json:"-"`
	// Observed reports that observedGeneration caught up with generation.
	Observed bool `json:"-"`
	// Generation is metadata.generation.
	Generation int64 `json:"-"`
	// RollingOut reports the RollingOut condition is True.
	RollingOut bool `json:"-"`
	// Paused says how the object is paused, "" when it is not.
	Paused string `json:"-"`
	// Complete reports that every condition of a finished rollout holds on
	// this read (see Complete in the command's help).
	Complete bool `json:"-"`
	// Revision is the object's revision: rollout-guard's, else Cluster
	// API's MachineDeployment revision; "" when it has none.
	Revision string `json:"-"`
	// MachineSets are a MachineDeployment's MachineSets, the current one
	// first.
	MachineSets []MachineSetStatus `json:"-"`
	// WaitRevision is the --revision not live yet, 0 when none is awaited.
	WaitRevision int64 `json:"-"`
	// progress is what else must change for the rollout to count as
	// progressing: a cluster's objects and upgrade steps.
	progress string
	// deleting: the object is being deleted (a MachineDeployment of a
	// ClusterClass cluster that its topology no longer has).
	deleting bool
}

// EvaluateStatus computes the state of the rollout of obj (a
// MachineDeployment, MachinePool, KubeadmControlPlane or another provider's
// control plane) from it, its Machines and, for
// a MachineDeployment, its MachineSets.
func EvaluateStatus(obj client.Object, machines []clusterv1.Machine, machineSets []clusterv1.MachineSet) StatusReport {
	return evaluateStatus(obj, machines, machineSets, time.Now())
}

// scheduledRestartSkew is how far ahead of the local clock spec.rollout.after
// may be and still count as a restart asked now: `rollout restart` sets it
// to the local time, which the controllers' clock may not have reached yet.
// Further ahead, it is a restart scheduled for later, not part of this
// rollout.
const scheduledRestartSkew = time.Minute

// evaluateStatus is EvaluateStatus at the local time now.
func evaluateStatus(obj client.Object, machines []clusterv1.Machine, machineSets []clusterv1.MachineSet, now time.Time) StatusReport {
	kind := kindOf(obj)
	s := StatusReport{Object: kind.Singular() + "/" + obj.GetName(), Generation: obj.GetGeneration(), Paused: kind.pausedBy(obj), Revision: revisionOf(obj)}
	c := kind.counts(obj)
	s.Replicas = ptr.Deref(c.desired, 1)
	s.Current, s.UpToDate, s.Available, s.Ready = ptr.Deref(c.current, 0), ptr.Deref(c.upToDate, 0), ptr.Deref(c.available, 0), ptr.Deref(c.ready, 0)
	s.Observed = c.observed >= s.Generation
	s.RollingOut = apimeta.IsStatusConditionTrue(c.conditions, clusterv1.RollingOutCondition)
	// A MachineDeployment's status counts come from its MachineSets', which
	// come from the Machines' UpToDate conditions, written by another
	// controller: just after an edit they can all still describe the old
	// template. Which MachineSet is current, and which MachineSet owns each
	// Machine, are facts that cannot be stale that way.
	var sets *machineSetFacts
	if kind.machineSets != nil {
		f := evaluateMachineSets(obj.GetAnnotations()[clusterv1.RevisionAnnotation], s.Replicas, machineSets)
		sets, s.MachineSets = &f, f.sets
	}
	var rolloutAfter metav1.Time
	if t := kind.rolloutAfter(obj); !t.IsZero() {
		rolloutAfter = metav1.NewTime(t)
	}

	sorted := append([]clusterv1.Machine(nil), machines...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	allGood := true
	for i := range sorted {
		m := &sorted[i]
		readyC := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineReadyCondition)
		upC := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineUpToDateCondition)
		ms := MachineStatus{
			Name:     m.Name,
			Phase:    m.Status.Phase,
			Ready:    readyC != nil && readyC.Status == metav1.ConditionTrue,
			UpToDate: upC != nil && upC.Status == metav1.ConditionTrue,
			Deleting: !m.DeletionTimestamp.IsZero(),
		}
		ms.old = ms.Deleting || (upC != nil && upC.Status == metav1.ConditionFalse)
		if sets != nil && sets.newName != "" {
			ms.machineSet = ownerMachineSet(m)
			ms.old = ms.Deleting || ms.machineSet != sets.newName
		}
		// A machine created before spec.rollout.after (a restart) is to be
		// replaced, whatever its conditions say yet, and even while
		// rollout.after is still ahead of the controllers' clock (then no
		// controller has acted on it yet). Cluster API compares with
		// Before, so a machine of that very second is up to date.
		if !rolloutAfter.IsZero() && !rolloutAfter.After(now.Add(scheduledRestartSkew)) && m.CreationTimestamp.Before(&rolloutAfter) {
			ms.old = true
		}
		if ms.Phase == "" {
			ms.Phase = "Pending"
		}
		switch {
		case !ms.Ready && readyC != nil:
			ms.Reason, ms.Message = readyC.Reason, conditionLine(readyC.Message)
		case !ms.Ready:
			ms.Reason = "NoReadyCondition"
		case !ms.UpToDate && upC != nil:
			ms.Reason, ms.Message = upC.Reason, conditionLine(upC.Message)
		}
		if !ms.Ready || !ms.UpToDate || ms.Deleting || ms.old {
			allGood = false
		}
		s.Machines = append(s.Machines, ms)
	}
	if s.Machines == nil {
		s.Machines = []MachineStatus{}
	}
	// Most infrastructure providers run a MachinePool's instances without
	// Machines (MachinePool Machines are optional in Cluster API's
	// contract): then its status counts are all there is to go by.
	machinesCounted := int32(len(s.Machines)) == s.Replicas || kind.machinesOptional && len(s.Machines) == 0
	s.Complete = s.Observed && s.Current == s.Replicas && s.UpToDate == s.Replicas && s.Available == s.Replicas &&
		!s.RollingOut && allGood && machinesCounted && (sets == nil || sets.settled)
	return s
}

// conditionLine joins a multi-line condition message into one line.
func conditionLine(msg string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(msg), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(l)
	}
	return b.String()
}

// Summary is the state on one line, without the object's name, e.g. "1 of
// 3 machines up to date, 2 available (2 old machines pending deletion)".
func (s StatusReport) Summary() string {
	if s.Paused != "" {
		return "paused (" + s.Paused + ")"
	}
	if s.Upgrade != nil {
		return s.Upgrade.Summary()
	}
	if s.WaitRevision > 0 {
		return fmt.Sprintf("waiting for revision %d (revision %s is live)", s.WaitRevision, s.Revision)
	}
	if !s.Observed {
		return fmt.Sprintf("waiting for generation %d to be observed", s.Generation)
	}
	line := fmt.Sprintf("%d of %d machines up to date, %d available", s.UpToDate, s.Replicas, s.Available)
	old := 0
	for _, m := range s.Machines {
		if m.old {
			old++
		}
	}
	var extra []string
	if old > 0 {
		extra = append(extra, fmt.Sprintf("%d old %s pending deletion", old, plural(old, "machine", "machines")))
	}
	if n := len(s.Machines); n != int(s.Replicas) {
		extra = append(extra, fmt.Sprintf("%d %s", n, plural(n, "machine exists", "machines exist")))
	}
	if s.deleting {
		extra = append(extra, "being deleted")
	}
	if s.Complete && s.Phase == PhaseConfirming {
		extra = append(extra, "complete, confirming")
	} else if !s.Complete && s.RollingOut {
		extra = append(extra, "rolling out")
	}
	if len(extra) > 0 {
		line += " (" + strings.Join(extra, ", ") + ")"
	}
	return line
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// StatusVerdict is what a StatusTracker concludes from a state.
type StatusVerdict struct {
	// Phase is Progressing, Confirming, RolledOut, Paused or Stalled.
	Phase string
	// Wake is when the verdict may change without a new event (the end
	// of the grace period or of the progress deadline); zero for a final
	// verdict.
	Wake time.Time
}

// StatusTracker turns successive states of one rollout into a verdict: done
// only when a complete state held for Grace; stalled when the state did not
// change for ProgressDeadline; paused at once.
type StatusTracker struct {
	// Grace is how long a complete state must hold.
	Grace time.Duration
	// ProgressDeadline is how long the state may stay the same.
	ProgressDeadline time.Duration

	completeSince time.Time
	lastProgress  time.Time
	lastKey       string
}

// Observe records the state s read at now and returns the verdict.
func (t *StatusTracker) Observe(s StatusReport, now time.Time) StatusVerdict {
	if s.Paused != "" {
		return StatusVerdict{Phase: PhasePaused}
	}
	if key := progressKey(s); key != t.lastKey || t.lastProgress.IsZero() {
		t.lastKey, t.lastProgress = key, now
	}
	if !s.Complete {
		t.completeSince = time.Time{}
		stall := t.lastProgress.Add(t.ProgressDeadline)
		if !now.Before(stall) {
			return StatusVerdict{Phase: PhaseStalled}
		}
		return StatusVerdict{Phase: PhaseProgressing, Wake: stall}
	}
	if t.completeSince.IsZero() {
		t.completeSince = now
	}
	if end := t.completeSince.Add(t.Grace); now.Before(end) {
		return StatusVerdict{Phase: PhaseConfirming, Wake: end}
	}
	return StatusVerdict{Phase: PhaseRolledOut}
}

// progressKey is what must change for a rollout to count as progressing:
// the counts and each machine's phase and conditions.
func progressKey(s StatusReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%t %d %d %d %d %d %d %s %t|", s.Observed, s.Generation, s.Current, s.UpToDate, s.Available, s.Ready, len(s.Machines), s.Revision, s.deleting)
	for _, ms := range s.MachineSets {
		fmt.Fprintf(&b, "%s %t %d %d %d %d;", ms.Name, ms.New, ms.Replicas, ms.Current, ms.UpToDate, ms.Available)
	}
	for _, m := range s.Machines {
		fmt.Fprintf(&b, "%s %s %t %t %t %s;", m.Name, m.Phase, m.Ready, m.UpToDate, m.Deleting, m.Reason)
	}
	b.WriteString(s.progress)
	return b.String()
}

// statusPrinter prints the states of rollouts, each line only when it
// changed.
type statusPrinter struct {
	out  io.Writer
	json bool
	// last is the last line printed per key (the object's summary, each
	// machine), so that no line is printed twice in a row.
	last map[string]string
	// live, when set, redraws the live view instead of printing lines.
	live *liveTerminal
}

// printCluster writes what changed in a ClusterClass cluster's report: the
// cluster's line or event, then its objects'.
func (p *statusPrinter) printCluster(r ClusterReport, now time.Time) error {
	if p.live != nil {
		return p.live.showCluster(r, now)
	}
	for _, s := range append([]StatusReport{r.Cluster}, r.Objects...) {
		if err := p.print(s, now); err != nil {
			return err
		}
	}
	return nil
}

// print writes what changed in s.
func (p *statusPrinter) print(s StatusReport, now time.Time) error {
	if p.live != nil {
		return p.live.show(s, now)
	}
	if p.json {
		s.Time = time.Time{}
		key, err := json.Marshal(s)
		if err != nil {
			return err
		}
		if p.last[s.Object] == string(key) {
			return nil
		}
		p.last[s.Object] = string(key)
		s.Time = now.UTC().Truncate(time.Millisecond)
		data, err := json.Marshal(s)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.out, "%s\n", data)
		return err
	}
	var lines []string
	if line := s.Object + ": " + s.Summary(); p.last[s.Object] != line {
		p.last[s.Object] = line
		lines = append(lines, line)
	}
	for _, m := range s.Machines {
		k := s.Object + " " + m.Name
		key, line := "", ""
		if !m.Ready {
			key, line = m.lineKey(), "  "+m.line()
		}
		if p.last[k] != key {
			p.last[k] = key
			if line != "" {
				lines = append(lines, line)
			}
		}
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(p.out, l); err != nil {
			return err
		}
	}
	return nil
}
