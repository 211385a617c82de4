package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// Stamps tells the revision stamps the guard wrote from those it did not.
//
// Why: creates fail open (an outage of the guard must never stop Cluster
// API from creating a cluster), so an object created while the guard was
// down carries whatever stamps its client wrote — a revision number, an
// author, a change-cause, a highest-run. Those are not history. The guard
// signs every stamp set it writes (revisions.AnnotationSignature, with a
// key only it holds); stamps whose signature verifies are history, and so
// are stamps that agree with a record already kept for the object's
// content — the record of an earlier release of the guard (stamps it
// wrote before it signed them) or one `clusterctl move` or a restore
// brought along (while no guard ran on the target to sign the carried
// stamps), made by whoever may create RolloutRevisions, who could write
// that history anyway. Every other stamp is of unknown author and number.
type Stamps struct {
	// Key verifies signatures. Empty, no stamp verifies by signature.
	Key revisions.StampKey
	// Recorder reads what is recorded of an object's content.
	Recorder *Recorder
}

// Of returns the record obj's stamps make for its content (hash, of kind
// kind) and whether the guard wrote them (written). An object without
// stamps is written (it claims nothing) and gives Adopted; one whose
// stamps the guard did not write gives the record already kept of its
// content when there is one (its numbers and author stand), else
// Unadmitted numbered above the object's history: author unknown, number
// the guard's own. A nil Stamps takes every stamp as written (tests, and
// readers without the key).
func (s *Stamps) Of(ctx context.Context, obj client.Object, kind, hash string) (rec revisions.Record, written bool, _ error) {
	rec, err := revisions.RecordFromAnnotations(obj.GetAnnotations())
	if err != nil {
		log.FromContext(ctx).Info("ignoring malformed revision stamps", "error", err.Error())
		rec = revisions.Record{}
	}
	if len(revisions.Signed(obj.GetAnnotations(), AnnotationCachedHash)) == 0 {
		return Adopted(obj), true, nil
	}
	if s == nil {
		if rec.Revision == 0 {
			rec = Adopted(obj)
		}
		return rec, true, nil
	}
	if s.Signed(obj, kind, hash) {
		if rec.Revision == 0 {
			rec = Adopted(obj)
		}
		return rec, true, nil
	}
	// Not signed: history may still hold these stamps.
	kept, ok, err := s.Recorder.RecordOf(ctx, obj, hash)
	if err != nil {
		return revisions.Record{}, false, err
	}
	// A record the guard made of unknown author (unadmitted, or adopted:
	// the object carried no stamps then) confirms no stamps.
	if ok && kept.ChangeType != revisions.ChangeAdopted && kept.ChangeCause != UnadmittedCause && rec.Revision != 0 && (kept.Revision == rec.Revision || slices.Contains(kept.History, rec.Revision)) {
		if kept.ChangedBy != rec.ChangedBy {
			return kept, true, nil
		}
		return rec, true, nil
	}
	if ok {
		// The content is recorded, under numbers of its own: those stand;
		// the stamps add nothing to them.
		return kept, false, nil
	}
	revs, err := s.Recorder.history(ctx, obj)
	if err != nil {
		return revisions.Record{}, false, err
	}
	out := Unadmitted(Highest(revs)+1, time.Now())
	if created := obj.GetCreationTimestamp(); !created.IsZero() && len(revs) == 0 {
		out.ChangedAt = created.UTC().Truncate(time.Second)
	}
	return out, false, nil
}

// Written says whether the guard wrote the stamps obj carries (Of), from
// its signature over its content's hash — the hash the cache noted on a
// copy it keeps without all of its content (CachedHash), else taken of the
// object — or a record that holds them. An object of a kind without
// history, or whose content cannot be read as a revision, keeps its stamps
// (the policy says what it cannot read); a nil Stamps takes every stamp as
// written. An error (the records could not be read) is for the caller to
// refuse on: judged without stamps the guard did write, a downgrade could
// pass.
func (s *Stamps) Written(ctx context.Context, obj client.Object) (bool, error) {
	if s == nil {
		return true, nil
	}
	kind, ok := kinds.HistoryOf(obj)
	if !ok {
		return true, nil
	}
	hash, noted := CachedHash(obj)
	if noted && hash == "" {
		return true, nil
	}
	if !noted {
		snap, err := kind.Snapshot(obj)
		if err != nil {
			return true, nil
		}
		hash = snap.Hash
	}
	_, written, err := s.Of(ctx, obj, kind.GVK.Kind, hash)
	if err != nil {
		return false, fmt.Errorf("telling whether rollout-guard wrote the revision stamps of %s %s/%s: %w", kind.GVK.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return written, nil
}

// Signed says whether obj carries a signature of the guard over its stamps
// for content hash.
func (s *Stamps) Signed(obj client.Object, kind, hash string) bool {
	if s == nil {
		return true
	}
	ann := obj.GetAnnotations()
	return s.Key.Verify(ann[revisions.AnnotationSignature], revisions.Signed(ann, AnnotationCachedHash),
		revisions.Binding{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID()), Hash: hash},
		obj.GetCreationTimestamp().Time)
}

// RecordOf returns the record kept of owner's content hash, and whether
// there is one: from the Index when it can answer from the records'
// metadata, else from the API server. It looks under every name a record
// of that content may have (revisions.Names) and takes a record only when
// its full digest is hash; a record of an earlier release, whose metadata
// carries no digest (revisions.ErrNoDigest), is read whole.
func (r *Recorder) RecordOf(ctx context.Context, owner client.Object, hash string) (revisions.Record, bool, error) {
	if r == nil {
		return revisions.Record{}, false, nil
	}
	readWhole := false
	for _, name := range revisions.Names(owner.GetName(), hash) {
		meta, ok, err := r.Index.Get(ctx, owner.GetNamespace(), name)
		if err != nil {
			return revisions.Record{}, false, fmt.Errorf("reading the revision index for RolloutRevision %s/%s: %w", owner.GetNamespace(), name, err)
		}
		if !ok {
			readWhole = true
			break
		}
		if meta == nil || meta.Labels[revisions.LabelOwnerUID] != string(owner.GetUID()) {
			continue
		}
		rev, err := revisions.FromMetadata(meta)
		if errors.Is(err, revisions.ErrNoDigest) {
			readWhole = true
			break
		}
		if err == nil && rev.Snapshot.Hash == hash {
			return rev.Record, true, nil
		}
	}
	if !readWhole {
		return revisions.Record{}, false, nil
	}
	for _, name := range revisions.Names(owner.GetName(), hash) {
		cr := &rgv1alpha1.RolloutRevision{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, cr); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return revisions.Record{}, false, fmt.Errorf("reading RolloutRevision %s/%s: %w", owner.GetNamespace(), name, err)
		}
		if revisions.OwnerUID(cr) != owner.GetUID() {
			continue
		}
		if rev, err := revisions.FromRolloutRevision(cr); err == nil && rev.Snapshot.Hash == hash {
			return rev.Record, true, nil
		}
	}
	return revisions.Record{}, false, nil
}

// history lists owner's recorded history, from the Index when it can
// answer, else from the API server's watch cache.
func (r *Recorder) history(ctx context.Context, owner client.Object) ([]revisions.Revision, error) {
	if r == nil {
		return nil, nil
	}
	revs, ok, err := r.Index.List(ctx, owner.GetNamespace(), string(owner.GetUID()))
	if err != nil || ok {
		return revs, err
	}
	revs, _, err = List(ctx, r.Reader, owner.GetNamespace(), string(owner.GetUID()), FromWatchCache())
	return revs, err
}

// MigrationDone says whether the history Migration has finished: until
// it has, a record an earlier release kept may still be on its way, and
// stamps that only such a record would confirm are not judged yet.
type MigrationDone struct{ done atomic.Bool }

// Done says whether the Migration has finished; a nil MigrationDone has.
func (m *MigrationDone) Done() bool { return m == nil || m.done.Load() }

// finish marks the Migration finished.
func (m *MigrationDone) finish() {
	if m != nil {
		m.done.Store(true)
	}
}
