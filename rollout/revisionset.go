package rollout

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// revisionSet is an object's recorded history with its live revision
// merged in: the guard records a revision when it is replaced, and its
// reconciler records the live one shortly after a change, so the live
// object's own stamps may be newer than the records.
type revisionSet struct {
	obj  client.Object
	kind Kind
	// live is the live content.
	live revisions.Snapshot
	// revs are sorted by Record.Revision; the live content is among them
	// when it is stamped (Name is "" when not yet recorded).
	revs []revisions.Revision
	// bad are records that could not be decoded.
	bad []error
	// stale is set when the live object's stamps name a revision whose
	// record holds other content: the object changed since they were
	// written, without rollout-guard admitting it, and the guard's
	// reconciler has not recorded the live content yet. The stamps are
	// then not the live content's (see loadHistory).
	stale int64
}

// loadHistory reads an object's history with one List request.
func (c *cli) loadHistory(ctx context.Context, cl *clients, obj client.Object, purpose string) (*revisionSet, error) {
	hk, ok := history.KindOf(obj)
	if !ok {
		return nil, fmt.Errorf("cannot %s: %T has no revision history", purpose, obj)
	}
	live, err := hk.Snapshot(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot %s: %w", purpose, err)
	}
	revs, bad, err := history.List(ctx, cl.client, obj.GetNamespace(), string(obj.GetUID()))
	if err != nil {
		return nil, call{verb: "list", gr: appsv1.SchemeGroupVersion.WithResource("controllerrevisions").GroupResource(), kind: "ControllerRevision",
			namespace: obj.GetNamespace(), purpose: purpose}.explain(err)
	}
	s := &revisionSet{obj: obj, kind: kindOf(obj), live: live, revs: revs, bad: bad}
	if rec := policy.StampsOf(obj); rec.Revision > 0 {
		if other, ok := s.find(rec.Revision); ok && other.Snapshot.Hash != live.Hash {
			// Stamps left over from before a change the guard did not
			// admit: they name other content's revision, and crediting
			// them to the live content would give it that content's
			// number and author.
			if _, recorded := s.current(); !recorded {
				s.stale = rec.Revision
			}
			return s, nil
		}
		merged := false
		for i := range s.revs {
			if s.revs[i].Snapshot.Hash == live.Hash {
				s.revs[i].Record = revisions.Merge(s.revs[i].Record, rec)
				merged = true
			}
		}
		if !merged {
			rec.History = []int64{rec.Revision}
			s.revs = append(s.revs, revisions.Revision{Snapshot: live, Record: rec})
		}
		revisions.Sort(s.revs)
	}
	return s, nil
}

// warnStale warns, when the live content is newer than its stamps and not
// recorded yet (stale), that it is not among the revisions shown.
func (s *revisionSet) warnStale(c *cli) {
	if s.stale == 0 {
		return
	}
	c.warnf("the live content of %s is not recorded yet: it changed after rollout-guard stamped revision %d, without the guard admitting the change (its author is unknown); the guard's reconciler records it shortly, and until then it is not among the revisions shown", describe(s.obj, s.kind), s.stale)
}

// recorded reports whether the guard recorded anything for the object.
func (s *revisionSet) recorded() bool { return len(s.revs) > 0 }

// current is the live revision, false when the live content is not recorded.
func (s *revisionSet) current() (revisions.Revision, bool) {
	for _, r := range s.revs {
		if r.Snapshot.Hash == s.live.Hash {
			return r, true
		}
	}
	return revisions.Revision{}, false
}

// liveNumber is the live revision's number, 0 when unknown.
func (s *revisionSet) liveNumber() int64 {
	if r, ok := s.current(); ok {
		return r.Record.Revision
	}
	return 0
}

// find returns the revision whose content was live under number n.
func (s *revisionSet) find(n int64) (revisions.Revision, bool) {
	for _, r := range s.revs {
		if r.Record.Revision == n || slices.Contains(r.Record.History, n) {
			return r, true
		}
	}
	return revisions.Revision{}, false
}

// previous is the most recent revision whose content differs from the live one.
func (s *revisionSet) previous() (revisions.Revision, bool) {
	for i := len(s.revs) - 1; i >= 0; i-- {
		if s.revs[i].Snapshot.Hash != s.live.Hash {
			return s.revs[i], true
		}
	}
	return revisions.Revision{}, false
}

// numbers lists every recorded revision number, for messages: "1, 2, 4".
func (s *revisionSet) numbers() string {
	var all []int64
	for _, r := range s.revs {
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

// label names a revision in messages: "revision 2", or "revision 4 (also
// live as 2)" for content that was live under several numbers.
func label(r revisions.Revision) string {
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

// printDiff prints the fields in which revision r differs from the live
// object, live first.
func printDiff(out io.Writer, set *revisionSet, r revisions.Revision, title string) error {
	changes, _, err := fieldChanges(set.live, r.Snapshot)
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
	return writeFieldTable(out, "", liveCol, fmt.Sprintf("REVISION %d", r.Record.Revision), changes)
}
