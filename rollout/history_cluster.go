package rollout

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// TopologyFieldManager is the field manager of Cluster API's topology
// controller (sigs.k8s.io/cluster-api core/reconcilers/topology/cluster/
// structuredmerge.TopologyManagerName, v1.14): the guard records it as the
// VIA of every revision the topology controller made, e.g. each step of a
// chained upgrade.
const TopologyFieldManager = "capi-topology"

// historyRow is one line of a cluster's merged history: a revision of one
// of its objects, or a restart asked while that revision was live.
type historyRow struct {
	// set is the history of the row's object.
	set *revisionSet
	// rev is the revision.
	rev revisions.Revision
	// restart is set on a restart line.
	restart *revisions.Restart
	// at is when the revision was made live, or the restart asked.
	at time.Time
	// object is the index of the object (the control plane first).
	object int
}

// mergeHistories merges the histories of a cluster's objects into one list
// ordered by time: each revision at the time its content was last made
// live, each restart at the time it was asked. Rows at the same time keep
// the objects' order (the control plane first), then revision numbers; a
// restart comes after its revision. Times unknown (revisions adopted by the
// guard) come first.
func mergeHistories(sets []*revisionSet) []historyRow {
	var rows []historyRow
	for i, set := range sets {
		for _, r := range set.revs {
			rows = append(rows, historyRow{set: set, rev: r, at: r.Record.ChangedAt, object: i})
			for j := range r.Record.Restarts {
				rows = append(rows, historyRow{set: set, rev: r, restart: &r.Record.Restarts[j], at: r.Record.Restarts[j].At, object: i})
			}
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		switch {
		case !a.at.Equal(b.at):
			return a.at.Before(b.at)
		case a.object != b.object:
			return a.object < b.object
		case a.rev.Record.Revision != b.rev.Record.Revision:
			return a.rev.Record.Revision < b.rev.Record.Revision
		}
		return a.restart == nil && b.restart != nil
	})
	return rows
}

// shortRef names an object as the CLI takes it, with the kind's short
// name: "kcp/c1-control-plane", "md/c1-md-0".
func shortRef(set *revisionSet) string {
	k := set.kind.Short
	if k == "" {
		k = set.kind.Singular()
	}
	return k + "/" + set.obj.GetName()
}

// runCluster prints the merged history of a Cluster's control plane,
// MachineDeployments and MachinePools.
func (o *HistoryOptions) runCluster(ctx context.Context, cl *clients, cluster *clusterv1.Cluster) error {
	purpose := "show the history of " + describe(cluster, Cluster)
	m, err := o.c.clusterPools(ctx, cl, cluster, purpose)
	if err != nil {
		return err
	}
	objs := m.withPools()
	if o.Revision > 0 || o.Diff {
		return o.clusterRefusal(cluster, objs)
	}
	if ref := m.other; ref != nil {
		o.c.warnf("the control plane of Cluster %s/%s is a %s.%s: rollout-guard records the history of KubeadmControlPlanes only; showing the worker pools", cluster.Namespace, cluster.Name, ref.Kind, ref.APIGroup)
	}
	var sets []*revisionSet
	for _, obj := range objs {
		set, err := o.c.loadHistory(ctx, cl, obj, purpose)
		if err != nil {
			return err
		}
		for _, bad := range set.bad {
			o.c.warnf("skipping a damaged revision record: %v", bad)
		}
		set.warnStale(o.c)
		sets = append(sets, set)
	}
	recorded := 0
	for _, set := range sets {
		if set.recorded() {
			recorded++
		}
	}
	if recorded > 0 {
		for _, set := range sets {
			if !set.recorded() {
				o.c.warnf("no revision history recorded for %s; rollout history %s shows what the cluster itself keeps", describe(set.obj, set.kind), shortRef(set))
			}
		}
	}
	rows := mergeHistories(sets)
	if o.PrintFlags.Data() {
		if strings.ToLower(o.PrintFlags.Output) == "name" {
			for _, r := range rows {
				if r.restart == nil && r.rev.Name != "" {
					fmt.Fprintf(o.c.IOStreams.Out, "controllerrevision.apps/%s\n", r.rev.Name)
				}
			}
			return nil
		}
		h, err := newClusterHistory(cluster, sets, rows)
		if err != nil {
			return err
		}
		p, err := o.PrintFlags.ToPrinter("")
		if err != nil {
			return err
		}
		return p.PrintObj(h, o.c.IOStreams.Out)
	}
	if recorded == 0 {
		what := "its control plane and worker pools"
		if len(objs) == 0 {
			what = "it: it has no control plane or worker pools yet"
		}
		_, err := fmt.Fprintf(o.c.IOStreams.Out, "No revision history recorded for %s, %s. Is rollout-guard installed? It records every change from the moment it is.\n", describe(cluster, Cluster), what)
		return err
	}
	if err := writeClusterTable(o.c.IOStreams.Out, o.c.now(), rows); err != nil {
		return err
	}
	var unknown []unknownAuthorRevision
	for _, r := range rows {
		if r.restart == nil && authorUnknownOf(r.rev.Record) != "" {
			unknown = append(unknown, unknownAuthorRevision{object: shortRef(r.set), rev: r.rev})
		}
	}
	return writeUnknownAuthorNote(o.c.IOStreams.Out, unknown, o.c.name()+" history OBJECT")
}

// writeClusterTable prints a cluster's merged history, one line per
// revision and per restart, oldest first.
func writeClusterTable(out io.Writer, now time.Time, rows []historyRow) error {
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "OBJECT\tREVISION\tVERSION\tCHANGED-BY\tVIA\tAGE\tCHANGE-CAUSE")
	for _, r := range rows {
		if rs := r.restart; rs != nil {
			fmt.Fprintf(w, "%s\trestart\t\t%s\t%s\t%s\t%s\n", shortRef(r.set), orUnknown(rs.By), via(revisions.Record{ChangedBy: rs.By, FieldManager: rs.FieldManager}), age(now, rs.At),
				oneLine(restartCause(*rs)))
			continue
		}
		sum, err := summaryOf(r.set.kind, r.rev.Snapshot)
		if err != nil {
			return err
		}
		rev := strconv.FormatInt(r.rev.Record.Revision, 10)
		if also := alsoLive(r.rev.Record); also != "" {
			rev += " (also " + also + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", shortRef(r.set), rev, orNone(sum.Version), changedByCell(r.rev.Record),
			via(r.rev.Record), age(now, r.at), oneLine(causeOf(r.rev.Record)))
	}
	return w.Flush()
}

// clusterRefusal refuses --revision and --diff on a cluster, naming the
// objects to ask instead.
func (o *HistoryOptions) clusterRefusal(cluster *clusterv1.Cluster, objs []client.Object) error {
	var flags []string
	if o.Revision > 0 {
		flags = append(flags, fmt.Sprintf("--revision %d", o.Revision))
	}
	if o.Diff {
		flags = append(flags, "--diff")
	}
	flag := strings.Join(flags, " ")
	what := fmt.Sprintf("%s has no meaning for cluster/%s: its control plane and worker pools number their revisions apart", flag, cluster.Name)
	if len(objs) == 0 {
		return fmt.Errorf("%s, and it has none yet", what)
	}
	asks := make([]string, 0, len(objs))
	for _, obj := range objs {
		kind := kindOf(obj)
		asks = append(asks, fmt.Sprintf("%s history %s/%s %s -n %s", o.c.name(), kind.Short, obj.GetName(), flag, obj.GetNamespace()))
	}
	return fmt.Errorf("%s; ask one of them: %s", what, strings.Join(asks, ", "))
}

// newClusterHistory builds the data output of a cluster's history.
func newClusterHistory(cluster *clusterv1.Cluster, sets []*revisionSet, rows []historyRow) (*v1alpha1.ClusterRolloutHistory, error) {
	h := &v1alpha1.ClusterRolloutHistory{
		TypeMeta:        metav1.TypeMeta{APIVersion: v1alpha1.HistoryAPIVersion, Kind: v1alpha1.ClusterHistoryKind},
		Cluster:         v1alpha1.HistoryObject{Kind: Cluster.GVK.Kind, Namespace: cluster.Namespace, Name: cluster.Name, UID: string(cluster.UID)},
		TopologyVersion: cluster.Spec.Topology.Version,
		Objects:         []v1alpha1.ClusterHistoryObject{},
		Revisions:       []v1alpha1.ClusterHistoryRevision{},
	}
	for _, set := range sets {
		h.Objects = append(h.Objects, v1alpha1.ClusterHistoryObject{HistoryObject: newRolloutHistory(set).Object, Recorded: set.recorded(), LiveRevision: set.liveNumber()})
	}
	for _, r := range rows {
		if r.restart != nil {
			continue
		}
		e, err := entryOf(r.set, r.rev, false)
		if err != nil {
			return nil, err
		}
		h.Revisions = append(h.Revisions, v1alpha1.ClusterHistoryRevision{Object: newRolloutHistory(r.set).Object, HistoryRevision: e})
	}
	return h, nil
}
