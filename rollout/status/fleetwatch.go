package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// A fleet is watched as one: the Clusters it selects (in the namespace, or
// in every namespace) and every KubeadmControlPlane, MachineDeployment,
// MachineSet, Machine and MachinePool labelled with a cluster's name, one
// list and one watch per kind whatever the number of clusters, partitioned
// by the label cluster.x-k8s.io/cluster-name and evaluated cluster by
// cluster as status cluster/NAME evaluates one.

// fleetTarget is what a fleet's status watches.
type fleetTarget struct {
	// class is the ClusterClass whose clusters are watched (clusterclass/NAME);
	// nil for the clusters a selector or -A selects.
	class *core.Ref
}

// The sources of the fleet's watcher (fleetWatcher).
const (
	fleetClusters = iota
	fleetControlPlanes
	fleetMachineDeployments
	fleetMachines
	fleetMachineSets
	// fleetMachinePools is the last source, and only there when the
	// management cluster serves MachinePools.
	fleetMachinePools
)

// fleetScope is what selects a fleet's clusters.
type fleetScope struct {
	// name is the fleet in messages: "clusterclass/NAME", "cluster -l
	// SELECTOR", "cluster -A".
	name string
	// namespace is where the clusters are, "" for every namespace.
	namespace string
	// selector is -l (everything when not given).
	selector labels.Selector
	// classNamespace and className are the ClusterClass's, "" when the
	// fleet is not a class's.
	classNamespace, className string
}

// member reports whether cluster belongs to the fleet: selected by -l and,
// for a class's fleet, a cluster of the class (spec.topology.classRef,
// whose namespace defaults to the Cluster's).
func (f fleetScope) member(o client.Object) bool {
	cluster, ok := o.(*clusterv1.Cluster)
	if !ok || !f.selector.Matches(labels.Set(cluster.Labels)) {
		return false
	}
	if f.className == "" {
		return true
	}
	ref := cluster.Spec.Topology.ClassRef
	ns := ref.Namespace
	if ns == "" {
		ns = cluster.Namespace
	}
	return cluster.Spec.Topology.IsDefined() && ref.Name == f.className && ns == f.classNamespace
}

// fleetScope reads the fleet's scope from the command line.
func (o *StatusOptions) fleetScope(cl *core.Clients) (fleetScope, error) {
	f := fleetScope{namespace: cl.Namespace, selector: labels.Everything()}
	if o.AllNamespaces {
		f.namespace = ""
	}
	if o.Selector != "" {
		sel, err := labels.Parse(o.Selector)
		if err != nil {
			return f, fmt.Errorf("-l %q is not a label selector (%v): write e.g. -l env=prod or -l 'tier in (a,b)'", o.Selector, err)
		}
		f.selector = sel
	}
	switch {
	case o.fleet.class != nil:
		f.name, f.classNamespace, f.className = o.fleet.class.String(), cl.Namespace, o.fleet.class.Name
	case o.Selector != "":
		f.name = "cluster -l " + o.Selector
	default:
		f.name = "cluster"
	}
	if o.AllNamespaces {
		f.name += " -A"
	}
	return f, nil
}

// fleetWatcher reads the fleet's Clusters and the objects labelled with a
// cluster's name, its MachinePools too when pools.
func (o *StatusOptions) fleetWatcher(cl *core.Clients, f fleetScope, pools bool) *watcher {
	return newFleetWatcher(cl, f, pools, o.Session.IOStreams.ErrOut)
}

// newFleetWatcher is a watcher of f's Clusters and of the objects labelled
// with a cluster's name, its MachinePools too when pools; a lost API server
// is noted on notes.
func newFleetWatcher(cl *core.Clients, f fleetScope, pools bool, notes io.Writer) *watcher {
	ns := f.namespace
	inCluster := client.HasLabels{clusterv1.ClusterNameLabel}
	withLabel := func(kind string, kindOf core.Kind, example client.Object) watchSource {
		return watchSource{kind: kind, GR: kindOf.GroupResource(), example: example, newList: kindOf.NewList,
			opts: []client.ListOption{client.InNamespace(ns), inCluster},
			keep: func(o client.Object) bool { return o.GetLabels()[clusterv1.ClusterNameLabel] != "" }}
	}
	sources := []watchSource{
		fleetClusters: {kind: "Cluster", GR: core.Cluster.GroupResource(), example: &clusterv1.Cluster{}, newList: core.Cluster.NewList,
			opts: []client.ListOption{client.InNamespace(ns), client.MatchingLabelsSelector{Selector: f.selector}},
			keep: f.member},
		fleetControlPlanes:      withLabel("KubeadmControlPlane", core.KubeadmControlPlane, &controlplanev1.KubeadmControlPlane{}),
		fleetMachineDeployments: withLabel("MachineDeployment", core.MachineDeployment, &clusterv1.MachineDeployment{}),
		fleetMachines: {kind: "Machine", GR: clusterv1.GroupVersion.WithResource("machines").GroupResource(), example: &clusterv1.Machine{},
			newList: func() client.ObjectList { return &clusterv1.MachineList{} }, opts: []client.ListOption{client.InNamespace(ns), inCluster},
			keep: func(o client.Object) bool { return o.GetLabels()[clusterv1.ClusterNameLabel] != "" }},
		fleetMachineSets: {kind: "MachineSet", GR: clusterv1.GroupVersion.WithResource("machinesets").GroupResource(), example: &clusterv1.MachineSet{},
			newList: func() client.ObjectList { return &clusterv1.MachineSetList{} }, opts: []client.ListOption{client.InNamespace(ns), inCluster},
			keep: func(o client.Object) bool { return o.GetLabels()[clusterv1.ClusterNameLabel] != "" }},
	}
	if pools {
		sources = append(sources, withLabel("MachinePool", core.MachinePool, &clusterv1.MachinePool{}))
	}
	return newWatcher(cl.Client, ns, "status "+f.name, notes, sources)
}

// fleetMembers partitions what w holds by cluster: each Cluster of the
// fleet with the objects labelled with its name, by namespace and name. A
// Cluster whose control plane is not a KubeadmControlPlane cannot be
// watched.
func fleetMembers(w *watcher) ([]FleetMember, error) {
	type key struct{ ns, name string }
	objs := map[key]*TopologyObjects{}
	cps := map[key][]*controlplanev1.KubeadmControlPlane{}
	var members []FleetMember
	clusters := typed[clusterv1.Cluster](w.of(fleetClusters))
	for i := range clusters {
		c := &clusters[i]
		if ref := c.Spec.ControlPlaneRef; ref.IsDefined() && (ref.Kind != core.KubeadmControlPlane.GVK.Kind || ref.APIGroup != core.KubeadmControlPlane.GVK.Group) {
			return nil, fmt.Errorf("cannot watch Cluster %s/%s: its control plane (spec.controlPlaneRef) is a %s.%s; status watches KubeadmControlPlanes only: leave the cluster out with -l", c.Namespace, c.Name, ref.Kind, ref.APIGroup)
		}
		objs[key{c.Namespace, c.Name}] = &TopologyObjects{}
		members = append(members, FleetMember{Cluster: c})
	}
	clusterOf := func(o client.Object) key { return key{o.GetNamespace(), o.GetLabels()[clusterv1.ClusterNameLabel]} }
	for _, cp := range typed[controlplanev1.KubeadmControlPlane](w.of(fleetControlPlanes)) {
		if k := clusterOf(&cp); objs[k] != nil {
			cp := cp
			cps[k] = append(cps[k], &cp)
		}
	}
	for _, md := range typed[clusterv1.MachineDeployment](w.of(fleetMachineDeployments)) {
		if t := objs[clusterOf(&md)]; t != nil {
			t.MachineDeployments = append(t.MachineDeployments, md)
		}
	}
	for _, m := range typed[clusterv1.Machine](w.of(fleetMachines)) {
		if t := objs[clusterOf(&m)]; t != nil {
			t.Machines = append(t.Machines, m)
		}
	}
	for _, ms := range typed[clusterv1.MachineSet](w.of(fleetMachineSets)) {
		if t := objs[clusterOf(&ms)]; t != nil {
			t.MachineSets = append(t.MachineSets, ms)
		}
	}
	if w.has(fleetMachinePools) {
		for _, mp := range typed[clusterv1.MachinePool](w.of(fleetMachinePools)) {
			if t := objs[clusterOf(&mp)]; t != nil {
				t.MachinePools = append(t.MachinePools, mp)
			}
		}
	}
	for i := range members {
		c := members[i].Cluster
		k := key{c.Namespace, c.Name}
		objs[k].ControlPlane = controlPlaneOf(c, cps[k])
		members[i].Objects = *objs[k]
	}
	return members, nil
}

// controlPlaneOf is the cluster's control plane among the control planes
// labelled with its name: the one spec.controlPlaneRef names, or the only
// one when it names none yet.
func controlPlaneOf(cluster *clusterv1.Cluster, cps []*controlplanev1.KubeadmControlPlane) *controlplanev1.KubeadmControlPlane {
	ref := cluster.Spec.ControlPlaneRef
	for _, cp := range cps {
		if (ref.IsDefined() && cp.Name == ref.Name) || (!ref.IsDefined() && len(cps) == 1) {
			return cp
		}
	}
	return nil
}

// runFleet reports on a fleet: once (--watch=false), or watching it until
// every cluster has its verdict.
func (o *StatusOptions) runFleet(ctx context.Context, cl *core.Clients) error {
	f, err := o.fleetScope(cl)
	if err != nil {
		return err
	}
	if ref := o.fleet.class; ref != nil {
		// The class must exist: a misspelt name is an error, not an
		// empty fleet.
		if _, err := o.Session.Get(ctx, cl, *ref, "status "+ref.String()); err != nil {
			return o.timedOut(ctx, err)
		}
	}
	// A management cluster that serves no MachinePools has none to watch.
	_, pools, err := core.ListMachinePools(ctx, cl, f.namespace, "status "+f.name, client.Limit(1))
	if err != nil {
		return o.timedOut(ctx, err)
	}
	w := o.fleetWatcher(cl, f, pools)
	p := &fleetPrinter{out: o.Session.IOStreams.Out, json: strings.EqualFold(o.Output, "json"), last: map[string]string{}}
	if !p.json && o.Watch {
		p.live = NewLiveTerminal(o.Session.IOStreams.Out, time.Now())
	}
	if !o.Watch {
		if err := w.list(ctx); err != nil {
			return o.timedOut(ctx, err)
		}
		return o.reportFleet(w, f, p)
	}
	return o.followFleet(ctx, w, f, p)
}

// noClusters is the error of a fleet without clusters.
func (o *StatusOptions) noClusters(f fleetScope) error {
	where := "namespace " + f.namespace
	if f.namespace == "" {
		where = "any namespace"
	}
	what := "no Cluster in " + where
	if f.className != "" {
		what += fmt.Sprintf(" uses ClusterClass %s/%s (spec.topology.classRef)", f.classNamespace, f.className)
	}
	if o.Selector != "" {
		what += " matching -l " + o.Selector
	}
	hint := "check -n and -l, or look in every namespace with -A"
	if f.namespace == "" {
		hint = "check -l and the clusters' labels (kubectl get clusters -A --show-labels)"
	}
	return fmt.Errorf("%s: nothing to watch; %s", what, hint)
}

// reportFleet prints the fleet once (--watch=false): exit 0 when every
// cluster is rolled out on that read, ExitNotRolledOut otherwise.
func (o *StatusOptions) reportFleet(w *watcher, f fleetScope, p *fleetPrinter) error {
	members, err := fleetMembers(w)
	if err != nil {
		return err
	}
	if len(members) == 0 {
		return o.noClusters(f)
	}
	now := time.Now()
	var clusters []FleetCluster
	for _, m := range members {
		r := EvaluateFleetMember(m, now)
		verdict := StatusVerdict{Phase: PhaseProgressing}
		if r.Cluster.Complete {
			verdict.Phase = PhaseRolledOut
		}
		clusters = append(clusters, FleetStateOf(m.Cluster, r, verdict, o.ProgressDeadline))
	}
	r := GroupFleet(f.name, o.AllNamespaces, clusters)
	if err := p.printOnce(r, now); err != nil {
		return err
	}
	if r.Totals.UpToDate != r.Totals.Clusters {
		return core.StatusError{Code: ExitNotRolledOut, Verdict: true, Msg: fmt.Sprintf("%s is not rolled out: %s", f.name, r.Totals)}
	}
	return nil
}

// followFleet watches the fleet until every cluster has its verdict: each
// cluster is judged by a StatusTracker of its own (the grace period, the
// progress deadline), as status cluster/NAME judges one.
//
// Rolled out is confirmed by one more read before it is declared: the
// watches of the kinds deliver apart, so the topology controller's
// TopologyReconciled condition, written after the objects it patched, can
// arrive before the patched objects do. The read lists the Clusters
// first, then their objects: what it shows of the objects is no older
// than what it shows of the Clusters.
func (o *StatusOptions) followFleet(ctx context.Context, w *watcher, f fleetScope, p *fleetPrinter) error {
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	w.run(watchCtx)
	trackers := map[string]*StatusTracker{}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var tick <-chan time.Time
	if p.live != nil {
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		tick = ticker.C
	}
	var last *FleetReport
	for {
		if w.allSynced() {
			members, err := fleetMembers(w)
			if err != nil {
				return err
			}
			if len(members) == 0 {
				return o.noClusters(f)
			}
			now := time.Now()
			var clusters []FleetCluster
			var wake time.Time
			for _, m := range members {
				k := objectKey(m.Cluster)
				tr := trackers[k]
				if tr == nil {
					tr = &StatusTracker{Grace: o.Grace, ProgressDeadline: o.ProgressDeadline}
					trackers[k] = tr
				}
				r := EvaluateFleetMember(m, now)
				verdict := tr.Observe(r.Cluster, now)
				if !verdict.Wake.IsZero() && (wake.IsZero() || verdict.Wake.Before(wake)) {
					wake = verdict.Wake
				}
				clusters = append(clusters, FleetStateOf(m.Cluster, r, verdict, o.ProgressDeadline))
			}
			r := GroupFleet(f.name, o.AllNamespaces, clusters)
			last = &r
			final := r.Final()
			if final && r.Worst() == v1alpha1.ClusterUpToDate {
				// Not confirmed: the watches are catching up, and
				// deliver what the read saw.
				if final, err = o.confirmFleet(ctx, w, f); err != nil {
					return o.endFleetWatch(ctx, err, last, p)
				}
			}
			if final {
				if err := p.printFinal(r, now); err != nil {
					return err
				}
				if err := fleetVerdict(r, o.ProgressDeadline); err != nil || p.json {
					return err
				}
				_, err := fmt.Fprintf(p.out, "%s: %d %s successfully rolled out\n", r.Fleet, r.Totals.Clusters, core.Plural(r.Totals.Clusters, "cluster", "clusters"))
				return err
			}
			if err := p.print(r, now); err != nil {
				return err
			}
			if !wake.IsZero() {
				timer.Reset(max(time.Until(wake), time.Millisecond))
			}
		}
		if err := o.await(ctx, w, tick, timer.C, p.ticker()); err != nil {
			return o.endFleetWatch(ctx, err, last, p)
		}
	}
}

// confirmFleet reads the fleet of w once more, with a watcher of its own,
// and reports whether every cluster is rolled out on that read.
func (o *StatusOptions) confirmFleet(ctx context.Context, w *watcher, f fleetScope) (bool, error) {
	complete, err := readComplete(ctx, w)
	if err != nil || len(complete) == 0 {
		return false, err
	}
	for _, done := range complete {
		if !done {
			return false, nil
		}
	}
	return true, nil
}

// readComplete lists w's sources afresh, with a watcher of its own, and
// reports of each cluster, by "NAMESPACE/NAME", whether it is rolled out
// on that read: the watches of the kinds deliver apart, and a Cluster's
// condition can arrive before the objects its controller patched.
func readComplete(ctx context.Context, w *watcher) (map[string]bool, error) {
	fresh := newWatcher(w.cl, w.namespace, w.purpose, w.notes, w.sources)
	if err := fresh.list(ctx); err != nil {
		return nil, err
	}
	members, err := fleetMembers(fresh)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	complete := make(map[string]bool, len(members))
	for _, m := range members {
		complete[objectKey(m.Cluster)] = EvaluateFleetMember(m, now).Cluster.Complete
	}
	return complete, nil
}

// endFleetWatch is the verdict of a fleet's watch that ended with err
// before every cluster had its verdict: the --timeout, with the last view
// when there is one, or the failure.
func (o *StatusOptions) endFleetWatch(ctx context.Context, err error, last *FleetReport, p *fleetPrinter) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || last == nil {
		return o.timedOut(ctx, err)
	}
	_ = p.printFinal(*last, time.Now())
	return core.StatusError{Code: ExitTimeout, Msg: fmt.Sprintf("timed out waiting for %s to roll out (--timeout %s); last state: %s", last.Fleet, o.Timeout, last.Totals)}
}

// fleetVerdict is the verdict of a fleet whose every cluster has its own:
// the worst state decides (refused, then stalled, then paused); nil when
// every cluster is up to date.
func fleetVerdict(r FleetReport, deadline time.Duration) error {
	worst := r.Worst()
	var names []string
	for _, c := range r.Clusters {
		if c.State == worst {
			names = append(names, r.DisplayName(c))
		}
	}
	n := fmt.Sprintf("%d of %d %s", len(names), r.Totals.Clusters, core.Plural(r.Totals.Clusters, "cluster", "clusters"))
	switch worst {
	case v1alpha1.ClusterRefused:
		return core.StatusError{Code: core.ExitRefused, Msg: fmt.Sprintf("%s: %s refused: the topology controller's write was refused by admission (%s); the topology controller retries the same write, so change the ClusterClass or the Cluster's topology so that it is admitted (the Cluster's TopologyReconciled condition has the whole refusal)",
			r.Fleet, n, strings.Join(names, ", "))}
	case v1alpha1.ClusterStalled:
		return core.StatusError{Code: ExitStalled, Msg: fmt.Sprintf("%s: %s made no progress for %s (--progress-deadline): %s; rollout status cluster/NAME lists the machines that hold each back",
			r.Fleet, n, deadline, strings.Join(names, ", "))}
	case v1alpha1.ClusterPaused:
		return core.StatusError{Code: ExitPaused, Msg: fmt.Sprintf("%s: %s paused (%s): they will not roll out until resumed (rollout resume cluster/NAME, or the paused object)",
			r.Fleet, n, strings.Join(names, ", "))}
	}
	return nil
}

// fleetPrinter prints a fleet's states: a line per cluster whose state
// changed, one JSON object per change with -o json, or on a terminal the
// grouped view redrawn in place; and the grouped view (or the totals as
// JSON) once at the end.
type fleetPrinter struct {
	out  io.Writer
	json bool
	// last is the last line or JSON key printed per cluster, and the
	// totals' under "".
	last map[string]string
	live *LiveTerminal
}

// ticker is the printer whose live view the elapsed time redraws.
func (p *fleetPrinter) ticker() *StatusPrinter { return &StatusPrinter{live: p.live} }

// print writes what changed in r.
func (p *fleetPrinter) print(r FleetReport, now time.Time) error {
	if p.live != nil {
		return p.live.showFrame(r.Fleet, func(elapsed time.Duration, width, height int) []string {
			return RenderFleet(r, fmt.Sprintf("%s  elapsed %s", r.Fleet, elapsed.Truncate(time.Second)), width, height)
		}, now)
	}
	var lines []string
	for _, c := range r.Clusters {
		k := c.Namespace + "/" + c.Name
		if p.json {
			s := ClusterStatusOf(c, time.Time{})
			key, err := json.Marshal(s)
			if err != nil {
				return err
			}
			if p.last[k] == string(key) {
				continue
			}
			p.last[k] = string(key)
			data, err := json.Marshal(ClusterStatusOf(c, now))
			if err != nil {
				return err
			}
			lines = append(lines, string(data))
			continue
		}
		if line := r.FleetLine(c); p.last[k] != line {
			p.last[k] = line
			lines = append(lines, line)
		}
	}
	if !p.json && len(lines) > 0 {
		if totals := r.Fleet + ": " + r.Totals.String(); p.last[""] != totals {
			p.last[""] = totals
			lines = append(lines, totals)
		}
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(p.out, l); err != nil {
			return err
		}
	}
	return nil
}

// printOnce writes the one read of --watch=false: the grouped view, or
// with -o json each cluster and the totals.
func (p *fleetPrinter) printOnce(r FleetReport, now time.Time) error {
	if p.json {
		return p.printFinal(r, now)
	}
	return p.grouped(r)
}

// printFinal writes the last state: what changed, then the grouped view
// (without a terminal), or the totals (-o json).
func (p *fleetPrinter) printFinal(r FleetReport, now time.Time) error {
	if err := p.print(r, now); err != nil {
		return err
	}
	switch {
	case p.live != nil:
		return nil
	case p.json:
		data, err := json.Marshal(FleetStatusOf(r, now))
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.out, "%s\n", data)
		return err
	}
	if _, err := fmt.Fprintln(p.out); err != nil {
		return err
	}
	return p.grouped(r)
}

// grouped writes the grouped view, whole.
func (p *fleetPrinter) grouped(r FleetReport) error {
	for _, l := range RenderFleet(r, "", 0, 0) {
		if _, err := fmt.Fprintln(p.out, l); err != nil {
			return err
		}
	}
	return nil
}
