package webhooks

import (
	"sync"

	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// admittedSize bounds how many objects' last admitted content a Stamper
// remembers: the objects edited most recently, which are the ones edited
// next; one revision content each.
const admittedSize = 128

// admittedContent remembers, per object, the Snapshot of the content the
// Stamper last admitted it with, by the fingerprint of that content
// (kinds.Kind.Fingerprint).
//
// Why: every update the mutating webhook answers takes the Snapshot of its
// old object, whose content is, nearly always, what the previous update of
// the object brought — and the webhook took that Snapshot then. Taking it
// again costs encoding, canonicalizing and hashing the whole content;
// comparing fingerprints costs encoding it once. An old object whose
// fingerprint differs (another client's webhook changed the content after
// this one, a change made while the guard was down, a forged request) is
// taken whole, as before: what is remembered is only ever the Snapshot of
// content with that very encoding, so it proves nothing the Snapshot
// would not.
//
// Safe for concurrent use; the zero value is ready.
type admittedContent struct {
	once  sync.Once
	cache *lru.Cache
}

type admittedEntry struct {
	print uint64
	snap  revisions.Snapshot
}

func (a *admittedContent) lru() *lru.Cache {
	a.once.Do(func() { a.cache = lru.New(admittedSize) })
	return a.cache
}

// snapshot returns the Snapshot of obj, of kind: the one remembered when
// obj's content has the fingerprint remembered, else taken now.
func (a *admittedContent) snapshot(kind kinds.Kind, obj client.Object) (revisions.Snapshot, error) {
	if kind.Fingerprint != nil && obj.GetUID() != "" {
		if v, ok := a.lru().Get(obj.GetUID()); ok {
			if print, err := kind.Fingerprint(obj); err == nil && print == v.(admittedEntry).print {
				return v.(admittedEntry).snap, nil
			}
		}
	}
	return kind.Snapshot(obj)
}

// remember notes snap, the Snapshot of obj (of kind) as admitted.
func (a *admittedContent) remember(kind kinds.Kind, obj client.Object, snap revisions.Snapshot) {
	if kind.Fingerprint == nil || obj.GetUID() == "" {
		return
	}
	print, err := kind.Fingerprint(obj)
	if err != nil {
		return
	}
	a.lru().Add(obj.GetUID(), admittedEntry{print: print, snap: snap})
}
