package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// HistoryOptions are the options of `rollout history`.
type HistoryOptions struct {
	c *cli
	// PrintFlags is -o/--output.
	PrintFlags *PrintFlags
	// Revision is --revision: print that revision in full.
	Revision int64
	// Diff is --diff: print the difference of a revision from the live object.
	Diff bool

	ref Ref
}

func newHistoryCommand(c *cli) *cobra.Command {
	o := &HistoryOptions{c: c, PrintFlags: NewPrintFlags()}
	cmd := &cobra.Command{
		Use:   "history KIND/NAME",
		Short: "Show the revisions of a worker pool, control plane or cluster: who changed what, when and why",
		Long: `Show the revision history rollout-guard recorded for a MachineDeployment, MachinePool,
KubeadmControlPlane or another provider's control plane (RESOURCE.controlplane.cluster.x-k8s.io,
its spec.version and spec.machineTemplate), read with one request from its ControllerRevisions:
one line per revision (the content was live under every number listed), oldest first; the
highest number is the live revision. Columns:

  REVISION        the revision number ("4 (also 2)": the same content was live as 2 before)
  VERSION         the Kubernetes version
  INFRASTRUCTURE  the infrastructure machine template
  BOOTSTRAP       the bootstrap config template (MachineDeployment) or config (MachinePool);
                  "inline" for a KubeadmControlPlane, with its pinned etcd image tag if any
  CHANGED-BY      the user whose request made it live, from the API server
  VIA             the field manager of that request (rollout, kubectl-patch, capi-topology, ...),
                  with the GitOps controller that made the revision in brackets:
                  "argocd-controller [Argo CD]", "kustomize-controller [Flux]" (known by its
                  field manager or its service account)
  AGE             how long ago it was made live
  CHANGE-CAUSE    why (--change-cause, or a generated description), with any break-glass
                  override: [override by USER: REASON]

A restart (spec.rollout.after) is not a new revision: it is shown as its own "restart"
line below the revision whose content it restarted, with who asked for it and when.

--revision N prints revision N in full (its record and content, as YAML); --diff prints
how a revision (--revision, default: the previous one) differs from the live object.
--revision N -o yaml|json prints revision N as the object it is a revision of, as kubectl
prints the object that holds a revision: apiVersion, kind, name and namespace of the
MachineDeployment, MachinePool or KubeadmControlPlane, the revision's stamps as its
annotations, and the revision's content at its place in the spec (spec.template; spec.version,
spec.machineTemplate and spec.kubeadmConfigSpec), to compare with a manifest in Git.
-o name prints its ControllerRevision.

Without rollout-guard's records (the guard is not installed, or has never seen the object)
history says so and shows what the cluster itself still has: the revision annotations of
a MachineDeployment's MachineSets.

cluster/NAME merges the histories of the cluster's control plane (its KubeadmControlPlane)
and of its MachineDeployments into one table ordered by time, with an OBJECT column
(kcp/NAME, md/NAME): each revision at the time it was made live, each restart at the time
it was asked. On a ClusterClass cluster the topology controller makes the changes, and
each step of an upgrade shows as a revision of the control plane or of a worker pool with
VIA capi-topology (Cluster API's topology controller), its version and a generated
CHANGE-CAUSE such as "version v1.33.4 → v1.34.2". -o json|yaml prints it as a
ClusterRolloutHistory, -o name the ControllerRevisions of every object. Revision numbers
belong to each object, so --revision and --diff are refused on a cluster, naming the
objects to ask instead.

` + exitCodesHelp,
		Example: `  rollout history machinedeployment/md-0
  rollout history kcp/my-cluster-control-plane --revision 3
  rollout history mp/my-pool
  rollout history md/md-0 --revision 3 -o yaml
  rollout history md/md-0 --diff
  rollout history md/md-0 -o yaml
  rollout history cluster/my-cluster`,
		RunE: runE(o),
	}
	cmd.Flags().Int64Var(&o.Revision, "revision", 0, "Print this revision in full; with -o yaml|json as the object it is a revision of, its content at its place in the spec. Not with cluster/NAME.")
	cmd.Flags().BoolVar(&o.Diff, "diff", false, "Print how the revision (--revision, default: the previous one) differs from the live object. Not with cluster/NAME.")
	o.PrintFlags.AddFlags(cmd)
	return cmd
}

// Complete reads the argument.
func (o *HistoryOptions) Complete(_ *cobra.Command, args []string) error {
	ref, err := parseOne("history", args)
	if err != nil {
		return err
	}
	o.ref = ref
	return nil
}

// Validate checks the flags.
func (o *HistoryOptions) Validate() error {
	if o.Revision < 0 {
		return fmt.Errorf("--revision %d: revision numbers start at 1", o.Revision)
	}
	if o.Diff && o.PrintFlags.Data() {
		return fmt.Errorf("--diff prints a table for people; leave out -o")
	}
	return o.PrintFlags.Validate()
}

// Run prints the history.
func (o *HistoryOptions) Run(ctx context.Context) error {
	cl, err := o.c.clients()
	if err != nil {
		return err
	}
	purpose := "show the history of " + o.ref.String()
	obj, err := o.c.get(ctx, cl, o.ref, purpose)
	if err != nil {
		return err
	}
	if cluster, ok := obj.(*clusterv1.Cluster); ok {
		return o.runCluster(ctx, cl, cluster)
	}
	set, err := o.c.loadHistory(ctx, cl, obj, purpose)
	if err != nil {
		return err
	}
	for _, bad := range set.bad {
		o.c.warnf("skipping a damaged revision record: %v", bad)
	}
	if !set.recorded() {
		return o.untracked(ctx, cl, set)
	}
	switch {
	case o.Diff:
		return o.diff(set)
	case o.Revision > 0:
		return o.revision(set)
	}
	if o.PrintFlags.Data() {
		return o.printData(set)
	}
	return o.table(set)
}

// table prints one line per revision and per restart.
func (o *HistoryOptions) table(set *revisionSet) error {
	now := o.c.now()
	w := printers.GetNewTabWriter(o.c.IOStreams.Out)
	fmt.Fprintln(w, "REVISION\tVERSION\tINFRASTRUCTURE\tBOOTSTRAP\tCHANGED-BY\tVIA\tAGE\tCHANGE-CAUSE")
	for _, r := range set.revs {
		sum, err := summaryOf(set.kind, r.Snapshot)
		if err != nil {
			return err
		}
		rev := strconv.FormatInt(r.Record.Revision, 10)
		if also := alsoLive(r.Record); also != "" {
			rev += " (also " + also + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rev, orNone(sum.Version), orNone(sum.Infrastructure), orNone(sum.Bootstrap),
			orUnknown(r.Record.ChangedBy), via(r.Record), age(now, r.Record.ChangedAt), oneLine(causeOf(r.Record)))
		for _, rs := range r.Record.Restarts {
			fmt.Fprintf(w, "restart\t\t\t\t%s\t%s\t%s\t%s\n", orUnknown(rs.By), via(revisions.Record{ChangedBy: rs.By, FieldManager: rs.FieldManager}), age(now, rs.At),
				"restart (spec.rollout.after "+rs.After+")")
		}
	}
	return w.Flush()
}

// summary is the gist of a revision for the table.
type summary struct {
	Version, Infrastructure, Bootstrap, EtcdImageTag string
}

// summaryOf is the gist of revision content s of an object of kind k: a
// bootstrap config that is part of the content shows as "inline".
func summaryOf(k Kind, s revisions.Snapshot) (summary, error) {
	sum, err := s.Summary()
	if err != nil {
		return summary{}, fmt.Errorf("reading revision %s: %w", s.Hash, err)
	}
	out := summary{Version: sum.Version, Infrastructure: sum.Infrastructure, Bootstrap: sum.Bootstrap, EtcdImageTag: sum.EtcdImageTag}
	if k.revision.inlineBootstrap {
		out.Bootstrap = "inline"
		if sum.EtcdImageTag != "" {
			out.Bootstrap += ", etcd " + sum.EtcdImageTag
		}
	}
	return out, nil
}

// alsoLive lists the other numbers a content was live under: "2".
func alsoLive(r revisions.Record) string {
	var others []string
	for _, n := range r.History {
		if n != r.Revision {
			others = append(others, strconv.FormatInt(n, 10))
		}
	}
	return strings.Join(others, ", ")
}

// causeOf is the change-cause column: the cause and any override.
func causeOf(r revisions.Record) string {
	cause := orNone(r.ChangeCause)
	if o := r.Override; o != nil {
		cause += fmt.Sprintf(" [override by %s: %s]", orUnknown(o.By), o.Reason)
	}
	return cause
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a table cell on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// revision prints one revision in full.
func (o *HistoryOptions) revision(set *revisionSet) error {
	r, ok := set.find(o.Revision)
	if !ok {
		return fmt.Errorf("%s has no revision %d; recorded revisions: %s", describe(set.obj, set.kind), o.Revision, set.numbers())
	}
	if o.PrintFlags.Data() {
		return o.printRevision(set, r)
	}
	entry, err := entryOf(set, r, true)
	if err != nil {
		return err
	}
	content := entry.Content
	entry.Content = nil
	head, err := yaml.Marshal(entry)
	if err != nil {
		return fmt.Errorf("printing revision %d: %w", r.Record.Revision, err)
	}
	body, err := yaml.JSONToYAML(content)
	if err != nil {
		return fmt.Errorf("printing revision %d: %w", r.Record.Revision, err)
	}
	out := o.c.IOStreams.Out
	fmt.Fprintf(out, "# %s, %s\n", describe(set.obj, set.kind), label(r))
	if _, err := out.Write(head); err != nil {
		return err
	}
	fmt.Fprintf(out, "content: # %s\n", set.kind.revision.fields)
	_, err = out.Write(indent(body, "  "))
	return err
}

func indent(b []byte, prefix string) []byte {
	lines := strings.SplitAfter(string(b), "\n")
	var sb strings.Builder
	for _, l := range lines {
		if l == "" {
			continue
		}
		sb.WriteString(prefix + l)
	}
	return []byte(sb.String())
}

// diff prints how a revision differs from the live object.
func (o *HistoryOptions) diff(set *revisionSet) error {
	var r revisions.Revision
	var ok bool
	if o.Revision > 0 {
		if r, ok = set.find(o.Revision); !ok {
			return fmt.Errorf("%s has no revision %d; recorded revisions: %s", describe(set.obj, set.kind), o.Revision, set.numbers())
		}
	} else if r, ok = set.previous(); !ok {
		return fmt.Errorf("%s has no earlier revision to compare with the live one; recorded revisions: %s", describe(set.obj, set.kind), set.numbers())
	}
	return printDiff(o.c.IOStreams.Out, set, r, "")
}

// printDiff prints the fields in which revision r differs from the live
// object, live first.
func printDiff(out io.Writer, set *revisionSet, r revisions.Revision, title string) error {
	changes, err := revisions.Diff(set.live, r.Snapshot)
	if err != nil {
		return fmt.Errorf("comparing %s with the live object: %w", label(r), err)
	}
	liveCol := "LIVE"
	if n := set.liveNumber(); n > 0 {
		liveCol = fmt.Sprintf("LIVE (REVISION %d)", n)
	}
	if title != "" {
		fmt.Fprintln(out, title)
	}
	if len(changes) == 0 {
		_, err := fmt.Fprintf(out, "%s: %s matches the live object\n", describe(set.obj, set.kind), label(r))
		return err
	}
	return writeChanges(out, changes, liveCol, fmt.Sprintf("REVISION %d", r.Record.Revision))
}

// writeChanges prints changes as a table FIELD, from, to.
func writeChanges(out io.Writer, changes []revisions.Change, from, to string) error {
	w := printers.GetNewTabWriter(out)
	fmt.Fprintf(w, "FIELD\t%s\t%s\n", from, to)
	for _, c := range changes {
		fmt.Fprintf(w, "%s\t%s\t%s\n", c.Path, orNone(oneLine(c.From)), orNone(oneLine(c.To)))
	}
	return w.Flush()
}

// printData prints the history as data: -o json|yaml, or the
// ControllerRevisions with -o name.
func (o *HistoryOptions) printData(set *revisionSet) error {
	if strings.ToLower(o.PrintFlags.Output) == "name" {
		for _, r := range set.revs {
			if r.Name != "" {
				fmt.Fprintf(o.c.IOStreams.Out, "controllerrevision.apps/%s\n", r.Name)
			}
		}
		return nil
	}
	h := newRolloutHistory(set)
	for _, r := range set.revs {
		e, err := entryOf(set, r, false)
		if err != nil {
			return err
		}
		h.Revisions = append(h.Revisions, e)
	}
	return o.printHistory(h)
}

func (o *HistoryOptions) printHistory(h *RolloutHistory) error {
	p, err := o.PrintFlags.ToPrinter("")
	if err != nil {
		return err
	}
	return p.PrintObj(h, o.c.IOStreams.Out)
}

// untracked prints what the cluster itself keeps when the guard recorded nothing.
func (o *HistoryOptions) untracked(ctx context.Context, cl *clients, set *revisionSet) error {
	obj := set.obj
	var sets []MachineSetRevision
	if set.kind.machineSets != nil {
		var err error
		if sets, err = o.c.machineSetRevisions(ctx, cl, set); err != nil {
			return err
		}
	}
	if o.PrintFlags.Data() {
		h := newRolloutHistory(set)
		h.MachineSets = sets
		return o.printHistory(h)
	}
	out := o.c.IOStreams.Out
	fmt.Fprintf(out, "No revision history recorded for %s: no ControllerRevisions and no %s stamps. Is rollout-guard installed? It records every change from the moment it is.\n",
		describe(obj, set.kind), revisions.Prefix)
	now := o.c.now()
	if set.kind.machineSets != nil {
		if len(sets) == 0 {
			_, err := fmt.Fprintln(out, "The cluster keeps no MachineSets of it either.")
			return err
		}
		fmt.Fprintf(out, "What the cluster still has: the %s annotations of its MachineSets (Cluster API deletes old MachineSets, and records no author or cause):\n", clusterv1.RevisionAnnotation)
		w := printers.GetNewTabWriter(out)
		fmt.Fprintln(w, "REVISION\tMACHINESET\tVERSION\tINFRASTRUCTURE\tBOOTSTRAP\tREPLICAS\tAGE")
		for _, s := range sets {
			created, _ := time.Parse(time.RFC3339, s.CreatedAt)
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", orNone(s.Revision), s.MachineSet, orNone(s.Version), orNone(s.Infrastructure), orNone(s.Bootstrap), s.Replicas, age(now, created))
		}
		return w.Flush()
	}
	sum, err := summaryOf(set.kind, set.live)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "A %s keeps no history of its own; only the live revision is known:\n", set.kind.GVK.Kind)
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "REVISION\tVERSION\tINFRASTRUCTURE\tBOOTSTRAP\tAGE")
	fmt.Fprintf(w, "live\t%s\t%s\t%s\t%s\n", orNone(sum.Version), orNone(sum.Infrastructure), sum.Bootstrap, age(now, obj.GetCreationTimestamp().Time))
	return w.Flush()
}

// machineSetRevisions lists the MachineSets of set's object (a
// MachineDeployment) with their revision annotations, oldest revision first.
func (c *cli) machineSetRevisions(ctx context.Context, cl *clients, set *revisionSet) ([]MachineSetRevision, error) {
	md := set.obj
	list := &clusterv1.MachineSetList{}
	if err := cl.client.List(ctx, list, client.InNamespace(md.GetNamespace()), set.kind.machineSets(md)); err != nil {
		return nil, call{verb: "list", gr: schema.GroupResource{Group: clusterv1.GroupVersion.Group, Resource: "machinesets"}, kind: "MachineSet",
			namespace: md.GetNamespace(), purpose: "show the history of " + describe(md, set.kind)}.explain(err)
	}
	var out []MachineSetRevision
	for _, ms := range list.Items {
		owned := len(ms.OwnerReferences) == 0
		for _, ref := range ms.OwnerReferences {
			if ref.UID == md.GetUID() {
				owned = true
			}
		}
		if !owned {
			continue
		}
		s := MachineSetRevision{
			Revision:       ms.Annotations[clusterv1.RevisionAnnotation],
			MachineSet:     ms.Name,
			Version:        ms.Spec.Template.Spec.Version,
			Infrastructure: refString(ms.Spec.Template.Spec.InfrastructureRef),
			Bootstrap:      refString(ms.Spec.Template.Spec.Bootstrap.ConfigRef),
			CreatedAt:      ms.CreationTimestamp.UTC().Format(time.RFC3339),
		}
		if ms.Spec.Replicas != nil {
			s.Replicas = *ms.Spec.Replicas
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, errA := strconv.Atoi(out[i].Revision)
		b, errB := strconv.Atoi(out[j].Revision)
		if errA == nil && errB == nil && a != b {
			return a < b
		}
		return out[i].MachineSet < out[j].MachineSet
	})
	return out, nil
}

func refString(r clusterv1.ContractVersionedObjectReference) string {
	if !r.IsDefined() {
		return ""
	}
	return r.Kind + "/" + r.Name
}

// HistoryAPIVersion is the apiVersion of what `rollout history -o json|yaml` prints.
const HistoryAPIVersion = "rollout.rollout-guard.io/v1alpha1"

// RolloutHistory is the history of one object as `rollout history -o
// json|yaml` prints it.
type RolloutHistory struct {
	metav1.TypeMeta `json:",inline"`
	// Object is the MachineDeployment or KubeadmControlPlane.
	Object HistoryObject `json:"object"`
	// Recorded is false when rollout-guard recorded nothing for the object.
	Recorded bool `json:"recorded"`
	// LiveRevision is the number of the live revision, 0 when unknown.
	LiveRevision int64 `json:"liveRevision,omitempty"`
	// Revisions are the recorded revisions, oldest first.
	Revisions []HistoryRevision `json:"revisions,omitempty"`
	// MachineSets are, when nothing was recorded, what the cluster keeps of
	// a MachineDeployment's revisions.
	MachineSets []MachineSetRevision `json:"machineSets,omitempty"`
}

// HistoryObject names the object of a history.
type HistoryObject struct {
	// Kind is MachineDeployment or KubeadmControlPlane.
	Kind string `json:"kind"`
	// Namespace is the object's namespace.
	Namespace string `json:"namespace"`
	// Name is the object's name.
	Name string `json:"name"`
	// UID is the object's UID, which its ControllerRevisions carry.
	UID string `json:"uid"`
}

// HistoryRevision is one revision of a RolloutHistory.
type HistoryRevision struct {
	// Revision is the latest number the content was live under.
	Revision int64 `json:"revision"`
	// History is every number the content was live under.
	History []int64 `json:"history,omitempty"`
	// Live marks the live revision.
	Live bool `json:"live,omitempty"`
	// ControllerRevision is the name of the record, "" while the live
	// revision is not yet recorded.
	ControllerRevision string `json:"controllerRevision,omitempty"`
	// Hash is the content's hash.
	Hash string `json:"hash"`
	// Version is the Kubernetes version.
	Version string `json:"version,omitempty"`
	// Infrastructure is the infrastructure machine template, "Kind/name".
	Infrastructure string `json:"infrastructure,omitempty"`
	// Bootstrap is a MachineDeployment's bootstrap config template,
	// "Kind/name", or "secret:<name>".
	Bootstrap string `json:"bootstrap,omitempty"`
	// EtcdImageTag is a KubeadmControlPlane's pinned etcd image tag.
	EtcdImageTag string `json:"etcdImageTag,omitempty"`
	// ChangedBy is the user whose request made the content live.
	ChangedBy string `json:"changedBy,omitempty"`
	// ChangedAt is when, RFC 3339.
	ChangedAt string `json:"changedAt,omitempty"`
	// FieldManager is the request's field manager.
	FieldManager string `json:"fieldManager,omitempty"`
	// GitOps is the GitOps controller that made the revision ("Argo CD",
	// "Flux"), known by its field manager or service account.
	GitOps string `json:"gitOps,omitempty"`
	// ChangeType is created, rollout, in-place or adopted.
	ChangeType string `json:"changeType,omitempty"`
	// ChangeCause says why.
	ChangeCause string `json:"changeCause,omitempty"`
	// Override is the break-glass override that let the change through.
	Override *HistoryOverride `json:"override,omitempty"`
	// Restarts are the restarts asked while the content was live.
	Restarts []revisions.Restart `json:"restarts,omitempty"`
	// Content is the revision's content (with --revision only).
	Content json.RawMessage `json:"content,omitempty"`
}

// HistoryOverride is the break-glass override a revision was made with.
type HistoryOverride struct {
	// By is the user who used it.
	By string `json:"by"`
	// Reason is the reason given.
	Reason string `json:"reason"`
	// Rules are the ids of the rules it overrode.
	Rules []string `json:"rules,omitempty"`
}

// MachineSetRevision is one MachineSet of a MachineDeployment and the
// revision Cluster API annotated it with.
type MachineSetRevision struct {
	// Revision is the machinedeployment.clusters.x-k8s.io/revision annotation.
	Revision string `json:"revision,omitempty"`
	// MachineSet is the MachineSet's name.
	MachineSet string `json:"machineSet"`
	// Version is its template's Kubernetes version.
	Version string `json:"version,omitempty"`
	// Infrastructure is its infrastructure machine template, "Kind/name".
	Infrastructure string `json:"infrastructure,omitempty"`
	// Bootstrap is its bootstrap config template, "Kind/name".
	Bootstrap string `json:"bootstrap,omitempty"`
	// Replicas is its spec.replicas.
	Replicas int32 `json:"replicas"`
	// CreatedAt is its creation time.
	CreatedAt string `json:"createdAt"`
}

// DeepCopyObject implements runtime.Object.
func (h *RolloutHistory) DeepCopyObject() runtime.Object {
	if h == nil {
		return nil
	}
	out := &RolloutHistory{}
	raw, err := json.Marshal(h)
	if err == nil {
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		panic(fmt.Sprintf("copying a RolloutHistory: %v", err))
	}
	return out
}

func newRolloutHistory(set *revisionSet) *RolloutHistory {
	return &RolloutHistory{
		TypeMeta: metav1.TypeMeta{APIVersion: HistoryAPIVersion, Kind: "RolloutHistory"},
		Object: HistoryObject{Kind: set.kind.GVK.Kind, Namespace: set.obj.GetNamespace(), Name: set.obj.GetName(),
			UID: string(set.obj.GetUID())},
		Recorded:     set.recorded(),
		LiveRevision: set.liveNumber(),
	}
}

// entryOf converts a revision for data output.
func entryOf(set *revisionSet, r revisions.Revision, withContent bool) (HistoryRevision, error) {
	sum, err := r.Snapshot.Summary()
	if err != nil {
		return HistoryRevision{}, fmt.Errorf("reading revision %d: %w", r.Record.Revision, err)
	}
	e := HistoryRevision{
		Revision:           r.Record.Revision,
		History:            r.Record.History,
		Live:               r.Snapshot.Hash == set.live.Hash,
		ControllerRevision: r.Name,
		Hash:               r.Snapshot.Hash,
		Version:            sum.Version,
		Infrastructure:     sum.Infrastructure,
		Bootstrap:          sum.Bootstrap,
		EtcdImageTag:       sum.EtcdImageTag,
		ChangedBy:          r.Record.ChangedBy,
		FieldManager:       r.Record.FieldManager,
		GitOps:             gitOpsController(r.Record),
		ChangeType:         r.Record.ChangeType,
		ChangeCause:        r.Record.ChangeCause,
		Restarts:           r.Record.Restarts,
	}
	if o := r.Record.Override; o != nil {
		e.Override = &HistoryOverride{By: o.By, Reason: o.Reason, Rules: o.Rules}
	}
	if !r.Record.ChangedAt.IsZero() {
		e.ChangedAt = r.Record.ChangedAt.UTC().Format(time.RFC3339)
	}
	if withContent {
		e.Content = json.RawMessage(r.Snapshot.Data)
	}
	return e, nil
}
