package revisions

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
)

// Revision is one recorded revision of an object.
type Revision struct {
	// Snapshot is the revision's content.
	Snapshot Snapshot
	// Record is who made it live, when and how.
	Record Record
	// Name is the name of the RolloutRevision that records it.
	Name string
	// ResourceVersion is that RolloutRevision's resourceVersion when it
	// was read: pruning deletes a revision only as it judged it, never one
	// a recorder has since given a new number.
	ResourceVersion string
	// Labelled says whether the RolloutRevision carries LabelRevision
	// with Record.Revision, as every record made or updated since that
	// label exists does: pruning removes labelled revisions by number in
	// one request, older ones one by one.
	Labelled bool
}

// RolloutRevision returns the RolloutRevision that records snap and rec
// for owner:
//
//   - name Name(owner, snap.Hash): "<owner name>-<short hash>" (a record of
//     other content that already holds that name makes the Recorder name
//     it LongName instead);
//   - the owner's namespace;
//   - labels LabelOwnerUID, LabelOwnerKind (ownerGVK.Kind, or
//     KindContractControlPlane for a control plane read through the
//     contract, whose own kind only its owner reference names), LabelHash
//     (ShortHash of the digest) and, when rec is numbered, LabelRevision;
//   - a controller owner reference to owner (apiVersion and kind from
//     ownerGVK), so that the garbage collector deletes it with its owner;
//     BlockOwnerDeletion is left unset, so deleting the owner never waits
//     for its history;
//   - Revision rec.Revision and Data snap.Data;
//   - annotations: AnnotationDigest (the whole digest, snap.Hash), for a
//     control plane AnnotationRun (what snap runs), rec's
//     non-empty stamps (Record.Annotations), AnnotationRevisionHistory and,
//     when there are restarts, AnnotationRestarts.
func RolloutRevision(owner metav1.Object, ownerGVK schema.GroupVersionKind, snap Snapshot, rec Record) *rgv1alpha1.RolloutRevision {
	ann := map[string]string{}
	if snap.Hash != "" {
		ann[AnnotationDigest] = snap.Hash
	}
	if run := RunAnnotation(snap); run != "" {
		ann[AnnotationRun] = run
	}
	for k, v := range rec.Annotations() {
		if v != "" {
			ann[k] = v
		}
	}
	if h := normalizeHistory(rec.History, rec.Revision); len(h) > 0 {
		ann[AnnotationRevisionHistory] = formatHistory(h)
	}
	if rs := mergeRestarts(nil, rec.Bounded().Restarts); len(rs) > 0 {
		raw, err := json.Marshal(rs)
		if err == nil { // a []Restart always marshals
			ann[AnnotationRestarts] = string(raw)
		}
	}
	cr := &rgv1alpha1.RolloutRevision{
		TypeMeta: metav1.TypeMeta{APIVersion: rgv1alpha1.GroupVersion.String(), Kind: "RolloutRevision"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(owner.GetName(), snap.Hash),
			Namespace: owner.GetNamespace(),
			Labels: map[string]string{
				LabelOwnerUID:  string(owner.GetUID()),
				LabelOwnerKind: ownerKindLabel(ownerGVK, snap),
				LabelHash:      ShortHash(snap.Hash),
			},
			Annotations: ann,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: ownerGVK.GroupVersion().String(),
				Kind:       ownerGVK.Kind,
				Name:       owner.GetName(),
				UID:        owner.GetUID(),
				Controller: new(true),
			}},
		},
		Data:     runtime.RawExtension{Raw: slices.Clone(snap.Data)},
		Revision: rec.Revision,
	}
	if rec.Revision > 0 {
		cr.Labels[LabelRevision] = strconv.FormatInt(rec.Revision, 10)
	}
	return cr
}

// labelled says whether labels carry LabelRevision with revision n.
func labelled(labels map[string]string, n int64) bool {
	return n > 0 && labels[LabelRevision] == strconv.FormatInt(n, 10)
}

// ownerKindLabel is the value of LabelOwnerKind: the kind of the content,
// which decodes it.
func ownerKindLabel(ownerGVK schema.GroupVersionKind, snap Snapshot) string {
	if snap.Kind == KindContractControlPlane {
		return KindContractControlPlane
	}
	return ownerGVK.Kind
}

// Name returns the name a RolloutRevision recording the content with the
// given hash (its digest, Snapshot.Hash) for the object named owner is
// given first: "<owner>-<short hash>" (ShortHash), owner trimmed so that the
// name is at most 253 characters and a valid DNS subdomain. The name does
// not identify the content: when a record of other content of the same
// short hash holds it, the content is recorded under LongName. Whoever
// finds a record by name compares its digest.
func Name(owner, hash string) string {
	return nameWith(owner, ShortHash(hash))
}

// LongName is the name of the RolloutRevision recording the content with
// the given hash for the object named owner when Name is taken by a record
// of other content: "<owner>-<whole digest>", owner trimmed as in Name.
func LongName(owner, hash string) string {
	return nameWith(owner, hash)
}

// Names are the names a RolloutRevision recording the content with the
// given hash for the object named owner may have: Name, then LongName.
func Names(owner, hash string) []string {
	if short, long := Name(owner, hash), LongName(owner, hash); short != long {
		return []string{short, long}
	}
	return []string{Name(owner, hash)}
}

func nameWith(owner, hash string) string {
	if hash == "" {
		return owner
	}
	max := validation.DNS1123SubdomainMaxLength - len(hash) - 1
	if len(owner) > max {
		owner = owner[:max]
	}
	owner = strings.TrimRight(owner, ".-")
	if owner == "" {
		return hash
	}
	return owner + "-" + hash
}

// FromRolloutRevision decodes a RolloutRevision written by
// RolloutRevision, or by an earlier release. The kind comes from
// LabelOwnerKind; the Data must be a JSON object (it is re-canonicalized
// first, so a re-encoding by the API server does not matter) whose digest,
// computed here and returned as Snapshot.Hash, begins with LabelHash and is
// AnnotationDigest when the record has one (earlier releases wrote only
// the 10-digit LabelHash: their records are read by the digest of their
// data, never by the label); the Record comes from the annotations, with
// Revision taken from the RolloutRevision's revision field. Any mismatch
// or malformed annotation is an error naming the RolloutRevision.
func FromRolloutRevision(cr *rgv1alpha1.RolloutRevision) (Revision, error) {
	if cr == nil {
		return Revision{}, errors.New("decode RolloutRevision: it is nil")
	}
	name := cr.Namespace + "/" + cr.Name
	kind := cr.Labels[LabelOwnerKind]
	if _, ok := shapes[kind]; !ok {
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: label %s is %q, want %s", name, LabelOwnerKind, kind, knownKinds)
	}
	want := cr.Labels[LabelHash]
	if want == "" {
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: label %s is missing", name, LabelHash)
	}
	raw := cr.Data.Raw
	if len(raw) == 0 && cr.Data.Object != nil {
		b, err := json.Marshal(cr.Data.Object)
		if err != nil {
			return Revision{}, fmt.Errorf("decode RolloutRevision %s: data: %w", name, err)
		}
		raw = b
	}
	if len(raw) == 0 {
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: data is empty", name)
	}
	snap, err := snapshotOf(kind, raw)
	if err != nil {
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: data: %w", name, err)
	}
	if !strings.HasPrefix(snap.Hash, want) {
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: data hashes to %s, label %s says %s: the data was changed", name, snap.Hash, LabelHash, want)
	}
	if d, ok := cr.Annotations[AnnotationDigest]; ok && d != snap.Hash {
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: data hashes to %s, annotation %s says %s: the data was changed", name, snap.Hash, AnnotationDigest, d)
	}
	rec, err := RecordFromAnnotations(cr.Annotations)
	if err != nil {
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: %w", name, err)
	}
	if cr.Revision < 0 {
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: revision %d is negative", name, cr.Revision)
	}
	// One number: the AnnotationRevision stamp, which the guard's
	// numbering reads from the metadata (FromMetadata), and the revision
	// field, which it writes alike. A record whose two disagree was
	// changed outside the guard (webhooks.RevisionGuard refuses that) and
	// is not trusted as either.
	switch {
	case cr.Revision > 0 && rec.Revision == 0:
		rec.Revision = cr.Revision // a record without its stamp: the field
	case cr.Revision > 0 && cr.Revision != rec.Revision:
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: revision %d and annotation %s %d disagree: the record was changed outside rollout-guard", name, cr.Revision, AnnotationRevision, rec.Revision)
	}
	rec.History = normalizeHistory(rec.History, rec.Revision)
	return Revision{Snapshot: snap, Record: rec, Name: cr.Name, ResourceVersion: cr.ResourceVersion, Labelled: labelled(cr.Labels, rec.Revision)}, nil
}

// ErrNoDigest is the error of FromMetadata for a RolloutRevision without
// AnnotationDigest (one an earlier release wrote): its content is known
// only from its data.
var ErrNoDigest = errors.New("annotation " + AnnotationDigest + " is missing (recorded by an earlier release): its content is known from its data only")

// Sort orders revisions by Record.Revision ascending (stable).
func Sort(revs []Revision) {
	slices.SortStableFunc(revs, func(a, b Revision) int {
		switch {
		case a.Record.Revision < b.Record.Revision:
			return -1
		case a.Record.Revision > b.Record.Revision:
			return 1
		}
		return 0
	})
}

// FromMetadata decodes the record a RolloutRevision carries in its
// metadata alone — its labels and annotations, as a metadata watch
// delivers them — without its data: the Revision's Snapshot has Kind and Hash
// but no Data. It is what numbering and pruning need, at a fraction of the
// memory of whole RolloutRevisions. Unlike FromRolloutRevision it
// cannot check the data against the hash label, and the revision number is
// the AnnotationRevision stamp (every RolloutRevision this package makes
// carries its number there too). Hash is the record's AnnotationDigest,
// which LabelHash must begin; a record without one — written by an earlier
// release, whose 40-bit label does not tell its content from another — is
// an error wrapping ErrNoDigest: read it whole (FromRolloutRevision
// computes its digest from its data).
func FromMetadata(meta metav1.Object) (Revision, error) {
	if meta == nil {
		return Revision{}, errors.New("decode RolloutRevision metadata: it is nil")
	}
	name := meta.GetNamespace() + "/" + meta.GetName()
	labels := meta.GetLabels()
	kind := labels[LabelOwnerKind]
	if _, ok := shapes[kind]; !ok {
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: label %s is %q, want %s", name, LabelOwnerKind, kind, knownKinds)
	}
	short := labels[LabelHash]
	if short == "" {
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: label %s is missing", name, LabelHash)
	}
	hash := meta.GetAnnotations()[AnnotationDigest]
	if hash == "" {
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: %w", name, ErrNoDigest)
	}
	if !IsDigest(hash) || !strings.HasPrefix(hash, short) {
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: annotation %s is %q, not a digest beginning with label %s %q", name, AnnotationDigest, hash, LabelHash, short)
	}
	rec, err := RecordFromAnnotations(meta.GetAnnotations())
	if err != nil {
		return Revision{}, fmt.Errorf("decode RolloutRevision %s: %w", name, err)
	}
	return Revision{Snapshot: Snapshot{Kind: kind, Hash: hash}, Record: rec, Name: meta.GetName(), ResourceVersion: meta.GetResourceVersion(),
		Labelled: labelled(labels, rec.Revision)}, nil
}

// OwnerUID returns the UID of the controller owner reference of a recorded
// revision, "" when it has none. It is the UID that LabelOwnerUID must
// carry: `clusterctl move` and a restore from its directory backup create
// the owner anew, under a new UID, and rewrite the owner references of what
// it owns to it — not the labels.
func OwnerUID(meta metav1.Object) types.UID {
	if ref := metav1.GetControllerOfNoCopy(meta); ref != nil {
		return ref.UID
	}
	return ""
}
