package webhooks

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// contentHashesLimit bounds how many objects a contentHashes remembers:
// far above the objects of one kind a management cluster holds; past it
// the memory starts over (it only saves work).
const contentHashesLimit = 1 << 17

// contentHashes remembers, per object, the content hash the cache transform
// noted of it (its history.AnnotationCachedHash value), the generation it
// was taken at and the fingerprint of the content then
// (kinds.Kind.Fingerprint, when the kind has one).
//
// Why: every watch event of an object passes through the transform —
// status updates above all, many per minute while machines roll — and
// taking the revision content's hash costs encoding, canonicalizing and
// hashing the whole content. The content is part of the spec, and the API
// server moves an object's generation on every change of its spec and on
// no other (status, labels, annotations): an event at the generation the
// hash was taken at has the same content, and its hash is reused. A new
// generation whose content has the fingerprint noted (a scale: replicas
// are spec, not content) reuses it too, for the price of encoding the
// content once.
//
// Safe for concurrent use; the zero value is ready.
type contentHashes struct {
	mu   sync.Mutex
	byID map[types.UID]notedHash
}

// notedHash is the cached-hash value noted of an object at a generation,
// and the fingerprint of its content then, when known.
type notedHash struct {
	generation  int64
	value       string
	fingerprint uint64
	hasPrint    bool
}

// value returns the cached-hash value of obj: the one noted when obj's
// spec (its generation) or its content (fingerprint, which may be nil) is
// as it was then, else take() of it now. It remembers what it returns.
func (h *contentHashes) value(obj client.Object, fingerprint func(client.Object) (uint64, error), take func() string) string {
	if obj.GetUID() == "" || obj.GetGeneration() == 0 {
		return take()
	}
	last, seen := h.get(obj.GetUID())
	if seen && last.generation == obj.GetGeneration() {
		h.put(obj, last)
		return last.value
	}
	now := notedHash{generation: obj.GetGeneration()}
	if fingerprint != nil {
		if print, err := fingerprint(obj); err == nil {
			now.fingerprint, now.hasPrint = print, true
		}
	}
	if seen && now.hasPrint && last.hasPrint && now.fingerprint == last.fingerprint {
		now.value = last.value
	} else {
		now.value = take()
	}
	h.put(obj, now)
	return now.value
}

func (h *contentHashes) get(uid types.UID) (notedHash, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.byID[uid]
	return n, ok
}

// put remembers n of obj. An object being deleted is forgotten: its last
// events need no memory, and nothing else would tell when it is gone.
func (h *contentHashes) put(obj client.Object, n notedHash) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !obj.GetDeletionTimestamp().IsZero() {
		delete(h.byID, obj.GetUID())
		return
	}
	if h.byID == nil || len(h.byID) >= contentHashesLimit {
		h.byID = map[types.UID]notedHash{}
	}
	h.byID[obj.GetUID()] = n
}
