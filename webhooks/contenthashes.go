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
// noted of it (its history.AnnotationCachedHash value) and the generation
// it was taken at.
//
// Why: every watch event of an object passes through the transform —
// status updates above all, many per minute while machines roll — and
// taking the revision content's hash costs encoding, canonicalizing and
// hashing the whole content. The content is part of the spec, and the API
// server moves an object's generation on every change of its spec and on
// no other (status, labels, annotations): an event at the generation the
// hash was taken at has the same content, and its hash is reused.
//
// Safe for concurrent use; the zero value is ready.
type contentHashes struct {
	mu   sync.Mutex
	byID map[types.UID]notedHash
}

// notedHash is the cached-hash value noted of an object at a generation.
type notedHash struct {
	generation int64
	value      string
}

// at returns the value noted of obj at its current generation, and whether
// there is one.
func (h *contentHashes) at(obj client.Object) (string, bool) {
	if obj.GetUID() == "" || obj.GetGeneration() == 0 {
		return "", false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.byID[obj.GetUID()]
	if !ok || n.generation != obj.GetGeneration() {
		return "", false
	}
	return n.value, true
}

// note remembers value, noted of obj at its current generation. An object
// being deleted is forgotten: its last events need no memory, and nothing
// else would tell when it is gone.
func (h *contentHashes) note(obj client.Object, value string) {
	if obj.GetUID() == "" || obj.GetGeneration() == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !obj.GetDeletionTimestamp().IsZero() {
		delete(h.byID, obj.GetUID())
		return
	}
	if h.byID == nil || len(h.byID) >= contentHashesLimit {
		h.byID = map[types.UID]notedHash{}
	}
	h.byID[obj.GetUID()] = notedHash{generation: obj.GetGeneration(), value: value}
}
