package history

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
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
	// Set is the history of the row's object.
	Set *core.RevisionSet
	// Rev is the revision.
	Rev revisions.Revision
	// Restart is set on a restart line.
	Restart *revisions.Restart
	// at is when the revision was made live, or the restart asked.
	at time.Time
	// object is the index of the object (the control plane first).
	object int
}

// MergeHistories merges the histories of a cluster's objects into one list
// ordered by time: each revision at the time its content was last made
// live, each restart at the time it was asked. Rows at the same time keep
// the objects' order (the Cluster's topology, then the control plane), then revision numbers; a
// restart comes after its revision. Times unknown (revisions adopted by the
// guard) come first.
func MergeHistories(sets []*core.RevisionSet) []historyRow {
	var rows []historyRow
	for i, set := range sets {
		for _, r := range set.Revs {
			rows = append(rows, historyRow{Set: set, Rev: r, at: r.Record.ChangedAt, object: i})
			for j := range r.Record.Restarts {
				rows = append(rows, historyRow{Set: set, Rev: r, Restart: &r.Record.Restarts[j], at: r.Record.Restarts[j].At, object: i})
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
		case a.Rev.Record.Revision != b.Rev.Record.Revision:
			return a.Rev.Record.Revision < b.Rev.Record.Revision
		}
		return a.Restart == nil && b.Restart != nil
	})
	return rows
}

// ShortRef names an object as the CLI takes it, with the kind's short
// name: "kcp/c1-control-plane", "md/c1-md-0".
func ShortRef(set *core.RevisionSet) string {
	k := set.Kind.Short
	if k == "" {
		k = set.Kind.Singular()
	}
	return k + "/" + set.Obj.GetName()
}

// runCluster prints the merged history of a Cluster's topology (the
// edits its operators made, when recorded), control plane,
// MachineDeployments and MachinePools.
func (o *HistoryOptions) runCluster(ctx context.Context, cl *core.Clients, cluster *clusterv1.Cluster) error {
	purpose := "show the history of " + core.Describe(cluster, core.Cluster)
	m, err := o.Session.ClusterPools(ctx, cl, cluster, purpose)
	if err != nil {
		return err
	}
	objs := m.WithPools()
	if o.Revision > 0 || o.Diff {
		return o.clusterRefusal(cluster, objs)
	}
	if ref := m.Other; ref != nil {
		o.Session.Warnf("the control plane of Cluster %s/%s is a %s.%s: rollout-guard records the history of KubeadmControlPlanes only; showing the worker pools", cluster.Namespace, cluster.Name, ref.Kind, ref.APIGroup)
	}
	var sets []*core.RevisionSet
	// The operator's edits of the topology, when the guard recorded them,
	// come first at equal times: they are what the objects' steps carry
	// out.
	if _, ok := kinds.HistoryOf(cluster); ok {
		topology, err := o.Session.LoadHistory(ctx, cl, cluster, purpose)
		if err != nil {
			return err
		}
		for _, bad := range topology.Bad {
			o.Session.Warnf("skipping a damaged revision record: %v", bad)
		}
		if topology.Recorded() {
			topology.WarnStale(o.Session)
			sets = append(sets, topology)
		}
	}
	for _, obj := range objs {
		set, err := o.Session.LoadHistory(ctx, cl, obj, purpose)
		if err != nil {
			return err
		}
		for _, bad := range set.Bad {
			o.Session.Warnf("skipping a damaged revision record: %v", bad)
		}
		set.WarnStale(o.Session)
		sets = append(sets, set)
	}
	recorded := 0
	for _, set := range sets {
		if set.Recorded() {
			recorded++
		}
	}
	if recorded > 0 {
		for _, set := range sets {
			if !set.Recorded() {
				o.Session.Warnf("no revision history recorded for %s; rollout history %s shows what the cluster itself keeps", core.Describe(set.Obj, set.Kind), ShortRef(set))
			}
		}
	}
	rows := MergeHistories(sets)
	if o.PrintFlags.Data() {
		if strings.ToLower(o.PrintFlags.Output) == "name" {
			for _, r := range rows {
				if r.Restart == nil && r.Rev.Name != "" {
					fmt.Fprintf(o.Session.IOStreams.Out, "rolloutrevision.rollout-guard.io/%s\n", r.Rev.Name)
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
		return p.PrintObj(h, o.Session.IOStreams.Out)
	}
	if recorded == 0 {
		what := "its control plane and worker pools"
		if len(objs) == 0 {
			what = "it: it has no control plane or worker pools yet"
		}
		_, err := fmt.Fprintf(o.Session.IOStreams.Out, "No revision history recorded for %s, %s. Is rollout-guard installed? It records every change from the moment it is.\n", core.Describe(cluster, core.Cluster), what)
		return err
	}
	if err := writeClusterTable(o.Session.IOStreams.Out, o.Session.Now(), rows); err != nil {
		return err
	}
	var unknown []core.UnknownAuthorRevision
	for _, r := range rows {
		if r.Restart == nil && core.AuthorUnknownOf(r.Rev.Record) != "" {
			unknown = append(unknown, core.UnknownAuthorRevision{Object: ShortRef(r.Set), Rev: r.Rev})
		}
	}
	return core.WriteUnknownAuthorNote(o.Session.IOStreams.Out, unknown, o.Session.Name()+" history OBJECT")
}

// writeClusterTable prints a cluster's merged history, one line per
// revision and per restart, oldest first.
func writeClusterTable(out io.Writer, now time.Time, rows []historyRow) error {
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "OBJECT\tREVISION\tVERSION\tCHANGED-BY\tVIA\tAGE\tCHANGE-CAUSE")
	for _, r := range rows {
		if rs := r.Restart; rs != nil {
			fmt.Fprintf(w, "%s\trestart\t\t%s\t%s\t%s\t%s\n", ShortRef(r.Set), core.OrUnknown(rs.By), core.Via(revisions.Record{ChangedBy: rs.By, FieldManager: rs.FieldManager}), age(now, rs.At),
				core.OneLine(restartCause(*rs)))
			continue
		}
		sum, err := summaryOf(r.Set.Kind, r.Rev.Snapshot)
		if err != nil {
			return err
		}
		rev := strconv.FormatInt(r.Rev.Record.Revision, 10)
		if also := alsoLive(r.Rev.Record); also != "" {
			rev += " (also " + also + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ShortRef(r.Set), rev, core.OrNone(sum.Version), core.ChangedByCell(r.Rev.Record),
			core.Via(r.Rev.Record), age(now, r.at), core.OneLine(causeOf(r.Rev.Record)))
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
		kind := core.KindOf(obj)
		asks = append(asks, fmt.Sprintf("%s history %s/%s %s -n %s", o.Session.Name(), kind.Short, obj.GetName(), flag, obj.GetNamespace()))
	}
	return fmt.Errorf("%s; ask one of them: %s", what, strings.Join(asks, ", "))
}

// newClusterHistory builds the data output of a cluster's history.
func newClusterHistory(cluster *clusterv1.Cluster, sets []*core.RevisionSet, rows []historyRow) (*v1alpha1.ClusterRolloutHistory, error) {
	h := &v1alpha1.ClusterRolloutHistory{
		TypeMeta:        metav1.TypeMeta{APIVersion: v1alpha1.HistoryAPIVersion, Kind: v1alpha1.ClusterHistoryKind},
		Cluster:         v1alpha1.HistoryObject{Kind: core.Cluster.GVK.Kind, Namespace: cluster.Namespace, Name: cluster.Name, UID: string(cluster.UID)},
		TopologyVersion: cluster.Spec.Topology.Version,
		Objects:         []v1alpha1.ClusterHistoryObject{},
		Revisions:       []v1alpha1.ClusterHistoryRevision{},
	}
	for _, set := range sets {
		h.Objects = append(h.Objects, v1alpha1.ClusterHistoryObject{HistoryObject: newRolloutHistory(set).Object, Recorded: set.Recorded(), LiveRevision: set.LiveNumber()})
	}
	for _, r := range rows {
		if r.Restart != nil {
			continue
		}
		e, err := entryOf(r.Set, r.Rev, false)
		if err != nil {
			return nil, err
		}
		h.Revisions = append(h.Revisions, v1alpha1.ClusterHistoryRevision{Object: newRolloutHistory(r.Set).Object, HistoryRevision: e})
	}
	return h, nil
}
