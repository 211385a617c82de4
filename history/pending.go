package history

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// DefaultPendingCapacity is how many objects' content a Pending holds at
// most: far more than are edited between an edit and its reconcile (the
// reconciler records each soon after), and small: it holds one canonical
// JSON content per object.
const DefaultPendingCapacity = 128

// Pending holds, for a short while, the revision content the guard's cache
// saw last of objects it keeps without all of that content (see
// Reconciler.ObjectReader): the snapshot the cache transform takes anyway
// to note the content's hash. The history reconciler, woken by the same
// change, records the content from here instead of reading the whole
// object back from the API server — new content, and content recorded
// before that the object is back to under a new number (a template
// switched back and forth).
//
// Why: every change of a worker pool's or control plane's template would
// otherwise cost the API server a GET of the object and the guard its
// decoding, right after the edit, on the same cores — the guard's own
// requests per policed edit doubled when the cache stopped keeping
// templates whole. What it keeps is exactly what the cache saw: the
// reconciler takes it only when the cached copy notes the same hash
// (CachedHash), and reads the object as before otherwise.
//
// A nil *Pending keeps nothing. Safe for concurrent use.
type Pending struct {
	mu       sync.Mutex
	capacity int
	byUID    map[types.UID]pendingEntry
	// order is a ring of the keys in the order they were kept; the oldest
	// is dropped when capacity is reached.
	order []pendingKey
	next  int
	seq   uint64
}

type pendingEntry struct {
	snap revisions.Snapshot
	seq  uint64
}

type pendingKey struct {
	uid types.UID
	seq uint64
}

// NewPending returns a Pending holding at most capacity objects' content
// (DefaultPendingCapacity when capacity is not positive).
func NewPending(capacity int) *Pending {
	if capacity <= 0 {
		capacity = DefaultPendingCapacity
	}
	return &Pending{capacity: capacity, byUID: map[types.UID]pendingEntry{}}
}

// Keep holds snap, the whole revision content of obj as the cache saw it,
// in place of what was held for obj. The reconciler takes it, or a later
// change of obj replaces it, or the oldest is dropped at capacity (status
// updates of objects no reconcile takes fill it so: bounded, not kept
// long).
func (p *Pending) Keep(obj metav1.Object, snap revisions.Snapshot) {
	if p == nil || obj.GetUID() == "" || snap.Hash == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	if _, held := p.byUID[obj.GetUID()]; !held {
		key := pendingKey{uid: obj.GetUID(), seq: p.seq}
		if len(p.order) < p.capacity {
			p.order = append(p.order, key)
		} else {
			// Full: drop the oldest, unless it was taken (or taken and
			// kept again, in a later place) since.
			if old := p.order[p.next]; p.byUID[old.uid].seq == old.seq {
				delete(p.byUID, old.uid)
			}
			p.order[p.next] = key
			p.next = (p.next + 1) % p.capacity
		}
		p.byUID[obj.GetUID()] = pendingEntry{snap: snap, seq: p.seq}
		return
	}
	// Kept again (a later change of the same object): keep its place.
	e := p.byUID[obj.GetUID()]
	e.snap = snap
	p.byUID[obj.GetUID()] = e
}

// Take returns the content held for the object with the given UID when its
// hash is hash, and forgets it. When it holds other content (the cache has
// seen a later change, whose reconcile will take it), it keeps it.
func (p *Pending) Take(uid types.UID, hash string) (revisions.Snapshot, bool) {
	if p == nil || hash == "" {
		return revisions.Snapshot{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.byUID[uid]
	if !ok || e.snap.Hash != hash {
		return revisions.Snapshot{}, false
	}
	delete(p.byUID, uid)
	return e.snap, true
}

// Len is how many objects' content is held.
func (p *Pending) Len() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byUID)
}
