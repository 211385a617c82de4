package history

import (
	"encoding/json"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/keymutex"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// memoSize bounds how many recorded revisions a Recorder remembers: the
// objects edited most recently, which are the ones the next edits replace.
// A few hundred bytes each.
const memoSize = 4096

// memoTTL bounds how long a remembered record is trusted without reading
// it back: a RolloutRevision deleted behind the guard's back (by hand)
// is recorded again at the latest this long after.
const memoTTL = 10 * time.Minute

// memo remembers the records this process stored, each for the one stored
// version of its owner it was recorded from (the owner's resourceVersion).
//
// Why: the mutating webhook records the revision an edit replaces, inside
// the request. Almost always the history reconciler recorded that revision
// when it became live, from the very version of the object the edit now
// replaces; then recording it again would change nothing, and the memo
// spares the request the read that proves it. Any write to the object in
// between — a change that slipped past the guard, a status update — gives
// it a new resourceVersion, and the Recorder reads the history as before.
// Each process has its own memo: a replica that does not run the
// reconciler (not the leader) reads.
type memo struct {
	once  sync.Once
	cache *cache.LRUExpireCache
}

type memoEntry struct {
	resourceVersion string
	record          revisions.Record
}

func (m *memo) lru() *cache.LRUExpireCache {
	m.once.Do(func() { m.cache = cache.NewLRUExpireCache(memoSize) })
	return m.cache
}

func memoKey(owner client.Object, hash string) string {
	return string(owner.GetUID()) + "/" + hash
}

// covered returns the record stored for hash when it was recorded from
// owner's current version and already holds everything rec would add.
func (m *memo) covered(owner client.Object, hash string, rec revisions.Record) (revisions.Record, bool) {
	if owner.GetResourceVersion() == "" || owner.GetUID() == "" {
		return revisions.Record{}, false
	}
	v, ok := m.lru().Get(memoKey(owner, hash))
	if !ok {
		return revisions.Record{}, false
	}
	e := v.(memoEntry)
	if e.resourceVersion != owner.GetResourceVersion() || !sameRecord(revisions.Merge(e.record, rec), e.record) {
		return revisions.Record{}, false
	}
	return e.record, true
}

// remember notes that hash is recorded for owner's current version as rec.
func (m *memo) remember(owner client.Object, hash string, rec revisions.Record) {
	if owner.GetResourceVersion() == "" || owner.GetUID() == "" {
		return
	}
	m.lru().Add(memoKey(owner, hash), memoEntry{resourceVersion: owner.GetResourceVersion(), record: rec}, memoTTL)
}

// forget drops what is remembered of hash for owner (its record was deleted).
func (m *memo) forget(owner client.Object, hash string) {
	m.lru().Remove(memoKey(owner, hash))
}

// sameRecord says whether a and b record the same thing. Records hold
// times, whose Go values can differ for one instant (location, monotonic
// reading): compare their encodings in UTC.
func sameRecord(a, b revisions.Record) bool {
	ja, errA := json.Marshal(inUTC(a))
	jb, errB := json.Marshal(inUTC(b))
	return errA == nil && errB == nil && string(ja) == string(jb)
}

func inUTC(r revisions.Record) revisions.Record {
	r.ChangedAt = r.ChangedAt.UTC()
	r.Restarts = slices.Clone(r.Restarts)
	for i := range r.Restarts {
		r.Restarts[i].At = r.Restarts[i].At.UTC()
	}
	return r
}

// inFlightStripes is how many locks inFlight spreads the recordings over.
const inFlightStripes = 256

// inFlight serializes, within one process, the recordings of one content
// of one object (keyed as the memo is).
//
// Why: when edits of an object come one right after another, the
// reconciler records content N as it becomes live while the webhook
// records the same content N as the one edit N+1 replaces. Run at once,
// both find it unrecorded and both create it: one create fails
// (AlreadyExists) and its recorder reads the record back — three requests
// where one does. In turn, the second finds the first's record in the
// memo and sends none. Different contents and objects do not wait for
// each other, but for the rare two that share one of the stripes.
type inFlight struct {
	once  sync.Once
	locks keymutex.KeyMutex
}

// lock waits for the recordings of key in flight in this process, and
// returns the function that lets the next one in.
func (f *inFlight) lock(key string) (unlock func()) {
	f.once.Do(func() { f.locks = keymutex.NewHashed(inFlightStripes) })
	f.locks.LockKey(key)
	return func() { _ = f.locks.UnlockKey(key) }
}
