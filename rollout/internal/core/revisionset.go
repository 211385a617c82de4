package core

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// RevisionSet is an object's recorded history with its live revision
// merged in: the guard records a revision when it is replaced, and its
// reconciler records the live one shortly after a change, so the live
// object's own stamps may be newer than the records.
type RevisionSet struct {
	// Obj is the object as read, Kind its kind.
	Obj  client.Object
	Kind Kind
	// Live is the live content.
	Live revisions.Snapshot
	// Revs are sorted by Record.Revision; the live content is among them
	// when it is stamped (Name is "" when not yet recorded).
	Revs []revisions.Revision
	// Bad are records that could not be decoded.
	Bad []error
	// stale is set when the live object's stamps name a revision whose
	// record holds other content: the object changed since they were
	// written, without rollout-guard admitting it, and the guard's
	// reconciler has not recorded the live content yet. The stamps are
	// then not the live content's (see LoadHistory).
	stale int64
}

// LoadHistory reads an object's history with one List request.
func (c *Session) LoadHistory(ctx context.Context, cl *Clients, obj client.Object, purpose string) (*RevisionSet, error) {
	hk, ok := kinds.HistoryOf(obj)
	if !ok {
		return nil, fmt.Errorf("cannot %s: %T has no revision history", purpose, obj)
	}
	live, err := hk.Snapshot(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	revs, bad, err := history.List(ctx, cl.Client, obj.GetNamespace(), string(obj.GetUID()))
	if err != nil {
		return nil, Call{Verb: "list", GR: rgv1alpha1.Resource.GroupResource(), Kind: "RolloutRevision",
			Namespace: obj.GetNamespace(), Purpose: purpose}.Explain(err)
	}
	s := &RevisionSet{Obj: obj, Kind: KindOf(obj), Live: live, Revs: revs, Bad: bad}
	if rec := revisions.StampsOf(obj); rec.Revision > 0 {
		if other, ok := s.Find(rec.Revision); ok && other.Snapshot.Hash != live.Hash {
			// Stamps left over from before a change the guard did not
			// admit: they name other content's revision, and crediting
			// them to the live content would give it that content's
			// number and author.
			if _, recorded := s.Current(); !recorded {
				s.stale = rec.Revision
			}
			return s, nil
		}
		// Stamps the guard did not sign (an object created while it was
		// down, carrying its client's stamps) add nothing to the guard's
		// record of the live content: it stands. The CLI holds no key, so
		// it cannot check a signature; the guard does, and records such
		// content as of unknown author, under a number of its own.
		signed := obj.GetAnnotations()[revisions.AnnotationSignature] != ""
		merged := false
		for i := range s.Revs {
			if s.Revs[i].Snapshot.Hash == live.Hash {
				if signed || s.Revs[i].Record.Revision == rec.Revision || slices.Contains(s.Revs[i].Record.History, rec.Revision) {
					s.Revs[i].Record = revisions.Merge(s.Revs[i].Record, rec)
				}
				merged = true
			}
		}
		if !merged {
			rec.History = []int64{rec.Revision}
			s.Revs = append(s.Revs, revisions.Revision{Snapshot: live, Record: rec})
		}
		revisions.Sort(s.Revs)
	}
	return s, nil
}

// WarnStale warns, when the live content is newer than its stamps and not
// recorded yet (stale), that it is not among the revisions shown.
func (s *RevisionSet) WarnStale(c *Session) {
	if s.stale == 0 {
		return
	}
	c.Warnf("the live content of %s is not recorded yet: it changed after rollout-guard stamped revision %d, without the guard admitting the change (its author is unknown); the guard's reconciler records it shortly, and until then it is not among the revisions shown", Describe(s.Obj, s.Kind), s.stale)
}

// Recorded reports whether the guard recorded anything for the object.
func (s *RevisionSet) Recorded() bool { return len(s.Revs) > 0 }

// Current is the live revision, false when the live content is not recorded.
func (s *RevisionSet) Current() (revisions.Revision, bool) {
	for _, r := range s.Revs {
		if r.Snapshot.Hash == s.Live.Hash {
			return r, true
		}
	}
	return revisions.Revision{}, false
}

// LiveNumber is the live revision's number, 0 when unknown.
func (s *RevisionSet) LiveNumber() int64 {
	if r, ok := s.Current(); ok {
		return r.Record.Revision
	}
	return 0
}

// Find returns the revision whose content was live under number n.
func (s *RevisionSet) Find(n int64) (revisions.Revision, bool) {
	for _, r := range s.Revs {
		if r.Record.Revision == n || slices.Contains(r.Record.History, n) {
			return r, true
		}
	}
	return revisions.Revision{}, false
}

// Previous is the most recent revision whose content differs from the live one.
func (s *RevisionSet) Previous() (revisions.Revision, bool) {
	for i := len(s.Revs) - 1; i >= 0; i-- {
		if s.Revs[i].Snapshot.Hash != s.Live.Hash {
			return s.Revs[i], true
		}
	}
	return revisions.Revision{}, false
}

// Numbers lists every recorded revision number, for messages: "1, 2, 4".
func (s *RevisionSet) Numbers() string {
	var all []int64
	for _, r := range s.Revs {
		all = append(all, r.Record.History...)
		all = append(all, r.Record.Revision)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	parts := make([]string, 0, len(all))
	for _, n := range all {
		if n > 0 {
			parts = append(parts, strconv.FormatInt(n, 10))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// Label names a revision in messages: "revision 2", or "revision 4 (also
// live as 2)" for content that was live under several numbers.
func Label(r revisions.Revision) string {
	s := fmt.Sprintf("revision %d", r.Record.Revision)
	var others []string
	for _, n := range r.Record.History {
		if n != r.Record.Revision {
			others = append(others, strconv.FormatInt(n, 10))
		}
	}
	if len(others) > 0 {
		s += " (also " + strings.Join(others, ", ") + ")"
	}
	return s
}

// PrintDiff prints the fields in which revision r differs from the live
// object, live first.
func PrintDiff(out io.Writer, set *RevisionSet, r revisions.Revision, title string) error {
	changes, _, err := FieldChanges(set.Live, r.Snapshot)
	if err != nil {
		return fmt.Errorf("comparing %s with the live object: %w", Label(r), err)
	}
	liveCol := "LIVE"
	if n := set.LiveNumber(); n > 0 {
		liveCol = fmt.Sprintf("LIVE (REVISION %d)", n)
	}
	if title != "" {
		fmt.Fprintln(out, title)
	}
	if len(changes) == 0 {
		_, err := fmt.Fprintf(out, "%s: %s matches the live object\n", Describe(set.Obj, set.Kind), Label(r))
		return err
	}
	return WriteFieldTable(out, "", liveCol, fmt.Sprintf("REVISION %d", r.Record.Revision), changes)
}
