package webhooks

import (
	"context"
	"fmt"
	"maps"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// Why a request's old object is not what the API server stored, as
// Persisted.Check says it and rollout_guard_unverified_requests_total
// counts it.
const (
	// unverifiedNotFound: no object of that namespace and name is stored,
	// or the one stored has another UID.
	unverifiedNotFound = "not-found"
	// unverifiedNotCurrent: the object stored has another resourceVersion.
	// A request straight to the guard's port with an old or made-up
	// resourceVersion gets this; so does, rarely, a call of the API server
	// itself made with an old copy from its own cache, which the API server
	// then retries with the stored one (the retry records).
	unverifiedNotCurrent = "not-current"
	// unverifiedContent: the object stored at that resourceVersion has
	// other revision content.
	unverifiedContent = "content-differs"
	// unverifiedStamps: the object stored at that resourceVersion carries
	// other rollout-guard stamps (revision, author, highest versions run).
	unverifiedStamps = "stamps-differ"
	// unverifiedCreate: a CREATE whose object already carries a UID or a
	// resourceVersion, which the API server never sends to a mutating
	// webhook (it gives both once the webhooks have answered).
	unverifiedCreate = "create-with-identity"
)

// Persisted tells whether the old object of an admission request is what
// the API server stored for that object: the guard records a revision, a
// restart or a refused override only of an object so stored, never from a
// request body alone. Anyone who can reach the guard's port can send an
// AdmissionReview, and what it records is what undo rolls out.
//
// The stored object is the one the guard's cache holds at the request's
// resourceVersion — no request, the usual case, as the cache has seen the
// object before it is edited again — else the one a read of the API server
// returns (a GET, current, not from its watch cache).
type Persisted struct {
	// Cache reads the objects as the guard's cache holds them (the
	// manager's cache, which also holds the control planes of other
	// providers as unstructured objects); its copies may lack part of the content
	// (CacheOptions) and carry its hash (history.AnnotationCachedHash).
	Cache client.Reader
	// Live reads whole objects from the API server (the manager's
	// APIReader).
	Live client.Reader
}

// Check returns "" when old, of the given kind and whose revision content
// is snap, is what the API server stores for it: same UID, resourceVersion,
// revision content and rollout-guard stamps. Otherwise it returns why not
// (one of the unverified* reasons). An error means the API server could not
// be read.
func (p Persisted) Check(ctx context.Context, kind kinds.Kind, old client.Object, snap revisions.Snapshot) (string, error) {
	if p.Cache == nil || p.Live == nil {
		return "", fmt.Errorf("no reader of the stored %s objects is configured", kind.GVK.Kind)
	}
	key := client.ObjectKeyFromObject(old)
	cached := kind.New()
	err := p.Cache.Get(ctx, key, cached)
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("reading %s %s from the guard's cache: %w", kind.GVK.Kind, key, err)
	}
	if err == nil && sameIdentity(cached, old) {
		// The cache's copy at that resourceVersion: what it notes of the
		// content tells, when it notes something.
		if hash, ok := cachedContentHash(kind, cached); ok {
			return compareStored(cached, hash, old, snap), nil
		}
	}
	// The cache has not seen this resourceVersion (it is behind, or the
	// request names one that was never stored): ask the API server.
	live := kind.New()
	if err := p.Live.Get(ctx, key, live); err != nil {
		if apierrors.IsNotFound(err) {
			return unverifiedNotFound, nil
		}
		return "", fmt.Errorf("reading %s %s from the API server to check the request's old object: %w", kind.GVK.Kind, key, err)
	}
	switch {
	case live.GetUID() != old.GetUID():
		return unverifiedNotFound, nil
	case live.GetResourceVersion() != old.GetResourceVersion():
		return unverifiedNotCurrent, nil
	}
	liveSnap, err := kind.Snapshot(live)
	if err != nil {
		return "", fmt.Errorf("taking the revision of %s %s as stored: %w", kind.GVK.Kind, key, err)
	}
	return compareStored(live, liveSnap.Hash, old, snap), nil
}

// Verified is Check for a webhook about to record something of old: true
// when old is what the API server stored; otherwise it counts and logs the
// request (noteUnverified), naming what would have been recorded (what) and
// the request's user, and returns false.
func (p Persisted) Verified(ctx context.Context, kind kinds.Kind, old client.Object, snap revisions.Snapshot, what, user string) (bool, error) {
	reason, err := p.Check(ctx, kind, old, snap)
	if err != nil {
		return false, err
	}
	if reason != "" {
		noteUnverified(ctx, kind.GVK.Kind, reason, what, old, user)
		return false, nil
	}
	return true, nil
}

// sameIdentity says whether stored and claimed are the same object at the
// same resourceVersion.
func sameIdentity(stored, claimed client.Object) bool {
	return stored.GetUID() == claimed.GetUID() && stored.GetResourceVersion() == claimed.GetResourceVersion() &&
		stored.GetResourceVersion() != ""
}

// cachedContentHash returns the revision content hash of cached, a copy
// the guard's cache holds: the hash the cache noted for a kind it keeps
// without all of its content, else the hash of the copy itself. ok is
// false when the cache noted none (its content could not be taken).
func cachedContentHash(kind kinds.Kind, cached client.Object) (string, bool) {
	if !RevisionContentCached(kind.GVK) {
		hash, _ := history.CachedHash(cached)
		return hash, hash != ""
	}
	snap, err := kind.Snapshot(cached)
	if err != nil {
		return "", false
	}
	return snap.Hash, true
}

// compareStored compares stored, an object as the API server stores it
// (whose revision content hashes to storedHash), with claimed, a request's
// old object whose content is claimedSnap.
func compareStored(stored client.Object, storedHash string, claimed client.Object, claimedSnap revisions.Snapshot) string {
	switch {
	case !sameIdentity(stored, claimed):
		return unverifiedNotCurrent
	case storedHash != claimedSnap.Hash:
		return unverifiedContent
	}
	storedAt, claimedAt := stored.GetCreationTimestamp(), claimed.GetCreationTimestamp()
	if !maps.Equal(ours(stored.GetAnnotations(), false), ours(claimed.GetAnnotations(), false)) || !storedAt.Equal(&claimedAt) {
		return unverifiedStamps
	}
	return ""
}

// createUnverified returns unverifiedCreate when obj, the object of a
// CREATE request to a mutating webhook, carries an identity only a stored
// object has; "" otherwise.
func createUnverified(obj client.Object) string {
	if obj.GetUID() != "" || obj.GetResourceVersion() != "" {
		return unverifiedCreate
	}
	return ""
}

// noteUnverified counts and logs a request whose old object is not what
// the API server stored: nothing is recorded of it.
func noteUnverified(ctx context.Context, kind, reason, what string, obj client.Object, user string) {
	unverifiedRequestsTotal.WithLabelValues(kind, reason).Inc()
	log.FromContext(ctx).Info("not recording: the request's old object is not what the API server stored; a request sent straight to the guard's port, not by the API server, gets this",
		"kind", kind, "namespace", obj.GetNamespace(), "name", obj.GetName(), "resourceVersion", obj.GetResourceVersion(),
		"reason", reason, "record", what, "user", user, "caller", callerOf(ctx))
}

// callerKey is the context key of a request's remote address.
type callerKey struct{}

// withCaller keeps the remote address of an admission request in its
// context (admission.Webhook's WithContextFunc), so that what the guard
// logs of a request no API server sent names where it came from.
func withCaller(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, callerKey{}, r.RemoteAddr)
}

// callerOf returns the remote address withCaller kept, "" when none.
func callerOf(ctx context.Context) string {
	addr, _ := ctx.Value(callerKey{}).(string)
	return addr
}
