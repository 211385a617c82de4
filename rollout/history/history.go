package history

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// HistoryOptions are the options of `rollout history`.
type HistoryOptions struct {
	// Session is the invocation: its clients, streams and checks.
	Session *core.Session
	// PrintFlags is -o/--output.
	PrintFlags *core.PrintFlags
	// Revision is --revision: print that revision in full.
	Revision int64
	// Diff is --diff: print the difference of a revision from the live object.
	Diff bool

	ref core.Ref
}

// NewCommand returns the `rollout history` command of the invocation c.
func NewCommand(c *core.Session) *cobra.Command {
	o := &HistoryOptions{Session: c, PrintFlags: core.NewPrintFlags()}
	cmd := &cobra.Command{
		Use:   "history KIND/NAME",
		Short: "Show the revisions of a worker pool, control plane, cluster or ClusterClass: who changed what, when and why",
		Long: `Show the revisions rollout-guard recorded for a worker pool or control plane, oldest first,
the highest live: REVISION, VERSION, INFRASTRUCTURE, BOOTSTRAP, CHANGED-BY (from the API
server; "unknown (*)" when nothing records one), VIA (the field manager, and the GitOps
controller in brackets), AGE and CHANGE-CAUSE; restarts as their own lines. cluster/NAME
merges the edits of its topology with its control plane's and worker pools' histories by
time. clusterclass/NAME lists the class's revisions and, per revision, the revisions the
topology controller made of the control planes and worker pools of the Clusters on the
class while it was live. More: docs/reading-history.md.`,
		Example: `  rollout history machinedeployment/md-0
  rollout history kcp/my-cluster-control-plane --revision 3
  rollout history mp/my-pool
  rollout history md/md-0 --revision 3 -o yaml
  rollout history md/md-0 --diff
  rollout history md/md-0 -o yaml
  rollout history cluster/my-cluster
  rollout history clusterclass/my-class
  rollout history cc/my-class --revision 2 -o yaml`,
		RunE: core.RunE(o),
	}
	core.SetExitStatus(cmd, core.ExitHelpOK, core.ExitHelpError)
	cmd.Flags().Int64Var(&o.Revision, "revision", 0, "Print this revision in full; with -o yaml|json as the object it is a revision of, its content at its place in the spec. Not with cluster/NAME.")
	cmd.Flags().BoolVar(&o.Diff, "diff", false, "Print how the revision (--revision, default: the previous one) differs from the live object. Not with cluster/NAME.")
	o.PrintFlags.AddFlags(cmd)
	return cmd
}

// Complete reads the argument.
func (o *HistoryOptions) Complete(_ *cobra.Command, args []string) error {
	ref, err := core.ParseOne("history", args)
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
	cl, err := o.Session.Clients()
	if err != nil {
		return err
	}
	purpose := "show the history of " + o.ref.String()
	obj, err := o.Session.Get(ctx, cl, o.ref, purpose)
	if err != nil {
		return err
	}
	if cluster, ok := obj.(*clusterv1.Cluster); ok {
		return o.runCluster(ctx, cl, cluster)
	}
	set, err := o.Session.LoadHistory(ctx, cl, obj, purpose)
	if err != nil {
		return err
	}
	for _, bad := range set.Bad {
		o.Session.Warnf("skipping a damaged revision record: %v", bad)
	}
	if _, ok := obj.(*clusterv1.ClusterClass); ok && o.Revision == 0 && !o.Diff {
		set.WarnStale(o.Session)
		return o.runClusterClass(ctx, cl, set)
	}
	if !set.Recorded() {
		return o.untracked(ctx, cl, set)
	}
	set.WarnStale(o.Session)
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
func (o *HistoryOptions) table(set *core.RevisionSet) error {
	now := o.Session.Now()
	w := printers.GetNewTabWriter(o.Session.IOStreams.Out)
	fmt.Fprintln(w, "REVISION\tVERSION\tINFRASTRUCTURE\tBOOTSTRAP\tCHANGED-BY\tVIA\tAGE\tCHANGE-CAUSE")
	var unknown []core.UnknownAuthorRevision
	for _, r := range set.Revs {
		sum, err := summaryOf(set.Kind, r.Snapshot)
		if err != nil {
			return err
		}
		rev := strconv.FormatInt(r.Record.Revision, 10)
		if also := alsoLive(r.Record); also != "" {
			rev += " (also " + also + ")"
		}
		if core.AuthorUnknownOf(r.Record) != "" {
			unknown = append(unknown, core.UnknownAuthorRevision{Rev: r})
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rev, core.OrNone(sum.Version), core.OrNone(sum.Infrastructure), core.OrNone(sum.Bootstrap),
			core.ChangedByCell(r.Record), core.Via(r.Record), age(now, r.Record.ChangedAt), core.OneLine(causeOf(r.Record)))
		for _, rs := range r.Record.Restarts {
			fmt.Fprintf(w, "restart\t\t\t\t%s\t%s\t%s\t%s\n", core.OrUnknown(rs.By), core.Via(revisions.Record{ChangedBy: rs.By, FieldManager: rs.FieldManager}), age(now, rs.At),
				core.OneLine(restartCause(rs)))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return core.WriteUnknownAuthorNote(o.Session.IOStreams.Out, unknown, o.Session.Name()+" history "+o.ref.String())
}

// restartCause is the CHANGE-CAUSE of a restart line: what restarted, and
// the cause the request gave when it gave one.
func restartCause(rs revisions.Restart) string {
	what := "restart (spec.rollout.after " + rs.After + ")"
	if rs.Cause == "" {
		return what
	}
	return what + ": " + rs.Cause
}

// summary is the gist of a revision for the table.
type summary struct {
	Version, Infrastructure, Bootstrap, EtcdImageTag string
}

// summaryOf is the gist of revision content s of an object of kind k: a
// bootstrap config that is part of the content shows as "inline".
func summaryOf(k core.Kind, s revisions.Snapshot) (summary, error) {
	sum, err := s.Summary()
	if err != nil {
		return summary{}, fmt.Errorf("reading revision %s: %w", s.Hash, err)
	}
	out := summary{Version: sum.Version, Infrastructure: sum.Infrastructure, Bootstrap: sum.Bootstrap, EtcdImageTag: sum.EtcdImageTag}
	if k.Revision.InlineBootstrap {
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
	cause := core.OrNone(r.ChangeCause)
	if o := r.Override; o != nil {
		cause += fmt.Sprintf(" [override by %s: %s]", core.OrUnknown(o.By), o.Reason)
	}
	return cause
}

func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// revision prints one revision in full.
func (o *HistoryOptions) revision(set *core.RevisionSet) error {
	r, ok := set.Find(o.Revision)
	if !ok {
		return fmt.Errorf("%s has no revision %d; recorded revisions: %s", core.Describe(set.Obj, set.Kind), o.Revision, set.Numbers())
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
	out := o.Session.IOStreams.Out
	fmt.Fprintf(out, "# %s, %s\n", core.Describe(set.Obj, set.Kind), core.Label(r))
	if why := entry.AuthorUnknown; why != "" {
		fmt.Fprintf(out, "# author unknown: %s; nothing says its content was meant: read it all before rolling back to it (rollout undo to it needs --force)\n", core.AuthorUnknownReason(why))
	}
	if _, err := out.Write(head); err != nil {
		return err
	}
	fmt.Fprintf(out, "content: # %s\n", set.Kind.Revision.Fields)
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
func (o *HistoryOptions) diff(set *core.RevisionSet) error {
	var r revisions.Revision
	var ok bool
	if o.Revision > 0 {
		if r, ok = set.Find(o.Revision); !ok {
			return fmt.Errorf("%s has no revision %d; recorded revisions: %s", core.Describe(set.Obj, set.Kind), o.Revision, set.Numbers())
		}
	} else if r, ok = set.Previous(); !ok {
		return fmt.Errorf("%s has no earlier revision to compare with the live one; recorded revisions: %s", core.Describe(set.Obj, set.Kind), set.Numbers())
	}
	return core.PrintDiff(o.Session.IOStreams.Out, set, r, "")
}

// printData prints the history as data: -o json|yaml, or the
// RolloutRevisions with -o name.
func (o *HistoryOptions) printData(set *core.RevisionSet) error {
	if strings.ToLower(o.PrintFlags.Output) == "name" {
		for _, r := range set.Revs {
			if r.Name != "" {
				fmt.Fprintf(o.Session.IOStreams.Out, "rolloutrevision.rollout-guard.io/%s\n", r.Name)
			}
		}
		return nil
	}
	h := newRolloutHistory(set)
	for _, r := range set.Revs {
		e, err := entryOf(set, r, false)
		if err != nil {
			return err
		}
		h.Revisions = append(h.Revisions, e)
	}
	return o.printHistory(h)
}

func (o *HistoryOptions) printHistory(h *v1alpha1.RolloutHistory) error {
	p, err := o.PrintFlags.ToPrinter("")
	if err != nil {
		return err
	}
	return p.PrintObj(h, o.Session.IOStreams.Out)
}
