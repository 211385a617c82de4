package rollout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A ClusterClass cluster is watched as a whole: its Cluster (for
// spec.topology.version and the upgrade plans), its KubeadmControlPlane, its
// MachineDeployments, Machines and MachineSets (all labelled with the
// cluster's name), with one list and one watch each. During a chained
// upgrade the topology controller moves the control plane and the workers
// from step to step, so no object can be watched to its end apart.

// clusterSource is one kind status lists and watches for a ClusterClass
// cluster.
type clusterSource struct {
	kind    string
	gr      schema.GroupResource
	newList func() client.ObjectList
	opts    []client.ListOption
}

// topologySources are the lists and watches of Cluster NAME in ns.
func topologySources(ns, name string) []clusterSource {
	byCluster := client.MatchingLabels{clusterv1.ClusterNameLabel: name}
	core := func(resource string) schema.GroupResource {
		return clusterv1.GroupVersion.WithResource(resource).GroupResource()
	}
	return []clusterSource{
		{"Cluster", Cluster.GroupResource(), func() client.ObjectList { return &clusterv1.ClusterList{} },
			[]client.ListOption{client.InNamespace(ns), client.MatchingFields{"metadata.name": name}}},
		{"KubeadmControlPlane", KubeadmControlPlane.GroupResource(), func() client.ObjectList { return &controlplanev1.KubeadmControlPlaneList{} },
			[]client.ListOption{client.InNamespace(ns), byCluster}},
		{"MachineDeployment", MachineDeployment.GroupResource(), func() client.ObjectList { return &clusterv1.MachineDeploymentList{} },
			[]client.ListOption{client.InNamespace(ns), byCluster}},
		{"Machine", core("machines"), func() client.ObjectList { return &clusterv1.MachineList{} },
			[]client.ListOption{client.InNamespace(ns), byCluster}},
		{"MachineSet", core("machinesets"), func() client.ObjectList { return &clusterv1.MachineSetList{} },
			[]client.ListOption{client.InNamespace(ns), byCluster}},
	}
}

// clusterState is the latest Cluster and objects of a ClusterClass cluster
// seen.
type clusterState struct {
	name     string
	cluster  *clusterv1.Cluster
	cps      map[string]controlplanev1.KubeadmControlPlane
	mds      map[string]clusterv1.MachineDeployment
	machines map[string]clusterv1.Machine
	sets     map[string]clusterv1.MachineSet
}

func newClusterState(name string) *clusterState {
	return &clusterState{
		name:     name,
		cps:      map[string]controlplanev1.KubeadmControlPlane{},
		mds:      map[string]clusterv1.MachineDeployment{},
		machines: map[string]clusterv1.Machine{},
		sets:     map[string]clusterv1.MachineSet{},
	}
}

// put records one object (deleted: forgets it). Objects of other clusters
// are ignored, whatever the watch delivered.
func (w *clusterState) put(obj any, deleted bool) error {
	if o, ok := obj.(*clusterv1.Cluster); ok {
		if o.Name != w.name {
			return nil
		}
		if deleted {
			return fmt.Errorf("cluster/%s was deleted while its rollout was watched", w.name)
		}
		w.cluster = o
		return nil
	}
	o, ok := obj.(client.Object)
	if !ok || o.GetLabels()[clusterv1.ClusterNameLabel] != w.name {
		return nil
	}
	name := o.GetName()
	switch o := o.(type) {
	case *controlplanev1.KubeadmControlPlane:
		putOrDelete(w.cps, name, o, deleted)
	case *clusterv1.MachineDeployment:
		putOrDelete(w.mds, name, o, deleted)
	case *clusterv1.Machine:
		putOrDelete(w.machines, name, o, deleted)
	case *clusterv1.MachineSet:
		putOrDelete(w.sets, name, o, deleted)
	}
	return nil
}

func putOrDelete[T any](m map[string]T, name string, obj *T, deleted bool) {
	if deleted {
		delete(m, name)
		return
	}
	m[name] = *obj
}

// apply records one watch event; it returns false when the watches must be
// resumed (an error event, or a watch that ended), and an error when the
// Cluster was deleted.
func (w *clusterState) apply(ev watch.Event) (bool, error) {
	switch ev.Type {
	case watch.Error:
		return false, nil
	case watch.Bookmark:
		return true, nil
	}
	return true, w.put(ev.Object, ev.Type == watch.Deleted)
}

// report evaluates the state at now.
func (w *clusterState) report(now time.Time) ClusterReport {
	var cp *controlplanev1.KubeadmControlPlane
	ref := w.cluster.Spec.ControlPlaneRef
	for name, kcp := range w.cps {
		if (ref.IsDefined() && name == ref.Name) || (!ref.IsDefined() && len(w.cps) == 1) {
			cp = &kcp
		}
	}
	mds := make([]clusterv1.MachineDeployment, 0, len(w.mds))
	for _, md := range w.mds {
		mds = append(mds, md)
	}
	machines := make([]clusterv1.Machine, 0, len(w.machines))
	for _, m := range w.machines {
		machines = append(machines, m)
	}
	sets := make([]clusterv1.MachineSet, 0, len(w.sets))
	for _, s := range w.sets {
		sets = append(sets, s)
	}
	return evaluateTopology(w.cluster, cp, mds, machines, sets, now)
}

// runTopology reports on a ClusterClass cluster: once (--watch=false), or
// watching it until a verdict.
func (o *StatusOptions) runTopology(ctx context.Context, cl *clients, cluster *clusterv1.Cluster, p *statusPrinter) error {
	purpose := "status " + describe(cluster, Cluster)
	if ref := cluster.Spec.ControlPlaneRef; ref.IsDefined() && (ref.Kind != KubeadmControlPlane.GVK.Kind || ref.APIGroup != KubeadmControlPlane.GVK.Group) {
		return fmt.Errorf("cannot watch Cluster %s/%s: its control plane is a %s.%s; status watches KubeadmControlPlanes only", cluster.Namespace, cluster.Name, ref.Kind, ref.APIGroup)
	}
	if !o.Watch {
		st := newClusterState(cluster.Name)
		for _, src := range topologySources(cluster.Namespace, cluster.Name) {
			if _, err := listInto(ctx, cl.client, src, st); err != nil {
				return o.timedOut(ctx, call{verb: "list", gr: src.gr, kind: src.kind, namespace: cluster.Namespace, purpose: purpose}.explain(err))
			}
		}
		if st.cluster == nil {
			st.cluster = cluster
		}
		r := st.report(time.Now())
		phase := PhaseProgressing
		switch {
		case r.Cluster.Paused != "":
			phase = PhasePaused
		case r.Cluster.Complete:
			phase = PhaseRolledOut
		}
		r.setPhase(phase, phase == PhaseRolledOut)
		if err := p.printCluster(r, time.Now()); err != nil {
			return err
		}
		if phase != PhaseRolledOut {
			return statusError{code: ExitError, msg: fmt.Sprintf("%s is not rolled out: %s", r.Cluster.Object, r.Cluster.Summary())}
		}
		return nil
	}
	ww, err := o.watchClient(cl)
	if err != nil {
		return err
	}
	return o.watchTopology(ctx, ww, cluster, p)
}

// listInto lists one source into st and returns the list's resourceVersion.
func listInto(ctx context.Context, r client.Reader, src clusterSource, st *clusterState) (string, error) {
	list := src.newList()
	if err := r.List(ctx, list, src.opts...); err != nil {
		return "", err
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return "", err
	}
	for _, item := range items {
		if err := st.put(item, false); err != nil {
			return "", err
		}
	}
	return list.(metav1.ListInterface).GetResourceVersion(), nil
}

// watchTopology lists and watches a ClusterClass cluster until a verdict. A
// watch that ends is resumed by listing and watching everything again; the
// tracker (and so the verdict) carries over.
func (o *StatusOptions) watchTopology(ctx context.Context, ww client.WithWatch, cluster *clusterv1.Cluster, p *statusPrinter) error {
	purpose := "status " + describe(cluster, Cluster)
	tr := &StatusTracker{Grace: o.Grace, ProgressDeadline: o.ProgressDeadline}
	sources := topologySources(cluster.Namespace, cluster.Name)
	for {
		st := newClusterState(cluster.Name)
		var watchers []watch.Interface
		stopAll := func() {
			for _, w := range watchers {
				w.Stop()
			}
		}
		var (
			failed     error
			failedCall call
		)
		for _, src := range sources {
			failedCall = call{verb: "list", gr: src.gr, kind: src.kind, namespace: cluster.Namespace, purpose: purpose}
			rv, err := listInto(ctx, ww, src, st)
			if err != nil {
				failed = err
				break
			}
			failedCall.verb = "watch"
			w, err := ww.Watch(ctx, src.newList(), append(append([]client.ListOption(nil), src.opts...), fromVersion(rv))...)
			if err != nil {
				failed = err
				break
			}
			watchers = append(watchers, w)
		}
		if failed != nil {
			stopAll()
			if o.waitTransient(ctx, failed) {
				continue
			}
			return o.timedOut(ctx, failedCall.explain(failed))
		}
		if st.cluster == nil {
			stopAll()
			return call{verb: "get", gr: Cluster.GroupResource(), kind: "Cluster", namespace: cluster.Namespace, name: cluster.Name, purpose: purpose}.explain(notFound(Cluster, cluster.Name))
		}
		o.lostAPIServer = ""
		events, stop := mergeWatches(watchers)
		done, err := o.followTopology(ctx, tr, st, events, p)
		stop()
		stopAll()
		if done || err != nil {
			return err
		}
	}
}

// mergeWatches delivers the events of every watcher on one channel; a
// watcher that ends is delivered as an Error event (so the watches are
// resumed). stop ends the delivery.
func mergeWatches(watchers []watch.Interface) (<-chan watch.Event, func()) {
	out := make(chan watch.Event)
	done := make(chan struct{})
	for _, w := range watchers {
		go func(ch <-chan watch.Event) {
			for {
				ev, ok := <-ch
				if !ok {
					ev = watch.Event{Type: watch.Error}
				}
				select {
				case out <- ev:
				case <-done:
					return
				}
				if !ok {
					return
				}
			}
		}(w.ResultChan())
	}
	var once sync.Once
	return out, func() { once.Do(func() { close(done) }) }
}

// setPhase sets the verdict on the cluster's report and its objects': they
// roll out together, so an object is done only when the cluster is.
func (r *ClusterReport) setPhase(phase string, done bool) {
	r.Cluster.Phase, r.Cluster.Done = phase, done
	for i := range r.Objects {
		r.Objects[i].Phase, r.Objects[i].Done = phase, done
	}
}

// followTopology consumes the merged watches, recomputing the state on
// every event and at the tracker's deadlines. It returns done true with the
// verdict's error, or done false when a watch ended and must be resumed.
func (o *StatusOptions) followTopology(ctx context.Context, tr *StatusTracker, st *clusterState, events <-chan watch.Event, p *statusPrinter) (bool, error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var tick <-chan time.Time
	if p.live != nil {
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		now := time.Now()
		r := st.report(now)
		v := tr.Observe(r.Cluster, now)
		r.setPhase(v.Phase, v.Phase == PhaseRolledOut)
		if !r.Cluster.Done || p.json || p.live != nil {
			if err := p.printCluster(r, now); err != nil {
				return true, err
			}
		}
		s := r.Cluster
		switch v.Phase {
		case PhaseRolledOut:
			if !p.json {
				return true, writeRolledOut(p.out, r)
			}
			return true, nil
		case PhasePaused:
			return true, statusError{code: ExitPaused, msg: fmt.Sprintf("%s is paused (%s): it will not roll out until resumed", s.Object, s.Paused)}
		case PhaseStalled:
			return true, statusError{code: ExitStalled, msg: fmt.Sprintf("%s made no progress for %s (--progress-deadline): %s%s", s.Object, o.ProgressDeadline, s.Summary(), r.blocking())}
		}
		if !v.Wake.IsZero() {
			timer.Reset(max(time.Until(v.Wake), time.Millisecond))
		}
		for redraw := false; !redraw; {
			select {
			case <-ctx.Done():
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					if p.json || p.live != nil {
						r.setPhase(PhaseTimedOut, false)
						_ = p.printCluster(r, time.Now())
					}
					return true, statusError{code: ExitTimeout, msg: fmt.Sprintf("timed out waiting for %s to roll out (--timeout %s); last state: %s%s", s.Object, o.Timeout, s.Summary(), r.blocking())}
				}
				return true, ctx.Err()
			case now := <-tick:
				if err := p.live.tick(now); err != nil {
					return true, err
				}
			case <-timer.C:
				redraw = true
			case ev := <-events:
				keep, err := st.apply(ev)
				if err != nil || !keep {
					return err != nil, err
				}
				redraw = true
			}
		}
	}
}

// writeRolledOut prints the verdict of a cluster rolled out: each of its
// objects, then the cluster.
func writeRolledOut(out io.Writer, r ClusterReport) error {
	for _, obj := range r.Objects {
		if _, err := fmt.Fprintf(out, "%s successfully rolled out%s\n", obj.Object, revisionText(obj.Revision)); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(out, "%s successfully rolled out: %s\n", r.Cluster.Object, r.Cluster.Summary())
	return err
}

// revisionText is " (revision N)", or "" without a revision.
func revisionText(rev string) string {
	if rev == "" {
		return ""
	}
	return " (revision " + rev + ")"
}

// blocking says what holds a cluster's rollout back: the topology
// controller's TopologyReconciled condition, and the machines of each
// object that are not ready, not up to date or being deleted.
func (r ClusterReport) blocking() string {
	var b strings.Builder
	if u := r.Cluster.Upgrade; u != nil && u.TopologyReconciled != "" {
		b.WriteString("\n  TopologyReconciled: " + u.TopologyReconciled)
	}
	for _, s := range r.Objects {
		if m := blocking(s); m != "" {
			b.WriteString("\n  " + s.Object + ":" + strings.ReplaceAll(strings.TrimPrefix(m, "; blocked by:"), "\n  ", "\n    "))
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "; blocked by:" + b.String()
}
