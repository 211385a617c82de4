package history

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// A ClusterClass's history: its own revisions, and per revision what the
// topology controller rolled of the Clusters on the class while it was
// live, read from those objects' own histories.

// classCluster is one Cluster on a class, with its own topology history
// (nil when none is recorded) and the histories of its control plane and
// worker pools.
type classCluster struct {
	Cluster  *clusterv1.Cluster
	Topology *core.RevisionSet
	Objects  []*core.RevisionSet
}

// Rolled is one revision of a Cluster's control plane or worker pool that
// the topology controller made while a class revision was live.
type Rolled struct {
	// Cluster is the Cluster of the object.
	Cluster *clusterv1.Cluster
	// Set is the object's history.
	Set *core.RevisionSet
	// Rev is the object's revision.
	Rev revisions.Revision
}

// onClass says whether a topology's class, as the revision summary gives
// it ("name" or "namespace/name"), is cc, for a Cluster in namespace ns.
func onClass(class, ns string, cc *clusterv1.ClusterClass) bool {
	name, classNS := class, ns
	if n, c, ok := strings.Cut(class, "/"); ok {
		classNS, name = n, c
	}
	return name == cc.Name && classNS == cc.Namespace
}

// classAt returns the class the Cluster's topology named at t: that of
// the topology revision live then, else (no revision recorded before t)
// its class now.
func (c classCluster) classAt(t time.Time) string {
	class := c.Cluster.Spec.Topology.ClassRef.Name
	if ns := c.Cluster.Spec.Topology.ClassRef.Namespace; ns != "" {
		class = ns + "/" + class
	}
	if c.Topology == nil {
		return class
	}
	var latest *revisions.Revision
	for i := range c.Topology.Revs {
		r := &c.Topology.Revs[i]
		if !r.Record.ChangedAt.After(t) && (latest == nil || r.Record.ChangedAt.After(latest.Record.ChangedAt)) {
			latest = r
		}
	}
	if latest == nil {
		return class
	}
	sum, err := latest.Snapshot.Summary()
	if err != nil {
		return class
	}
	return sum.Class
}

// topologyEditAt returns when the Cluster's topology was last edited at or
// before t, zero when no recorded edit was.
func (c classCluster) topologyEditAt(t time.Time) time.Time {
	var at time.Time
	if c.Topology == nil {
		return at
	}
	for _, r := range c.Topology.Revs {
		if !r.Record.ChangedAt.After(t) && r.Record.ChangedAt.After(at) {
			at = r.Record.ChangedAt
		}
	}
	return at
}

// AttributeRolled gives each revision the topology controller made of the
// clusters' objects (field manager TopologyFieldManager) to the class
// revision it carried out: the class revision live when it was made — the
// latest made at or before it —, when the Cluster was then on the class
// (its topology revision live then names it, or, none recorded, its
// classRef now) and no edit of the Cluster's own topology came between
// the class revision and it (that edit is what it carried out). classRevs
// are the class's revisions; the result maps a class revision's number to
// what it rolled, oldest first.
func AttributeRolled(cc *clusterv1.ClusterClass, classRevs []revisions.Revision, clusters []classCluster) map[int64][]Rolled {
	byTime := append([]revisions.Revision(nil), classRevs...)
	sort.SliceStable(byTime, func(i, j int) bool { return byTime[i].Record.ChangedAt.Before(byTime[j].Record.ChangedAt) })
	out := map[int64][]Rolled{}
	for _, c := range clusters {
		for _, set := range c.Objects {
			for _, r := range set.Revs {
				if r.Record.FieldManager != TopologyFieldManager || r.Record.ChangedAt.IsZero() {
					continue
				}
				at := r.Record.ChangedAt
				var live *revisions.Revision
				for i := range byTime {
					if !byTime[i].Record.ChangedAt.After(at) {
						live = &byTime[i]
					}
				}
				if live == nil || live.Record.ChangedAt.IsZero() {
					continue
				}
				if !onClass(c.classAt(at), c.Cluster.Namespace, cc) {
					continue
				}
				if edit := c.topologyEditAt(at); edit.After(live.Record.ChangedAt) {
					continue
				}
				out[live.Record.Revision] = append(out[live.Record.Revision], Rolled{Cluster: c.Cluster, Set: set, Rev: r})
			}
		}
	}
	for n := range out {
		rolled := out[n]
		sort.SliceStable(rolled, func(i, j int) bool {
			a, b := rolled[i], rolled[j]
			if !a.Rev.Record.ChangedAt.Equal(b.Rev.Record.ChangedAt) {
				return a.Rev.Record.ChangedAt.Before(b.Rev.Record.ChangedAt)
			}
			if a.Cluster.Name != b.Cluster.Name {
				return a.Cluster.Name < b.Cluster.Name
			}
			return ShortRef(a.Set) < ShortRef(b.Set)
		})
	}
	return out
}

// runClusterClass prints a ClusterClass's revisions and what each rolled.
func (o *HistoryOptions) runClusterClass(ctx context.Context, cl *core.Clients, set *core.RevisionSet) error {
	cc := set.Obj.(*clusterv1.ClusterClass)
	purpose := "show the history of " + core.Describe(cc, core.ClusterClass)
	clusters, err := o.classClusters(ctx, cl, cc, purpose)
	if err != nil {
		return err
	}
	rolled := AttributeRolled(cc, set.Revs, clusters)
	if o.PrintFlags.Data() {
		if strings.ToLower(o.PrintFlags.Output) == "name" {
			return o.printData(set)
		}
		h, err := newClassHistory(set, clusters, rolled)
		if err != nil {
			return err
		}
		p, err := o.PrintFlags.ToPrinter("")
		if err != nil {
			return err
		}
		return p.PrintObj(h, o.Session.IOStreams.Out)
	}
	if !set.Recorded() {
		_, err := fmt.Fprintf(o.Session.IOStreams.Out, "No revision history recorded for %s. Is rollout-guard installed? It records every change from the moment it is.\n", core.Describe(cc, core.ClusterClass))
		return err
	}
	if err := writeClassTable(o.Session.IOStreams.Out, o.Session.Now(), cc, set, rolled); err != nil {
		return err
	}
	var unknown []core.UnknownAuthorRevision
	for _, r := range set.Revs {
		if core.AuthorUnknownOf(r.Record) != "" {
			unknown = append(unknown, core.UnknownAuthorRevision{Rev: r})
		}
	}
	return core.WriteUnknownAuthorNote(o.Session.IOStreams.Out, unknown, o.Session.Name()+" history "+o.ref.String())
}

// classClusters reads the Clusters on cc — now, or by a recorded revision
// of their topology — with their histories. It lists Clusters in every
// namespace (a class may be used from others); without the right to, in
// the class's own, and says so.
func (o *HistoryOptions) classClusters(ctx context.Context, cl *core.Clients, cc *clusterv1.ClusterClass, purpose string) ([]classCluster, error) {
	list := &clusterv1.ClusterList{}
	if err := cl.Client.List(ctx, list); err != nil {
		if !apierrors.IsForbidden(err) {
			return nil, core.Call{Verb: "list", GR: core.Cluster.GroupResource(), Kind: "Cluster", Purpose: purpose}.Explain(err)
		}
		o.Session.Warnf("cannot list Clusters in every namespace (%v); showing the Clusters of namespace %s only", err, cc.Namespace)
		list = &clusterv1.ClusterList{}
		if err := cl.Client.List(ctx, list, client.InNamespace(cc.Namespace)); err != nil {
			return nil, core.Call{Verb: "list", GR: core.Cluster.GroupResource(), Kind: "Cluster", Namespace: cc.Namespace, Purpose: purpose}.Explain(err)
		}
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	var out []classCluster
	for i := range list.Items {
		cluster := &list.Items[i]
		if !cluster.Spec.Topology.IsDefined() {
			continue
		}
		c := classCluster{Cluster: cluster}
		topology, err := o.Session.LoadHistory(ctx, cl, cluster, purpose)
		if err != nil {
			return nil, err
		}
		if topology.Recorded() {
			c.Topology = topology
		}
		if !c.everOn(cc) {
			continue
		}
		m, err := o.Session.ClusterPools(ctx, cl, cluster, purpose)
		if err != nil {
			return nil, err
		}
		for _, obj := range m.WithPools() {
			set, err := o.Session.LoadHistory(ctx, cl, obj, purpose)
			if err != nil {
				return nil, err
			}
			for _, bad := range set.Bad {
				o.Session.Warnf("skipping a damaged revision record: %v", bad)
			}
			c.Objects = append(c.Objects, set)
		}
		out = append(out, c)
	}
	return out, nil
}

// everOn says whether the Cluster is on cc now, or was by a recorded
// revision of its topology.
func (c classCluster) everOn(cc *clusterv1.ClusterClass) bool {
	ref := c.Cluster.Spec.Topology.ClassRef
	if ref.Name == cc.Name && (ref.Namespace == cc.Namespace || ref.Namespace == "" && c.Cluster.Namespace == cc.Namespace) {
		return true
	}
	if c.Topology == nil {
		return false
	}
	for _, r := range c.Topology.Revs {
		if sum, err := r.Snapshot.Summary(); err == nil && onClass(sum.Class, c.Cluster.Namespace, cc) {
			return true
		}
	}
	return false
}

// clusterName names a Cluster in a class's tables: its name, with its
// namespace when that is not the class's.
func clusterName(cc *clusterv1.ClusterClass, c *clusterv1.Cluster) string {
	if c.Namespace == cc.Namespace {
		return c.Name
	}
	return c.Namespace + "/" + c.Name
}

// writeClassTable prints the class's revisions, one line each with what
// it rolled counted, then one line per object revision rolled.
func writeClassTable(out io.Writer, now time.Time, cc *clusterv1.ClusterClass, set *core.RevisionSet, rolled map[int64][]Rolled) error {
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "REVISION\tCHANGED-BY\tVIA\tAGE\tROLLED\tCHANGE-CAUSE")
	for _, r := range set.Revs {
		rev := strconv.FormatInt(r.Record.Revision, 10)
		if also := alsoLive(r.Record); also != "" {
			rev += " (also " + also + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", rev, core.ChangedByCell(r.Record), core.Via(r.Record), age(now, r.Record.ChangedAt),
			rolledCount(rolled[r.Record.Revision]), core.OneLine(causeOf(r.Record)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	some := false
	for _, r := range set.Revs {
		if len(rolled[r.Record.Revision]) > 0 {
			some = true
		}
	}
	if !some {
		_, err := fmt.Fprintln(out, "\nNo control plane or worker pool of a Cluster on the class has a revision the topology controller made while a recorded revision of the class was live.")
		return err
	}
	fmt.Fprintln(out, "\nRolled, from each object's own history (the topology controller's revisions while the class revision was live):")
	w = printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "CLASS-REVISION\tCLUSTER\tOBJECT\tREVISION\tTYPE\tAGE\tCHANGE-CAUSE")
	for _, r := range set.Revs {
		for _, x := range rolled[r.Record.Revision] {
			fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Record.Revision, clusterName(cc, x.Cluster), ShortRef(x.Set), x.Rev.Record.Revision,
				core.OrNone(x.Rev.Record.ChangeType), age(now, x.Rev.Record.ChangedAt), core.OneLine(causeOf(x.Rev.Record)))
		}
	}
	return w.Flush()
}

// rolledCount is the ROLLED cell: how many clusters and objects a class
// revision rolled, "-" for none.
func rolledCount(rolled []Rolled) string {
	if len(rolled) == 0 {
		return "-"
	}
	clusters := map[string]bool{}
	for _, r := range rolled {
		clusters[r.Cluster.Namespace+"/"+r.Cluster.Name] = true
	}
	return fmt.Sprintf("%d %s, %d %s", len(clusters), core.Plural(len(clusters), "cluster", "clusters"), len(rolled), core.Plural(len(rolled), "object revision", "object revisions"))
}

// newClassHistory builds the data output of a class's history.
func newClassHistory(set *core.RevisionSet, clusters []classCluster, rolled map[int64][]Rolled) (*v1alpha1.ClusterClassRolloutHistory, error) {
	h := &v1alpha1.ClusterClassRolloutHistory{
		TypeMeta:     metav1.TypeMeta{APIVersion: v1alpha1.HistoryAPIVersion, Kind: v1alpha1.ClusterClassHistoryKind},
		ClusterClass: newRolloutHistory(set).Object,
		Recorded:     set.Recorded(),
		LiveRevision: set.LiveNumber(),
		Clusters:     []v1alpha1.HistoryObject{},
		Revisions:    []v1alpha1.ClassHistoryRevision{},
	}
	for _, c := range clusters {
		h.Clusters = append(h.Clusters, v1alpha1.HistoryObject{Kind: core.Cluster.GVK.Kind, Namespace: c.Cluster.Namespace, Name: c.Cluster.Name, UID: string(c.Cluster.UID)})
	}
	for _, r := range set.Revs {
		e, err := entryOf(set, r, false)
		if err != nil {
			return nil, err
		}
		cr := v1alpha1.ClassHistoryRevision{HistoryRevision: e, Rolled: []v1alpha1.RolledRevision{}}
		for _, x := range rolled[r.Record.Revision] {
			oe, err := entryOf(x.Set, x.Rev, false)
			if err != nil {
				return nil, err
			}
			cr.Rolled = append(cr.Rolled, v1alpha1.RolledRevision{
				Cluster:         v1alpha1.HistoryObject{Kind: core.Cluster.GVK.Kind, Namespace: x.Cluster.Namespace, Name: x.Cluster.Name, UID: string(x.Cluster.UID)},
				Object:          newRolloutHistory(x.Set).Object,
				HistoryRevision: oe,
			})
		}
		h.Revisions = append(h.Revisions, cr)
	}
	return h, nil
}
