package status

import (
	"context"
	"fmt"
	"io"
	"time"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// A ClusterClass cluster is watched as a whole: its Cluster (for
// spec.topology.version and the upgrade plans), its KubeadmControlPlane, its
// MachineDeployments, Machines, MachineSets and MachinePools (all labelled
// with the cluster's name), with one list and one watch each. During a chained
// upgrade the topology controller moves the control plane and the workers
// from step to step, so no object can be watched to its end apart.

// The sources of the watcher of a ClusterClass cluster (topologyWatcher).
const (
	topologyCluster = iota
	topologyControlPlanes
	topologyMachineDeployments
	topologyMachines
	topologyMachineSets
	// topologyMachinePools is the last source, and only there when the
	// management cluster serves MachinePools.
	topologyMachinePools
)

// topologyWatcher reads ClusterClass cluster NAME in ns: the Cluster (field
// selector metadata.name) and its objects (label cluster.x-k8s.io/cluster-name),
// its MachinePools too when pools.
func (o *StatusOptions) topologyWatcher(cl *core.Clients, cluster *clusterv1.Cluster, pools bool) *watcher {
	ns, name := cluster.Namespace, cluster.Name
	byCluster := client.MatchingLabels{clusterv1.ClusterNameLabel: name}
	sources := []watchSource{
		topologyCluster: {kind: "Cluster", GR: core.Cluster.GroupResource(), example: &clusterv1.Cluster{}, newList: core.Cluster.NewList,
			opts: []client.ListOption{client.InNamespace(ns), client.MatchingFields{"metadata.name": name}},
			keep: func(o client.Object) bool { return o.GetName() == name }},
		topologyControlPlanes:      labelled("KubeadmControlPlane", core.KubeadmControlPlane.GroupResource(), &controlplanev1.KubeadmControlPlane{}, core.KubeadmControlPlane.NewList, ns, byCluster),
		topologyMachineDeployments: labelled("MachineDeployment", core.MachineDeployment.GroupResource(), &clusterv1.MachineDeployment{}, core.MachineDeployment.NewList, ns, byCluster),
		topologyMachines:           machineSource(ns, byCluster),
		topologyMachineSets:        machineSetSource(ns, byCluster),
	}
	if pools {
		sources = append(sources, labelled("MachinePool", core.MachinePool.GroupResource(), &clusterv1.MachinePool{}, core.MachinePool.NewList, ns, byCluster))
	}
	return newWatcher(cl.Client, ns, "status "+core.Describe(cluster, core.Cluster), o.Session.IOStreams.ErrOut, sources)
}

// topologyView evaluates what w holds of ClusterClass cluster name at now.
func topologyView(w *watcher, name string, now time.Time) (statusView, error) {
	clusters := typed[clusterv1.Cluster](w.of(topologyCluster))
	if len(clusters) == 0 {
		return nil, fmt.Errorf("cluster/%s was deleted while its rollout was watched", name)
	}
	cluster := &clusters[0]
	var cp *controlplanev1.KubeadmControlPlane
	cps := typed[controlplanev1.KubeadmControlPlane](w.of(topologyControlPlanes))
	ref := cluster.Spec.ControlPlaneRef
	for i := range cps {
		if (ref.IsDefined() && cps[i].Name == ref.Name) || (!ref.IsDefined() && len(cps) == 1) {
			cp = &cps[i]
		}
	}
	objs := TopologyObjects{
		ControlPlane:       cp,
		MachineDeployments: typed[clusterv1.MachineDeployment](w.of(topologyMachineDeployments)),
		Machines:           typed[clusterv1.Machine](w.of(topologyMachines)),
		MachineSets:        typed[clusterv1.MachineSet](w.of(topologyMachineSets)),
	}
	if w.has(topologyMachinePools) {
		objs.MachinePools = typed[clusterv1.MachinePool](w.of(topologyMachinePools))
	}
	return &clusterView{EvaluateTopologyAt(cluster, objs, now)}, nil
}

// runTopology reports on a ClusterClass cluster: once (--watch=false), or
// watching it until a verdict.
func (o *StatusOptions) runTopology(ctx context.Context, cl *core.Clients, cluster *clusterv1.Cluster, p *StatusPrinter) error {
	if ref := cluster.Spec.ControlPlaneRef; ref.IsDefined() && (ref.Kind != core.KubeadmControlPlane.GVK.Kind || ref.APIGroup != core.KubeadmControlPlane.GVK.Group) {
		return fmt.Errorf("cannot watch Cluster %s/%s: its control plane is a %s.%s; status watches KubeadmControlPlanes only", cluster.Namespace, cluster.Name, ref.Kind, ref.APIGroup)
	}
	// A management cluster that serves no MachinePools has none to watch.
	_, pools, err := core.ListMachinePools(ctx, cl, cluster.Namespace, "status "+core.Describe(cluster, core.Cluster),
		client.MatchingLabels{clusterv1.ClusterNameLabel: cluster.Name}, client.Limit(1))
	if err != nil {
		return o.timedOut(ctx, err)
	}
	w := o.topologyWatcher(cl, cluster, pools)
	view := func(now time.Time) (statusView, error) { return topologyView(w, cluster.Name, now) }
	if o.Watch {
		return o.follow(ctx, w, view, p)
	}
	w.seed(topologyCluster, cluster)
	if err := w.list(ctx); err != nil {
		return o.timedOut(ctx, err)
	}
	now := time.Now()
	v, err := view(now)
	if err != nil {
		return err
	}
	r := v.(*clusterView).r
	phase := PhaseProgressing
	switch {
	case r.Cluster.Paused != "":
		phase = PhasePaused
	case r.Cluster.Complete:
		phase = PhaseRolledOut
	}
	r.SetPhase(phase, phase == PhaseRolledOut)
	if err := p.PrintCluster(r, now); err != nil {
		return err
	}
	if phase != PhaseRolledOut {
		return core.StatusError{Code: ExitNotRolledOut, Verdict: true, Msg: fmt.Sprintf("%s is not rolled out: %s", r.Cluster.Object, r.Cluster.Summary())}
	}
	return nil
}

// clusterView is a ClusterClass cluster's rollout: the cluster's report and
// its objects'.
type clusterView struct{ r ClusterReport }

func (v *clusterView) report() *StatusReport                       { return &v.r.Cluster }
func (v *clusterView) setPhase(phase string, done bool)            { v.r.SetPhase(phase, done) }
func (v *clusterView) print(p *StatusPrinter, now time.Time) error { return p.PrintCluster(v.r, now) }
func (v *clusterView) writeDone(out io.Writer) error               { return WriteRolledOut(out, v.r) }
func (v *clusterView) blocking() string                            { return v.r.blocking() }
func (v *clusterView) stalled() string                             { return ": " + v.r.Cluster.Summary() + v.r.blocking() }

// SetPhase sets the verdict on the cluster's report and its objects': they
// roll out together, so an object is done only when the cluster is.
func (r *ClusterReport) SetPhase(phase string, done bool) {
	r.Cluster.Phase, r.Cluster.Done = phase, done
	for i := range r.Objects {
		r.Objects[i].Phase, r.Objects[i].Done = phase, done
	}
}
