package history

import (
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// wakesOn is the filter of the history reconciler's update events: it
// wakes on an update that may change what the reconciler records — the
// revision stamps and restarts the guard wrote (the project's
// annotations), and the revision content (the hash the cache noted of it,
// one of those annotations, or the generation for a kind cached with all
// of its content) — and on every create, delete and generic event.
//
// Why not Cluster API's usual generation-changed filter: a worker pool's
// replicas, scaled by an autoscaler or by hand, are part of its spec; each
// scale would wake the reconciler to list the object's history and find
// nothing to record. Status, label and others' annotation updates never
// wake it either.
func wakesOn() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld == nil || e.ObjectNew == nil || revisionMayChange(e.ObjectOld, e.ObjectNew)
	}}
}

// revisionMayChange says whether an update from old to new (cached copies)
// may change what the history reconciler records of the object.
func revisionMayChange(old, new client.Object) bool {
	if !sameProjectAnnotations(old.GetAnnotations(), new.GetAnnotations()) {
		return true
	}
	_, oldNoted := CachedHash(old)
	_, newNoted := CachedHash(new)
	if oldNoted && newNoted {
		// The content's hash is among the annotations compared.
		return false
	}
	return old.GetGeneration() != new.GetGeneration()
}

// sameProjectAnnotations says whether a and b hold the same annotations
// the project owns (revisions.Prefix): the only ones the guard's cache
// keeps, but compared alone so that the filter does not depend on the
// cache's trimming. It allocates nothing: it runs on every update event.
func sameProjectAnnotations(a, b map[string]string) bool {
	n := 0
	for k, v := range a {
		if !strings.HasPrefix(k, revisions.Prefix) {
			continue
		}
		n++
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	for k := range b {
		if strings.HasPrefix(k, revisions.Prefix) {
			n--
		}
	}
	return n == 0
}
