package core

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
)

// Revisions of unknown author.
//
// The guard stamps who made every change it admits. Content it did not
// admit has no author: a change made while its webhooks were not called
// (unregistered, or the guard bypassed), which its reconciler records
// afterwards, and content that was live before the guard saw the object,
// which its reconciler adopts as revision 1. Nothing says such content was
// meant — whoever could write the object while the guard was not looking
// could have put anything in it, kubeadm commands and files included — so
// history marks it and undo to it needs --force.

// AuthorUnknownOf says why nothing records who made rec's content live (one
// of v1alpha1's Author* values), "" when rec names its author.
func AuthorUnknownOf(rec revisions.Record) string {
	switch {
	case rec.ChangedBy != "":
		return ""
	case rec.ChangeCause == history.UnadmittedCause:
		return v1alpha1.AuthorUnadmitted
	case rec.ChangeType == revisions.ChangeAdopted:
		return v1alpha1.AuthorPredatesGuard
	}
	return v1alpha1.AuthorNotRecorded
}

// AuthorUnknownReason says in words why a revision has no author, for
// messages: why is an AuthorUnknownOf value.
func AuthorUnknownReason(why string) string {
	switch why {
	case v1alpha1.AuthorUnadmitted:
		return "changed while rollout-guard was not admitting changes (its webhooks were not called), recorded afterwards by its reconciler"
	case v1alpha1.AuthorPredatesGuard:
		return "live before rollout-guard saw the object (made before the guard was installed, or created while it was down), adopted by its reconciler"
	}
	return "its record names no author"
}

// unknownAuthorCell is the CHANGED-BY of a revision of unknown author in a
// history table; unknownAuthorNote explains it below the table.
const unknownAuthorCell = "unknown (*)"

// ChangedByCell is the CHANGED-BY column of a revision.
func ChangedByCell(rec revisions.Record) string {
	if AuthorUnknownOf(rec) != "" {
		return unknownAuthorCell
	}
	return rec.ChangedBy
}

// UnknownAuthorRevision is one revision of unknown author in a table.
type UnknownAuthorRevision struct {
	// Object names the revision's object in a cluster's table
	// ("kcp/c1-control-plane"), "" in an object's own.
	Object string
	Rev    revisions.Revision
}

// WriteUnknownAuthorNote prints, below a history table, what its
// "unknown (*)" means: one line of what follows from it (read the revision
// first; undo to it needs --force), then one per revision of unknown
// author with why. show is the command that prints one revision in full.
// Nothing is printed when every revision has an author.
func WriteUnknownAuthorNote(out io.Writer, revs []UnknownAuthorRevision, show string) error {
	if len(revs) == 0 {
		return nil
	}
	these, its, it := "this revision", "its", "it"
	if len(revs) > 1 {
		these, its, it = "these revisions", "their", "one"
	}
	fmt.Fprintf(out, "(*) author unknown: nothing records who made %s or that %s content was meant; read %s with %s --revision N before rolling back to it (rollout undo to it needs --force):\n", these, its, it, show)
	for _, r := range revs {
		what := Label(r.Rev)
		if r.Object != "" {
			what = r.Object + " " + what
		}
		if _, err := fmt.Fprintf(out, "    %s: %s\n", what, AuthorUnknownReason(AuthorUnknownOf(r.Rev.Record))); err != nil {
			return err
		}
	}
	return nil
}

// UnknownAuthorError refuses an undo to a revision of unknown author
// without --force: it names the object, the revision and why it has no
// author, shows what the undo would change, and the ways out.
type UnknownAuthorError struct {
	// ID names the object: "KubeadmControlPlane demo/c1-control-plane".
	ID string
	// Target is the revision undo would roll back to.
	Target revisions.Revision
	// Diff is what the rollback would change (PrintDiff).
	Diff string
	// Show is the command that prints the revision in full.
	Show string
	// Authored are the other revisions' numbers that have an author, for
	// the way out ("" when there are none).
	Authored string
}

// Error names the object, the revision, why its author is unknown, what
// the undo would change, and the way out.
func (e UnknownAuthorError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cannot undo %s to %s: its author is unknown (%s), so nothing says its content was meant, and the rollback would apply it to every machine; nothing was changed. It would change:\n",
		e.ID, Label(e.Target), AuthorUnknownReason(AuthorUnknownOf(e.Target.Record)))
	b.WriteString(e.Diff)
	fmt.Fprintf(&b, "Read every line above (%s --revision %d prints the revision in full); to roll back to it anyway, add --force", e.Show, e.Target.Record.Revision)
	if e.Authored != "" {
		fmt.Fprintf(&b, "; or roll back to a revision whose author is known with --to-revision N (%s)", e.Authored)
	}
	return b.String()
}

// ExitCode is ExitError, as for every change the CLI refuses to make
// without an explicit flag (a GitOps-managed object without --force).
func (e UnknownAuthorError) ExitCode() int { return ExitError }

// AuthoredNumbers lists the numbers of set's revisions whose author is
// known, other than the live content: "revisions 1, 3 have one".
func AuthoredNumbers(set *RevisionSet) string {
	var nums []string
	for _, r := range set.Revs {
		if r.Snapshot.Hash == set.Live.Hash || AuthorUnknownOf(r.Record) != "" {
			continue
		}
		nums = append(nums, strconv.FormatInt(r.Record.Revision, 10))
	}
	switch len(nums) {
	case 0:
		return ""
	case 1:
		return "revision " + nums[0] + " has one"
	}
	return "revisions " + strings.Join(nums, ", ") + " have one"
}
