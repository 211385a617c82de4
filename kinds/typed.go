package kinds

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// The entries of Cluster API's own kinds are written against their Go
// types; these adapters make them the Kind's functions of client.Object.

// snapshotAs returns the Snapshot of a kind of Go type T: an object of
// another type is an error.
func snapshotAs[T client.Object](kind string, snapshot func(T) (revisions.Snapshot, error)) func(client.Object) (revisions.Snapshot, error) {
	return func(o client.Object) (revisions.Snapshot, error) {
		t, ok := o.(T)
		if !ok {
			return revisions.Snapshot{}, errWrongKind(kind, o)
		}
		return snapshot(t)
	}
}

// fingerprintAs returns the Fingerprint of a kind of Go type T: an object
// of another type is an error.
func fingerprintAs[T client.Object](kind string, fingerprint func(T) (uint64, error)) func(client.Object) (uint64, error) {
	return func(o client.Object) (uint64, error) {
		t, ok := o.(T)
		if !ok {
			return 0, errWrongKind(kind, o)
		}
		return fingerprint(t)
	}
}

// readAs returns a reading of a kind of Go type T: "" for an object of
// another type.
func readAs[T client.Object](read func(T) string) func(client.Object) string {
	return func(o client.Object) string {
		t, ok := o.(T)
		if !ok {
			return ""
		}
		return read(t)
	}
}

// trimAs returns the Trim of a kind of Go type T: an object of another type
// is left alone.
func trimAs[T client.Object](trim func(T)) func(client.Object) {
	return func(o client.Object) {
		if t, ok := o.(T); ok {
			trim(t)
		}
	}
}

// decodeLeanAs returns the DecodeLean of a kind of Go type T, decoded as a
// leanObject of spec S and status St that set turns into the object.
func decodeLeanAs[T client.Object, S, St any](gvk schema.GroupVersionKind, set func(leanObject[S, St], T)) func([]byte, client.Object) error {
	return func(raw []byte, into client.Object) error {
		t, ok := into.(T)
		if !ok {
			return errWrongKind(gvk.Kind, into)
		}
		return decodeLean(raw, gvk, into, func(l leanObject[S, St]) { set(l, t) })
	}
}
