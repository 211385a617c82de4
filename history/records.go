package history

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// recordStore is the store behind the Index: the reflector of the
// RolloutRevisions' metadata writes into it (it is a client-go
// ReflectorStore), and the Index reads an owner's records or one record
// by name from it.
//
// Why not an informer's indexer: an indexer keeps, for every item, its
// key ("namespace/name"), a map entry for it, and an entry in each index
// set; with tens of thousands of records, those cost more than the
// records. The store groups records by owner instead (one ownerRecords
// per owner, namespace and name prefix), finds groups by binary search in
// two sorted slices, and keeps each record as a fixed-size value
// (record) holding what differs from one revision to the next as numbers,
// and the rest — the strings revisions repeat — as one shared encoding.
// Every metadata of a RolloutRevision it holds reads back exactly as the
// API server gave it, but for the refused break-glass attempts (see
// newRecord).
type recordStore struct {
	mu sync.RWMutex
	// byOwner holds the groups sorted by owner, namespace and prefix.
	byOwner []*ownerRecords
	// byName holds the same groups sorted by namespace, prefix and owner.
	byName []*ownerRecords
	// count is the number of records held.
	count int
	// synced says whether a first Replace (the initial list) has filled
	// the store.
	synced atomic.Bool
}

// ownerID is an owner's UID: a UUID, as the API server makes them, in 16
// bytes; any other value as text, after a NUL byte (which no label value
// holds) so that it never reads as a UUID.
type ownerID struct {
	uuid [16]byte
	text string
}

// ownerIDOf is the ownerID of uid.
func ownerIDOf(uid string) ownerID {
	if u, ok := parseUUID(uid); ok {
		return ownerID{uuid: u}
	}
	return ownerID{text: "\x00" + uid}
}

// String is the UID as its label carries it.
func (id ownerID) String() string {
	if id.text != "" {
		return id.text[1:]
	}
	return formatUUID(id.uuid)
}

func (id ownerID) compare(other ownerID) int {
	return cmp.Or(bytes.Compare(id.uuid[:], other.uuid[:]), strings.Compare(id.text, other.text))
}

// parseUUID reads a UUID in its canonical form (lowercase, with dashes),
// the only form that formatUUID gives back unchanged.
func parseUUID(s string) (u [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	digits := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if !lowerHex(digits) {
		return u, false
	}
	if _, err := hex.Decode(u[:], []byte(digits)); err != nil {
		return u, false
	}
	return u, true
}

func formatUUID(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// lowerHex says whether s holds only lowercase hexadecimal digits.
func lowerHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ownerRecords is the records of one owner in one namespace whose names
// share a prefix: for records the guard wrote, "<owner name>" before
// "-<hash>" (revisions.Name).
type ownerRecords struct {
	owner     ownerID
	namespace unique.Handle[string]
	prefix    string
	// records never changes once made: a change makes a new slice, of
	// the exact length.
	records []record
}

func (g *ownerRecords) compareByOwner(owner ownerID, namespace, prefix string) int {
	return cmp.Or(g.owner.compare(owner), strings.Compare(g.namespace.Value(), namespace), strings.Compare(g.prefix, prefix))
}

func (g *ownerRecords) compareByName(namespace, prefix string, owner ownerID) int {
	return cmp.Or(strings.Compare(g.namespace.Value(), namespace), strings.Compare(g.prefix, prefix), g.owner.compare(owner))
}

// record is what the store keeps of one RolloutRevision: the values that
// differ from one revision to the next as numbers — when they read back
// exactly as the API server gave them (the flags say which) — and
// everything else in tail, an encoding shared by every record that
// carries the same (who changed it, how, why, of which kind).
type record struct {
	// resourceVersion when flagResourceVersion.
	resourceVersion uint64
	// tail encodes the labels, annotations, name and resourceVersion the
	// other fields do not hold (see encodeTail).
	tail unique.Handle[string]
	// changedAt is AnnotationChangedAt in seconds since the Unix epoch,
	// when flagChangedAt.
	changedAt uint32
	// revision is AnnotationRevision, when flagRevision.
	revision uint32
	// digest is AnnotationDigest, the content's whole digest, when
	// flagDigest; its first five bytes are LabelHash, 10 hexadecimal
	// digits, when flagHash (without flagDigest, for a record of an earlier
	// release, they alone are set).
	digest [32]byte
	flags  uint8
}

// The flags of a record: which values its fields hold.
const (
	// flagHash: digest's first five bytes hold LabelHash.
	flagHash uint8 = 1 << iota
	// flagWholeName: the record's name is its group's prefix, not
	// "<prefix>-<hash>".
	flagWholeName
	// flagResourceVersion: resourceVersion holds it.
	flagResourceVersion
	// flagRevision: revision holds AnnotationRevision.
	flagRevision
	// flagRevisionLabel: LabelRevision is set, to AnnotationRevision.
	flagRevisionLabel
	// flagRevisionHistory: AnnotationRevisionHistory is set, to
	// AnnotationRevision alone.
	flagRevisionHistory
	// flagChangedAt: changedAt holds AnnotationChangedAt.
	flagChangedAt
	// flagDigest: digest holds AnnotationDigest.
	flagDigest
)

// parsed is one RolloutRevision as the store keeps it: its group and its
// record.
type parsed struct {
	owner             ownerID
	namespace, prefix string
	record            record
	hash              string
}

// slim is the Transformer of the store: of the metadata of a
// RolloutRevision, it keeps what newRecord reads, so that the reflector's
// list of a whole watch stream holds no more than that before the store
// takes it.
func slim(in any) (any, error) {
	obj, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil
	}
	annotations, cloned := obj.Annotations, false
	if _, ok := annotations[AnnotationRefusedOverrides]; ok {
		annotations, cloned = maps.Clone(annotations), true
		delete(annotations, AnnotationRefusedOverrides)
		if len(annotations) == 0 {
			annotations = nil
		}
	}
	// A client's string kept whole by a record (one written before the
	// guard bounded them) is held bounded, as the guard reads it
	// (revisions.BoundStamp): the Index's memory per record stays small
	// whatever a client once sent.
	for k, v := range annotations {
		if bounded, ok := revisions.BoundStamp(k, v); ok {
			if !cloned {
				annotations, cloned = maps.Clone(annotations), true
			}
			annotations[k] = bounded
		}
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name, ResourceVersion: obj.ResourceVersion,
		Labels: obj.Labels, Annotations: annotations}}, nil
}

// newRecord is the record of a RolloutRevision's metadata. The refused
// break-glass attempts (a JSON list of up to MaxRefusedOverrides) are left
// out: they are read and written whole from the API server, and a patch
// from the Index never touches a key it does not hold.
func newRecord(obj metav1.Object) parsed {
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	p := parsed{owner: ownerIDOf(labels[revisions.LabelOwnerUID]), namespace: obj.GetNamespace(), hash: labels[revisions.LabelHash]}
	var tail []field
	if d := annotations[revisions.AnnotationDigest]; revisions.IsDigest(d) {
		_, _ = hex.Decode(p.record.digest[:], []byte(d))
		p.record.flags |= flagDigest
	}
	for k, v := range labels {
		switch k {
		case revisions.LabelOwnerUID:
			continue
		case revisions.LabelHash:
			if len(v) == 2*shortBytes && lowerHex(v) {
				var short [shortBytes]byte
				_, _ = hex.Decode(short[:], []byte(v))
				if p.record.flags&flagDigest == 0 {
					copy(p.record.digest[:], short[:])
				}
				if [shortBytes]byte(p.record.digest[:shortBytes]) == short {
					p.record.flags |= flagHash
					continue
				}
			}
		}
		tail = append(tail, field{tag: tagLabel, key: k, value: v})
	}
	if n, ok := number(annotations[revisions.AnnotationRevision], 32); ok {
		p.record.revision, p.record.flags = uint32(n), p.record.flags|flagRevision
	}
	if at, ok := changedAt(annotations[revisions.AnnotationChangedAt]); ok {
		p.record.changedAt, p.record.flags = at, p.record.flags|flagChangedAt
	}
	for k, v := range annotations {
		switch k {
		case AnnotationRefusedOverrides:
			continue
		case revisions.AnnotationRevision:
			if p.record.flags&flagRevision != 0 {
				continue
			}
		case revisions.AnnotationRevisionHistory:
			if p.record.flags&flagRevision != 0 && v == annotations[revisions.AnnotationRevision] {
				p.record.flags |= flagRevisionHistory
				continue
			}
		case revisions.AnnotationChangedAt:
			if p.record.flags&flagChangedAt != 0 {
				continue
			}
		case revisions.AnnotationDigest:
			if p.record.flags&flagDigest != 0 {
				continue
			}
		}
		tail = append(tail, field{tag: tagAnnotation, key: k, value: v})
	}
	// The revision label, when it says what the annotation does.
	if v, ok := labels[revisions.LabelRevision]; ok && p.record.flags&flagRevision != 0 && v == annotations[revisions.AnnotationRevision] {
		p.record.flags |= flagRevisionLabel
		tail = slices.DeleteFunc(tail, func(f field) bool { return f.tag == tagLabel && f.key == revisions.LabelRevision })
	}
	if rv, ok := number(obj.GetResourceVersion(), 64); ok {
		p.record.resourceVersion, p.record.flags = rv, p.record.flags|flagResourceVersion
	} else {
		tail = append(tail, field{tag: tagResourceVersion, value: obj.GetResourceVersion()})
	}
	name := obj.GetName()
	if i := strings.LastIndexByte(name, '-'); i > 0 && p.hash != "" && name[i+1:] == p.hash {
		p.prefix = name[:i]
	} else {
		p.prefix, p.record.flags = name, p.record.flags|flagWholeName
	}
	p.record.tail = encodeTail(tail)
	return p
}

// number reads s, a decimal number of at most bits bits written as
// strconv writes it (so that it reads back unchanged).
func number(s string, bits int) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, bits)
	if err != nil || strconv.FormatUint(n, 10) != s {
		return 0, false
	}
	return n, true
}

// changedAt reads an AnnotationChangedAt as revisions.Record.Annotations
// writes it, in seconds since the Unix epoch.
func changedAt(s string) (uint32, bool) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil || t.Unix() < 0 || t.Unix() > int64(^uint32(0)) {
		return 0, false
	}
	if formatChangedAt(uint32(t.Unix())) != s {
		return 0, false
	}
	return uint32(t.Unix()), true
}

func formatChangedAt(at uint32) string {
	return time.Unix(int64(at), 0).UTC().Format(time.RFC3339)
}

// A field of a record's tail.
type field struct {
	tag        byte
	key, value string
}

// The tags of a tail's fields.
const (
	tagLabel           = 'l'
	tagAnnotation      = 'a'
	tagResourceVersion = 'r'
)

// encodeTail is the shared encoding of fields: sorted, each its tag, then
// its key and value, each after its length.
func encodeTail(fields []field) unique.Handle[string] {
	slices.SortFunc(fields, func(a, b field) int { return cmp.Or(cmp.Compare(a.tag, b.tag), strings.Compare(a.key, b.key)) })
	var b []byte
	for _, f := range fields {
		b = append(b, f.tag)
		b = binary.AppendUvarint(b, uint64(len(f.key)))
		b = append(b, f.key...)
		b = binary.AppendUvarint(b, uint64(len(f.value)))
		b = append(b, f.value...)
	}
	return unique.Make(string(b))
}

// decodeTail calls each with every field of an encoding of encodeTail.
func decodeTail(s string, each func(field)) {
	next := func() string {
		n, w := binary.Uvarint([]byte(s[:min(len(s), binary.MaxVarintLen64)]))
		out := s[w : w+int(n)]
		s = s[w+int(n):]
		return out
	}
	for s != "" {
		var f field
		f.tag, s = s[0], s[1:]
		f.key = next()
		f.value = next()
		each(f)
	}
}

// shortBytes is how many bytes of a record's digest LabelHash is, when
// it is the ShortHashLength digits the guard writes.
const shortBytes = revisions.ShortHashLength / 2

// hashOf is the record's LabelHash.
func (r *record) hashOf() string {
	if r.flags&flagHash != 0 {
		return hex.EncodeToString(r.digest[:shortBytes])
	}
	var hash string
	decodeTail(r.tail.Value(), func(f field) {
		if f.tag == tagLabel && f.key == revisions.LabelHash {
			hash = f.value
		}
	})
	return hash
}

// name is the name of the record r of group g.
func (g *ownerRecords) name(r *record) string {
	if r.flags&flagWholeName != 0 {
		return g.prefix
	}
	return g.prefix + "-" + r.hashOf()
}

// metadata is the RolloutRevision's metadata as the API server gave it
// (but the refused break-glass attempts), in maps of its own.
func (g *ownerRecords) metadata(r *record) *metav1.PartialObjectMetadata {
	out := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: rgv1alpha1.GroupVersion.String(), Kind: "RolloutRevision"}}
	out.Namespace, out.Name = g.namespace.Value(), g.name(r)
	out.Labels = map[string]string{revisions.LabelOwnerUID: g.owner.String()}
	out.Annotations = map[string]string{}
	if r.flags&flagHash != 0 {
		out.Labels[revisions.LabelHash] = hex.EncodeToString(r.digest[:shortBytes])
	}
	if r.flags&flagDigest != 0 {
		out.Annotations[revisions.AnnotationDigest] = hex.EncodeToString(r.digest[:])
	}
	if r.flags&flagResourceVersion != 0 {
		out.ResourceVersion = strconv.FormatUint(r.resourceVersion, 10)
	}
	if r.flags&flagRevision != 0 {
		n := strconv.FormatUint(uint64(r.revision), 10)
		out.Annotations[revisions.AnnotationRevision] = n
		if r.flags&flagRevisionLabel != 0 {
			out.Labels[revisions.LabelRevision] = n
		}
		if r.flags&flagRevisionHistory != 0 {
			out.Annotations[revisions.AnnotationRevisionHistory] = n
		}
	}
	if r.flags&flagChangedAt != 0 {
		out.Annotations[revisions.AnnotationChangedAt] = formatChangedAt(r.changedAt)
	}
	decodeTail(r.tail.Value(), func(f field) {
		switch f.tag {
		case tagLabel:
			out.Labels[f.key] = f.value
		case tagAnnotation:
			out.Annotations[f.key] = f.value
		case tagResourceVersion:
			out.ResourceVersion = f.value
		}
	})
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	return out
}

// metaOf returns the object metadata of a reflector's item.
func metaOf(obj any) (metav1.Object, error) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("the revision index holds the metadata of RolloutRevisions, not a %T", obj)
	}
	return m, nil
}

// Add adds or replaces the record of obj.
func (s *recordStore) Add(obj any) error {
	m, err := metaOf(obj)
	if err != nil {
		return err
	}
	p := newRecord(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(m.GetNamespace(), m.GetName())
	s.insert(p)
	return nil
}

// Update replaces the record of obj.
func (s *recordStore) Update(obj any) error { return s.Add(obj) }

// Delete removes the record of obj, if held.
func (s *recordStore) Delete(obj any) error {
	m, err := metaOf(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(m.GetNamespace(), m.GetName())
	return nil
}

// Replace makes the store hold the records of list alone, and marks it
// filled.
func (s *recordStore) Replace(list []any, _ string) error {
	all := make([]parsed, 0, len(list))
	for _, obj := range list {
		m, err := metaOf(obj)
		if err != nil {
			return err
		}
		all = append(all, newRecord(m))
	}
	slices.SortFunc(all, func(a, b parsed) int {
		return cmp.Or(a.owner.compare(b.owner), strings.Compare(a.namespace, b.namespace), strings.Compare(a.prefix, b.prefix))
	})
	var groups []*ownerRecords
	for start := 0; start < len(all); {
		end := start + 1
		for end < len(all) && all[end].owner == all[start].owner && all[end].namespace == all[start].namespace && all[end].prefix == all[start].prefix {
			end++
		}
		g := &ownerRecords{owner: all[start].owner, namespace: unique.Make(all[start].namespace), prefix: strings.Clone(all[start].prefix),
			records: make([]record, 0, end-start)}
		for _, p := range all[start:end] {
			// A list holds one object per name; keep the last, as Add does.
			if i := g.find(p.record.flags&flagWholeName != 0, p.hash); i >= 0 {
				g.records = slices.Delete(g.records, i, i+1)
			}
			g.records = append(g.records, p.record)
		}
		groups = append(groups, g)
		start = end
	}
	byName := slices.Clone(groups)
	slices.SortFunc(byName, func(a, b *ownerRecords) int { return a.compareByName(b.namespace.Value(), b.prefix, b.owner) })
	count := 0
	for _, g := range groups {
		count += len(g.records)
	}
	s.mu.Lock()
	s.byOwner, s.byName, s.count = groups, byName, count
	s.mu.Unlock()
	s.synced.Store(true)
	return nil
}

// Resync does nothing: the store has no one to tell.
func (s *recordStore) Resync() error { return nil }

// Transformer is slim: see toolscache.TransformingStore.
func (s *recordStore) Transformer() toolscache.TransformFunc { return slim }

// len is the number of records held.
func (s *recordStore) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.count
}

// find returns the place in g of the record of hash (whole: named g's
// prefix), -1 when there is none.
func (g *ownerRecords) find(whole bool, hash string) int {
	for i := range g.records {
		r := &g.records[i]
		if (r.flags&flagWholeName != 0) == whole && (whole || r.hashOf() == hash) {
			return i
		}
	}
	return -1
}

// locate returns the group and place of the record namespace/name, nil
// when the store holds none. The caller holds s.mu.
func (s *recordStore) locate(namespace, name string) (*ownerRecords, int) {
	lookup := func(prefix, hash string, whole bool) (*ownerRecords, int) {
		i, _ := slices.BinarySearchFunc(s.byName, [2]string{namespace, prefix}, func(g *ownerRecords, t [2]string) int {
			return cmp.Or(strings.Compare(g.namespace.Value(), t[0]), strings.Compare(g.prefix, t[1]))
		})
		for ; i < len(s.byName) && s.byName[i].namespace.Value() == namespace && s.byName[i].prefix == prefix; i++ {
			if j := s.byName[i].find(whole, hash); j >= 0 {
				return s.byName[i], j
			}
		}
		return nil, -1
	}
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if g, j := lookup(name[:i], name[i+1:], false); g != nil {
			return g, j
		}
	}
	return lookup(name, "", true)
}

// remove removes the record namespace/name. The caller holds s.mu.
func (s *recordStore) remove(namespace, name string) {
	g, i := s.locate(namespace, name)
	if g == nil {
		return
	}
	s.count--
	if len(g.records) > 1 {
		records := make([]record, 0, len(g.records)-1)
		g.records = append(append(records, g.records[:i]...), g.records[i+1:]...)
		return
	}
	// The group's last record: the group goes.
	drop := func(groups []*ownerRecords) []*ownerRecords {
		return slices.DeleteFunc(groups, func(other *ownerRecords) bool { return other == g })
	}
	s.byOwner, s.byName = drop(s.byOwner), drop(s.byName)
}

// insert adds p's record, which the store does not hold. The caller holds
// s.mu.
func (s *recordStore) insert(p parsed) {
	s.count++
	i, found := slices.BinarySearchFunc(s.byOwner, p, func(g *ownerRecords, p parsed) int { return g.compareByOwner(p.owner, p.namespace, p.prefix) })
	if found {
		g := s.byOwner[i]
		// A new slice of the exact length: a record is added rarely, and
		// held long.
		records := make([]record, len(g.records)+1)
		copy(records, g.records)
		records[len(g.records)] = p.record
		g.records = records
		return
	}
	g := &ownerRecords{owner: p.owner, namespace: unique.Make(p.namespace), prefix: strings.Clone(p.prefix), records: []record{p.record}}
	s.byOwner = slices.Insert(s.byOwner, i, g)
	j, _ := slices.BinarySearchFunc(s.byName, g, func(a, b *ownerRecords) int { return a.compareByName(b.namespace.Value(), b.prefix, b.owner) })
	s.byName = slices.Insert(s.byName, j, g)
}

// byOwnerUID returns the metadata of the records of owner uid in
// namespace.
func (s *recordStore) byOwnerUID(namespace, uid string) ([]*metav1.PartialObjectMetadata, error) {
	owner := ownerIDOf(uid)
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, _ := slices.BinarySearchFunc(s.byOwner, owner, func(g *ownerRecords, o ownerID) int {
		return cmp.Or(g.owner.compare(o), strings.Compare(g.namespace.Value(), namespace))
	})
	var out []*metav1.PartialObjectMetadata
	for ; i < len(s.byOwner) && s.byOwner[i].owner == owner && s.byOwner[i].namespace.Value() == namespace; i++ {
		g := s.byOwner[i]
		for j := range g.records {
			out = append(out, g.metadata(&g.records[j]))
		}
	}
	return out, nil
}

// get returns the metadata of the record namespace/name, nil when the
// store holds none.
func (s *recordStore) get(namespace, name string) (*metav1.PartialObjectMetadata, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g, i := s.locate(namespace, name)
	if g == nil {
		return nil, nil
	}
	return g.metadata(&g.records[i]), nil
}

// byCluster returns the metadata of the records in namespace that name
// Cluster cluster (revisions.LabelCluster). It goes through every record
// of the namespace: it serves the creation of a control plane, which is
// rare, and keeping a second grouping by Cluster would cost every record
// memory for it.
func (s *recordStore) byCluster(namespace, cluster string) []*metav1.PartialObjectMetadata {
	// The label's field, as encodeTail writes it: the records that carry
	// it hold these bytes in their tail.
	want := encodeTail([]field{{tag: tagLabel, key: revisions.LabelCluster, value: cluster}}).Value()
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, _ := slices.BinarySearchFunc(s.byName, namespace, func(g *ownerRecords, ns string) int { return strings.Compare(g.namespace.Value(), ns) })
	var out []*metav1.PartialObjectMetadata
	for ; i < len(s.byName) && s.byName[i].namespace.Value() == namespace; i++ {
		g := s.byName[i]
		for j := range g.records {
			r := &g.records[j]
			if !strings.Contains(r.tail.Value(), want) {
				continue
			}
			if m := g.metadata(r); m.Labels[revisions.LabelCluster] == cluster {
				out = append(out, m)
			}
		}
	}
	return out
}
