package history

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// Recorder writes revisions. It reads what is recorded from its Index
// when it has one, else (and whenever the Index turns out to be behind: a
// conflict, or a create that finds the record made) with a live reader.
type Recorder struct {
	// Client writes RolloutRevisions.
	Client client.Client
	// Reader reads them; the manager's APIReader.
	Reader client.Reader
	// Index, when not nil, answers what is recorded without a request; a
	// first attempt reads it, a retry reads Reader.
	Index *Index

	// recorded spares reading back what this Recorder has just recorded.
	recorded memo
	// inFlight lets one recording of a content of an object run at a time.
	inFlight inFlight
}

// Record makes sure the RolloutRevision of snap for owner exists and
// carries rec, merged with what it already records. Recording the same
// revision twice changes nothing; identical content recorded under two
// revision numbers is one RolloutRevision listing both.
func (r *Recorder) Record(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record) error {
	_, err := r.record(ctx, owner, ownerGVK, snap, rec)
	return err
}

// recorded is what one call of record stored and learnt.
type recorded struct {
	// stored is the record stored for the content.
	stored revisions.Record
	// listed is owner's history when record listed it to number the
	// content, with the content's own record as stored; nil when it did not
	// list.
	listed []revisions.Revision
	// above is the number of the content's AnnotationNumberedAbove: a
	// number given to other content while this content's number was
	// stamped on the object; 0 when none.
	above int64
}

// listedHighest is the highest revision number of the listed history, 0
// when record did not list it.
func (r recorded) listedHighest() int64 { return Highest(r.listed) }

// record is Record; it also returns what it stored, and owner's history
// when it had to list it.
func (r *Recorder) record(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record) (recorded, error) {
	defer r.inFlight.lock(memoKey(owner, snap.Hash))()
	if known, ok := r.recorded.covered(owner, snap.Hash, rec); ok {
		return recorded{stored: known}, nil
	}
	var out recorded
	what := fmt.Sprintf("revision %d of %s %s/%s (RolloutRevision %s)", rec.Revision, ownerGVK.Kind, owner.GetNamespace(), owner.GetName(), revisions.Name(owner.GetName(), snap.Hash))
	// NotFound too: pruning (by any replica) may delete the content's
	// RolloutRevision between the read and the update below; read again
	// and create it.
	attempt := 0
	err := retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)
	}, func() error {
		out = recorded{} // what an earlier attempt learnt may no longer hold
		attempt++
		if attempt == 1 && r.Index.Synced() {
			done, ok, err := r.recordFromIndex(ctx, owner, ownerGVK, snap, rec, what)
			if ok || err != nil {
				out = done
				return err
			}
		}
		var err error
		out, err = r.recordFromAPI(ctx, owner, ownerGVK, snap, rec, what)
		return err
	})
	if err != nil {
		recordErrorsTotal.WithLabelValues(ownerGVK.Kind).Inc()
		return recorded{}, err
	}
	r.recorded.remember(owner, snap.Hash, out.stored)
	return out, nil
}

// recordFromAPI is one attempt of record that reads what is recorded from
// the API server. The content's record is the one, among the names it may
// have (revisions.Names), whose data has the content's digest: a record of
// other content that shares the short hash is another revision, never this
// one. With none, the content is recorded under the first name that no
// record holds, or that a damaged record holds (replaced with what is
// known now).
func (r *Recorder) recordFromAPI(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record, what string) (recorded, error) {
	var slot *rgv1alpha1.RolloutRevision // the name to record under: free, or damaged
	slotFree := false
	for _, name := range revisions.Names(owner.GetName(), snap.Hash) {
		existing := &rgv1alpha1.RolloutRevision{}
		err := r.Reader.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, existing)
		if apierrors.IsNotFound(err) {
			if slot == nil {
				slot, slotFree = &rgv1alpha1.RolloutRevision{ObjectMeta: metav1.ObjectMeta{Namespace: owner.GetNamespace(), Name: name}}, true
			}
			continue
		}
		if err != nil {
			return recorded{}, fmt.Errorf("reading %s: %w", what, err)
		}
		old, err := revisions.FromRolloutRevision(existing)
		if err != nil {
			// A damaged record: its content is unknown. Replace it if the
			// content is recorded under no other name.
			if slot == nil {
				slot = existing
			}
			continue
		}
		if !old.Snapshot.Same(snap) {
			continue // other content of the same short hash
		}
		return r.updateRecord(ctx, owner, ownerGVK, snap, rec, old, existing, what)
	}
	switch {
	case slot == nil:
		return recorded{}, fmt.Errorf("recording %s: every name it may have (%v) holds the record of other content", what, revisions.Names(owner.GetName(), snap.Hash))
	case slotFree:
		return r.create(ctx, owner, ownerGVK, snap, rec, slot.Name, false, what)
	default:
		return r.updateRecord(ctx, owner, ownerGVK, snap, rec, revisions.Revision{Name: slot.Name}, slot, what)
	}
}

// updateRecord folds rec into old, the record of snap that existing (read
// from the API server) holds, and updates existing when that changes it.
func (r *Recorder) updateRecord(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record, old revisions.Revision, existing *rgv1alpha1.RolloutRevision, what string) (recorded, error) {
	out, want, err := r.merge(ctx, owner, ownerGVK, snap, rec, old, existing.Annotations, existing.Labels, false)
	if err != nil {
		return recorded{}, err
	}
	if existing.Revision == want.Revision && reflect.DeepEqual(existing.Annotations, want.Annotations) &&
		reflect.DeepEqual(existing.Labels, want.Labels) && string(existing.Data.Raw) == string(want.Data.Raw) {
		return out, nil
	}
	existing.Revision = want.Revision
	existing.Annotations = want.Annotations
	existing.Labels = want.Labels
	existing.Data = want.Data
	existing.OwnerReferences = want.OwnerReferences
	if err := r.Client.Update(ctx, existing); err != nil {
		return recorded{}, fmt.Errorf("updating %s: %w", what, err)
	}
	return out, nil
}

// withRecord returns revs with rev in place of any revision of the same
// content, sorted.
func withRecord(revs []revisions.Revision, rev revisions.Revision) []revisions.Revision {
	out := make([]revisions.Revision, 0, len(revs)+1)
	for _, r := range revs {
		if !r.Snapshot.Same(rev.Snapshot) {
			out = append(out, r)
		}
	}
	out = append(out, rev)
	revisions.Sort(out)
	return out
}

// create numbers snap (listing owner's history from the Index when
// fromIndex, see number) and creates its RolloutRevision, named name.
func (r *Recorder) create(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record, name string, fromIndex bool, what string) (recorded, error) {
	numbered, listed, err := r.number(ctx, owner, snap, rec, nil, fromIndex)
	if err != nil {
		return recorded{}, err
	}
	cr := revisions.RolloutRevision(owner, ownerGVK, snap, numbered)
	cr.Name = name
	labelCluster(cr.Labels, nil, owner, snap)
	if err := r.Client.Create(ctx, cr); err != nil {
		return recorded{}, fmt.Errorf("recording %s: %w", what, err)
	}
	out := recorded{stored: numbered}
	if listed != nil {
		out.listed = withRecord(listed, revisions.Revision{Snapshot: snap, Record: numbered, Name: cr.Name})
	}
	return out, nil
}

// merge folds rec into old, the record of snap as read (from the API
// server, or from the Index when fromIndex), numbering it anew when rec's
// number may name other content (see number). It returns what is then
// stored and the RolloutRevision that records it, keeping the
// annotations of the record as read (existing) that rec does not make, and
// the Cluster its labels (existingLabels) name (labelCluster).
func (r *Recorder) merge(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record, old revisions.Revision, existing, existingLabels map[string]string, fromIndex bool) (recorded, *rgv1alpha1.RolloutRevision, error) {
	var out recorded
	numbered := rec
	if rec.Revision != 0 && !slices.Contains(old.Record.History, rec.Revision) && old.Record.Revision != rec.Revision {
		// A number this content does not hold yet: it may belong to
		// other content (see number).
		var err error
		if numbered, out.listed, err = r.number(ctx, owner, snap, rec, &old, fromIndex); err != nil {
			return recorded{}, nil, err
		}
	}
	merged := revisions.Merge(old.Record, numbered)
	out.stored = merged
	want := revisions.RolloutRevision(owner, ownerGVK, snap, merged)
	if old.Name != "" {
		want.Name = old.Name // the name the record has: Name, or LongName
	}
	labelCluster(want.Labels, existingLabels, owner, snap)
	if out.listed != nil {
		out.listed = withRecord(out.listed, revisions.Revision{Snapshot: snap, Record: merged, Name: want.Name})
	}
	for _, keep := range []string{AnnotationRefusedOverrides, AnnotationNumberedAbove} {
		if v, ok := existing[keep]; ok {
			want.Annotations[keep] = v
		}
	}
	if _, ok := want.Annotations[revisions.AnnotationRun]; !ok && len(snap.Data) == 0 {
		// snap read from the record's metadata (Recorder.holds): what it
		// runs is the record's, its data unchanged.
		if v, ok := existing[revisions.AnnotationRun]; ok {
			want.Annotations[revisions.AnnotationRun] = v
		}
	}
	out.above = numberedAbove(existing)
	return out, want, nil
}

// RecordReplaced records the revision an admitted change replaces (as
// Record) and returns the highest revision number the object's history
// holds, so the new revision is numbered above every recorded one —
// including one recorded for a change that slipped past the guard, which
// the object's own stamps do not know.
//
// It reads that number from the replaced content's own record, without
// listing the history (a List of RolloutRevisions scans the namespace,
// which costs the most of an admission with thousands of objects), when
// the record agrees with the stamps. That is enough because every number
// above the stamps is given to content the guard did not admit, recorded
// under that number, and the reconciler renumbers live content that came
// back after such a change (see Reconciler): so the replaced content's
// record holds the highest number, or numbering it lists the history.
func (r *Recorder) RecordReplaced(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record) (int64, error) {
	out, err := r.record(ctx, owner, ownerGVK, snap, rec)
	if err != nil {
		return 0, err
	}
	return max(rec.Revision, out.stored.Revision, out.listedHighest(), out.above), nil
}

// AnnotationNumberedAbove is set on the RolloutRevision of the content
// whose number the object carried when other content became live without
// the guard and was numbered above it (see number): the highest such
// number. The object may come back to this content, still stamped with its
// number, before the reconciler renumbers it; the next admitted change,
// which reads this record, is then numbered above the mark rather than
// reusing the number of the unadmitted content.
const AnnotationNumberedAbove = revisions.Prefix + "numbered-above"

// numberedAbove reads the AnnotationNumberedAbove of a RolloutRevision's
// annotations, 0 when absent or malformed.
func numberedAbove(annotations map[string]string) int64 {
	n, err := strconv.ParseInt(annotations[AnnotationNumberedAbove], 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// markNumberedAbove raises the AnnotationNumberedAbove of the
// RolloutRevision name to n.
func (r *Recorder) markNumberedAbove(ctx context.Context, namespace, name string, n int64) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cr := &rgv1alpha1.RolloutRevision{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cr); err != nil {
			return fmt.Errorf("reading RolloutRevision %s/%s: %w", namespace, name, err)
		}
		if numberedAbove(cr.Annotations) >= n {
			return nil
		}
		if cr.Annotations == nil {
			cr.Annotations = map[string]string{}
		}
		cr.Annotations[AnnotationNumberedAbove] = strconv.FormatInt(n, 10)
		if err := r.Client.Update(ctx, cr); err != nil {
			return fmt.Errorf("marking RolloutRevision %s/%s numbered above by %d: %w", namespace, name, n, err)
		}
		return nil
	})
}

// number returns the record under which snap is recorded: rec, unless
// rec's revision number already names other content in owner's history.
// That happens when a change became live without the guard admitting it
// (its webhook configurations were absent, or edited away): the object
// still carries the stamps of the revision before, so the stamped number
// belongs to that revision's content. Then the live content is a revision
// of its own: the one it is already recorded as (existing, when not nil),
// or a new number above every recorded one, author unknown (Unadmitted).
// It also returns the history it listed (nil when it listed none).
//
// fromIndex lists the history from the Index (ok is false when it cannot
// answer); otherwise, or then, from the API server.
func (r *Recorder) number(ctx context.Context, owner client.Object, snap revisions.Snapshot, rec revisions.Record, existing *revisions.Revision, fromIndex bool) (_ revisions.Record, listed []revisions.Revision, _ error) {
	if rec.Revision == 0 {
		return rec, nil, nil
	}
	var revs []revisions.Revision
	ok := false
	if fromIndex {
		var err error
		if revs, ok, err = r.Index.List(ctx, owner.GetNamespace(), string(owner.GetUID())); err != nil {
			return revisions.Record{}, nil, err
		}
	}
	if !ok {
		var err error
		if revs, _, err = List(ctx, r.Reader, owner.GetNamespace(), string(owner.GetUID()), FromWatchCache()); err != nil {
			return revisions.Record{}, nil, err
		}
	}
	if revs == nil {
		revs = []revisions.Revision{} // listed, and empty
	}
	holder := holderOf(revs, rec.Revision)
	if holder == "" || holder == snap.Hash {
		return rec, revs, nil
	}
	if existing != nil && existing.Record.Revision != 0 {
		out := existing.Record
		out.Restarts = rec.Restarts
		return out, revs, nil
	}
	out := Unadmitted(Highest(revs)+1, time.Now())
	out.Restarts = rec.Restarts
	// The object may come back to the holder's content still stamped with
	// its number: leave the new number on the holder's record, which the
	// next admitted change reads.
	if name := nameOf(revs, holder); name != "" {
		if err := r.markNumberedAbove(ctx, owner.GetNamespace(), name, out.Revision); err != nil {
			return revisions.Record{}, nil, err
		}
	}
	return out, revs, nil
}

// nameOf returns the RolloutRevision name of the content hash in revs.
func nameOf(revs []revisions.Revision, hash string) string {
	for _, rev := range revs {
		if rev.Snapshot.Hash == hash {
			return rev.Name
		}
	}
	return ""
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
	list := &rgv1alpha1.RolloutRevisionList{}
	opts = append([]client.ListOption{client.InNamespace(namespace), client.MatchingLabels{revisions.LabelOwnerUID: ownerUID}}, opts...)
	if err := reader.List(ctx, list, opts...); err != nil {
		return nil, nil, fmt.Errorf("listing the RolloutRevisions of %s in %s: %w", ownerUID, namespace, err)
	}
	var out []revisions.Revision
	var bad []error
	for i := range list.Items {
		rev, err := revisions.FromRolloutRevision(&list.Items[i])
		if err != nil {
			bad = append(bad, fmt.Errorf("RolloutRevision %s/%s: %w", namespace, list.Items[i].Name, err))
			continue
		}
		out = append(out, rev)
	}
	revisions.Sort(out)
	return out, bad, nil
}

// AnnotationRefusedOverrides lists, on the RolloutRevision of the live
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

// RecordRefusedOverride records a refused override on the RolloutRevision
// of the live revision of owner (recording that revision first if needed).
func (r *Recorder) RecordRefusedOverride(ctx context.Context, owner client.Object, ownerGVK schema.GroupVersionKind, snap revisions.Snapshot, rec revisions.Record, refused RefusedOverride) error {
	if err := r.Record(ctx, owner, ownerGVK, snap, rec); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cr, err := r.readRecordOf(ctx, owner, snap)
		if err != nil {
			return err
		}
		var list []RefusedOverride
		if raw := cr.Annotations[AnnotationRefusedOverrides]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &list); err != nil {
				list = nil // a damaged list is replaced rather than blocking the record
			}
		}
		refused.By, refused.Reason = revisions.Bound(refused.By), revisions.Bound(refused.Reason)
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
			return fmt.Errorf("recording a refused override on RolloutRevision %s/%s: %w", cr.Namespace, cr.Name, err)
		}
		return nil
	})
}

// readRecordOf reads, from the API server, the RolloutRevision that
// records snap for owner: the one among the names it may have
// (revisions.Names) whose data has snap's digest.
func (r *Recorder) readRecordOf(ctx context.Context, owner client.Object, snap revisions.Snapshot) (*rgv1alpha1.RolloutRevision, error) {
	names := revisions.Names(owner.GetName(), snap.Hash)
	for _, name := range names {
		cr := &rgv1alpha1.RolloutRevision{}
		err := r.Reader.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, cr)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading RolloutRevision %s/%s: %w", owner.GetNamespace(), name, err)
		}
		if rev, err := revisions.FromRolloutRevision(cr); err == nil && rev.Snapshot.Same(snap) {
			return cr, nil
		}
	}
	return nil, apierrors.NewNotFound(rgv1alpha1.Resource.GroupResource(), names[0])
}

// FromWatchCache lets the API server answer a List of RolloutRevisions
// from its watch cache without first waiting for the cache to catch up with
// etcd (resourceVersion "0"). A consistent List waits for that under load
// (apiserver_watch_cache_read_wait_seconds in test/bench/history.md), most of
// what numbering a revision costs inside an admission request. The
// answer may miss a record made in the last moments; numbering reads
// records made at least one change earlier (the content a number was given
// to, before the change that replaced it), and pruning keeps what it does
// not see. A new option each call: the client writes into it.
func FromWatchCache() client.ListOption {
	return &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}
}

// labelCluster sets, in labels, the record of snap for owner,
// revisions.LabelCluster: the Cluster the control plane owner belongs to
// as the API server stored it (kinds.Kind.ClusterName: its owner Cluster,
// else its cluster-name label), or the one the record names already
// (existing, the record's labels as read; nil for a new record), which
// never changes. owner is the stored object the Recorder records (the
// cache's copy, a read, or a request's old object once verified against
// what is stored), never a request's new object. Nothing for a revision
// that is not of a control plane, or whose control plane names no Cluster.
//
// Why once: the label is what finds a Cluster's control-plane history
// after the control plane is gone (policy, a control plane created anew).
// Moving it with the control plane's later labels would let whoever edits
// a label (not a field the guard polices) take a run out of its Cluster's
// history before deleting the control plane.
func labelCluster(labels, existing map[string]string, owner client.Object, snap revisions.Snapshot) {
	if snap.Kind != revisions.KindKubeadmControlPlane && snap.Kind != revisions.KindContractControlPlane {
		return
	}
	if v := existing[revisions.LabelCluster]; v != "" {
		labels[revisions.LabelCluster] = v
		return
	}
	kind, ok := kinds.Of(owner)
	if !ok || kind.ClusterName == nil {
		return
	}
	if name := revisions.ClusterLabelValue(kind.ClusterName(owner)); name != "" {
		labels[revisions.LabelCluster] = name
	}
}
