package history

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// Recorder writes revisions. It reads with a live reader, never a cache:
// the guard does not keep ControllerRevisions in memory, and a stale read
// would only cause a conflict.
type Recorder struct {
	// Client writes ControllerRevisions.
	Client client.Client
	// Reader reads them; the manager's APIReader.
	Reader client.Reader
}

// Record makes sure the ControllerRevision of snap for owner exists and
// carries rec, merged with what it already records. Recording the same
// revision twice changes nothing; identical content recorded under two
// revision numbers is one ControllerRevision listing both.
func (r *Recorder) Record(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record) error {
	_, _, err := r.record(ctx, owner, ownerGVK, snap, rec)
	return err
}

// record is Record; it returns the record stored for snap, and the highest
// revision number in owner's history when it had to list that history to
// number the content (0 when it did not list).
func (r *Recorder) record(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record) (stored revisions.Record, listedHighest int64, _ error) {
	desired := revisions.ControllerRevision(owner, ownerGVK, snap, rec)
	what := fmt.Sprintf("revision %d of %s %s/%s (ControllerRevision %s)", rec.Revision, ownerGVK.Kind, owner.GetNamespace(), owner.GetName(), desired.Name)
	err := retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		existing := &appsv1.ControllerRevision{}
		err := r.Reader.Get(ctx, client.ObjectKeyFromObject(desired), existing)
		if apierrors.IsNotFound(err) {
			numbered, highest, err := r.number(ctx, owner, snap, rec, nil)
			if err != nil {
				return err
			}
			listedHighest = max(listedHighest, highest)
			create := revisions.ControllerRevision(owner, ownerGVK, snap, numbered)
			if err := r.Client.Create(ctx, create); err != nil {
				return fmt.Errorf("recording %s: %w", what, err)
			}
			stored = numbered
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", what, err)
		}
		old, err := revisions.FromControllerRevision(existing)
		if err != nil {
			// A damaged record of the same name: replace it with what is known now.
			old = revisions.Revision{}
		}
		numbered := rec
		if rec.Revision != 0 && !slices.Contains(old.Record.History, rec.Revision) && old.Record.Revision != rec.Revision {
			// A number this content does not hold yet: it may belong to
			// other content (see number).
			var highest int64
			if numbered, highest, err = r.number(ctx, owner, snap, rec, &old); err != nil {
				return err
			}
			listedHighest = max(listedHighest, highest)
		}
		merged := revisions.Merge(old.Record, numbered)
		stored = merged
		want := revisions.ControllerRevision(owner, ownerGVK, snap, merged)
		if refused, ok := existing.Annotations[AnnotationRefusedOverrides]; ok {
			want.Annotations[AnnotationRefusedOverrides] = refused
		}
		if existing.Revision == want.Revision && reflect.DeepEqual(existing.Annotations, want.Annotations) &&
			reflect.DeepEqual(existing.Labels, want.Labels) && string(existing.Data.Raw) == string(want.Data.Raw) {
			return nil
		}
		existing.Revision = want.Revision
		existing.Annotations = want.Annotations
		existing.Labels = want.Labels
		existing.Data = want.Data
		existing.OwnerReferences = want.OwnerReferences
		if err := r.Client.Update(ctx, existing); err != nil {
			return fmt.Errorf("updating %s: %w", what, err)
		}
		return nil
	})
	return stored, listedHighest, err
}

// RecordReplaced records the revision an admitted change replaces (as
// Record) and returns the highest revision number the object's history
// holds, so the new revision is numbered above every recorded one —
// including one recorded for a change that slipped past the guard, which
// the object's own stamps do not know.
//
// It reads that number from the replaced content's own record, without
// listing the history (a List of ControllerRevisions scans the namespace,
// which costs the most of an admission with thousands of objects), when
// the record agrees with the stamps. That is enough because every number
// above the stamps is given to content the guard did not admit, recorded
// under that number, and the reconciler renumbers live content that came
// back after such a change (see Reconciler): so the replaced content's
// record holds the highest number, or numbering it lists the history.
func (r *Recorder) RecordReplaced(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record) (int64, error) {
	stored, listedHighest, err := r.record(ctx, owner, ownerGVK, snap, rec)
	if err != nil {
		return 0, err
	}
	return max(rec.Revision, stored.Revision, listedHighest), nil
}

// number returns the record under which snap is recorded: rec, unless
// rec's revision number already names other content in owner's history.
// That happens when a change became live without the guard admitting it
// (its webhook configurations were absent, or edited away): the object
// still carries the stamps of the revision before, so the stamped number
// belongs to that revision's content. Then the live content is a revision
// of its own: the one it is already recorded as (existing, when not nil),
// or a new number above every recorded one, author unknown (Unadmitted).
// It also returns the highest number the listed history holds.
func (r *Recorder) number(ctx context.Context, owner client.Object, snap revisions.Snapshot, rec revisions.Record, existing *revisions.Revision) (_ revisions.Record, highest int64, _ error) {
	if rec.Revision == 0 {
		return rec, 0, nil
	}
	revs, _, err := List(ctx, r.Reader, owner.GetNamespace(), string(owner.GetUID()), FromWatchCache())
	if err != nil {
		return revisions.Record{}, 0, err
	}
	highest = Highest(revs)
	holder := holderOf(revs, rec.Revision)
	if holder == "" || holder == snap.Hash {
		return rec, highest, nil
	}
	if existing != nil && existing.Record.Revision != 0 {
		out := existing.Record
		out.Restarts = rec.Restarts
		return out, highest, nil
	}
	out := Unadmitted(highest+1, time.Now())
	out.Restarts = rec.Restarts
	return out, highest, nil
}

// holderOf returns the content hash that holds revision number n in revs,
// "" when none does.
func holderOf(revs []revisions.Revision, n int64) string {
	for _, rev := range revs {
		if rev.Record.Revision == n || slices.Contains(rev.Record.History, n) {
			return rev.Snapshot.Hash
		}
	}
	return ""
}

// Highest returns the highest revision number recorded in revs, 0 for none.
func Highest(revs []revisions.Revision) int64 {
	var highest int64
	for _, rev := range revs {
		highest = max(highest, rev.Record.Revision)
		for _, n := range rev.Record.History {
			highest = max(highest, n)
		}
	}
	return highest
}

// Unadmitted is the record of content that became live without the guard
// admitting it (its webhook configurations were absent): revision n, author
// and field manager unknown, changed at the latest at seen.
func Unadmitted(n int64, seen time.Time) revisions.Record {
	return revisions.Record{
		Revision:    n,
		History:     []int64{n},
		ChangedAt:   seen.UTC().Truncate(time.Second),
		ChangeCause: UnadmittedCause,
		ChangeType:  revisions.ChangeAdopted,
	}
}

// UnadmittedCause is the change-cause of a revision the guard did not admit.
const UnadmittedCause = "recorded by rollout-guard: changed while rollout-guard was not admitting changes (author unknown)"

// List returns the recorded history of the object with the given UID in
// namespace, sorted by revision number, with one List request. Records that
// cannot be decoded are returned as errors alongside the good ones, so one
// damaged record never hides the rest. opts are added to the List request
// (e.g. FromWatchCache).
func List(ctx context.Context, reader client.Reader, namespace string, ownerUID string, opts ...client.ListOption) ([]revisions.Revision, []error, error) {
	list := &appsv1.ControllerRevisionList{}
	opts = append([]client.ListOption{client.InNamespace(namespace), client.MatchingLabels{revisions.LabelOwnerUID: ownerUID}}, opts...)
	if err := reader.List(ctx, list, opts...); err != nil {
		return nil, nil, fmt.Errorf("listing the ControllerRevisions of %s in %s: %w", ownerUID, namespace, err)
	}
	var out []revisions.Revision
	var bad []error
	for i := range list.Items {
		rev, err := revisions.FromControllerRevision(&list.Items[i])
		if err != nil {
			bad = append(bad, fmt.Errorf("ControllerRevision %s/%s: %w", namespace, list.Items[i].Name, err))
			continue
		}
		out = append(out, rev)
	}
	revisions.Sort(out)
	return out, bad, nil
}

// AnnotationRefusedOverrides lists, on the ControllerRevision of the live
// revision, the break-glass overrides that were asked by users outside the
// override groups and refused: JSON []RefusedOverride, the most recent
// MaxRefusedOverrides.
const AnnotationRefusedOverrides = revisions.Prefix + "refused-overrides"

// MaxRefusedOverrides is how many refused overrides one revision keeps.
const MaxRefusedOverrides = 10

// RefusedOverride is one refused break-glass override.
type RefusedOverride struct {
	// At is when it was asked.
	At time.Time `json:"at"`
	// By is the user who asked.
	By string `json:"by"`
	// Reason is the reason given.
	Reason string `json:"reason"`
	// Rules are the rules that refused the change.
	Rules []string `json:"rules"`
}

// RecordRefusedOverride records a refused override on the ControllerRevision
// of the live revision of owner (recording that revision first if needed).
func (r *Recorder) RecordRefusedOverride(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record, refused RefusedOverride) error {
	if err := r.Record(ctx, owner, ownerGVK, snap, rec); err != nil {
		return err
	}
	name := revisions.Name(owner.GetName(), snap.Hash)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cr := &appsv1.ControllerRevision{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, cr); err != nil {
			return fmt.Errorf("reading ControllerRevision %s/%s: %w", owner.GetNamespace(), name, err)
		}
		var list []RefusedOverride
		if raw := cr.Annotations[AnnotationRefusedOverrides]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &list); err != nil {
				list = nil // a damaged list is replaced rather than blocking the record
			}
		}
		list = append(list, refused)
		if len(list) > MaxRefusedOverrides {
			list = list[len(list)-MaxRefusedOverrides:]
		}
		data, err := json.Marshal(list)
		if err != nil {
			return fmt.Errorf("encoding refused overrides: %w", err)
		}
		if cr.Annotations == nil {
			cr.Annotations = map[string]string{}
		}
		cr.Annotations[AnnotationRefusedOverrides] = string(data)
		if err := r.Client.Update(ctx, cr); err != nil {
			return fmt.Errorf("recording a refused override on ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err)
		}
		return nil
	})
}

// FromWatchCache lets the API server answer a List of ControllerRevisions
// from its watch cache without first waiting for the cache to catch up with
// etcd (resourceVersion "0"). A consistent List waits about 20 ms for that
// under load (apiserver_watch_cache_read_wait_seconds in docs/benchmarks.md),
// most of what numbering a revision costs inside an admission request. The
// answer may miss a record made in the last moments; numbering reads
// records made at least one change earlier (the content a number was given
// to, before the change that replaced it), and pruning keeps what it does
// not see. A new option each call: the client writes into it.
func FromWatchCache() client.ListOption {
	return &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}
}
