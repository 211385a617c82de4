package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// Stamper is the mutating webhook of MachineDeployments, MachinePools,
// KubeadmControlPlanes, the control planes of other providers the guard
// polices, ClusterClasses and Clusters with a topology. On every change of
// what a rollout is made of (for a ClusterClass its spec, for a Cluster its
// spec.topology) it
// stamps the object with the next revision number, who made the change (from
// the request, never from the object), when, through which field manager and
// why; it records the revision being replaced in a RolloutRevision when
// the request's old object is what the API server stored (Persisted); it
// stamps a restart (rollout.after changed) for the history reconciler to
// record once stored; and it overwrites any stamp a client tried to set
// itself — but for the stamps a created object carries when its user may
// restore history (Restorers: clusterctl move, a restore).
type Stamper struct {
	// Kind is the kind this instance stamps.
	Kind kinds.Kind
	// Recorder writes the replaced revision.
	Recorder *history.Recorder
	// Stored tells whether a request's old object is what the API server
	// stored: the replaced revision is recorded only then.
	Stored Persisted
	// Policy judges a change when a client asks for an override, so the
	// override's rules can be recorded.
	Policy policy.Decider
	// Overrides says who may use the break-glass override.
	Overrides policy.OverrideGroups
	// Restorers tells who may create the object with the revision stamps
	// it carried elsewhere, kept as they are (a move or a restore); nil
	// keeps none.
	Restorers Restorers
	// Key signs the stamps the Stamper writes (revisions.AnnotationSignature);
	// empty signs none.
	Key revisions.StampKey
	// Stamps tells whether the guard wrote the stamps of a stored object;
	// nil takes every stamp as written.
	Stamps *history.Stamps
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Decoder decodes admission requests.
	Decoder admission.Decoder

	// admitted remembers the content each object was last admitted with,
	// so that its next update takes no Snapshot of its old object again.
	admitted admittedContent
}

var _ admission.Handler = &Stamper{}

// Handle answers one admission request with a JSON patch of the object's annotations.
func (s *Stamper) Handle(ctx context.Context, req admission.Request) admission.Response {
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update:
	case admissionv1.Delete, admissionv1.Connect:
		// Nothing to stamp; the guard is registered for neither.
		return admission.Allowed("")
	default:
		// Treating an operation it does not know as a create would stamp a
		// revision 1 on an object that has a history.
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("rollout-guard cannot stamp %s %s/%s: operation %q is not CREATE or UPDATE",
			s.Kind.GVK.Kind, req.Namespace, req.Name, req.Operation))
	}
	if err := checkRequestObjects(req, s.Kind.GVK.Kind); err != nil {
		return badRequest(err)
	}
	newObj := s.Kind.New()
	if err := s.Decoder.DecodeRaw(req.Object, newObj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("rollout-guard could not decode the %s: %w", s.Kind.GVK.Kind, err))
	}
	var oldObj client.Object
	if req.Operation == admissionv1.Update {
		oldObj = s.Kind.New()
		if err := s.Decoder.DecodeRaw(req.OldObject, oldObj); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("rollout-guard could not decode the previous %s: %w", s.Kind.GVK.Kind, err))
		}
	}
	var stamps map[string]*string
	var err error
	if s.Kind.Tracked(newObj) || (oldObj != nil && s.Kind.Tracked(oldObj)) {
		stamps, err = s.stamps(ctx, req, oldObj, newObj)
	} else {
		// An object without revisions (a Cluster without a topology)
		// carries no stamps: whatever a client set is removed.
		stamps = untracked(newObj.GetAnnotations())
	}
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if newObj.GetName() == "" && newObj.GetGenerateName() == "" {
		// An object without a name may lack the metadata a patch of its
		// annotations adds to: patch the JSON as sent (no API server sends
		// one; a malformed request may).
		patched, err := withAnnotations(req.Object.Raw, stamps)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		return admission.PatchResponseFromRaw(req.Object.Raw, patched)
	}
	return admission.Patched("", annotationPatch(newObj.GetAnnotations(), stamps)...)
}

// annotationPatch returns the JSON patch that makes annotations current
// (the object's, as sent) carry changes: a nil value removes the key. It
// touches nothing but metadata.annotations, and sends no operation for a
// change the object already carries.
//
// Why not the patch between the object as sent and as stamped
// (admission.PatchResponseFromRaw): that decodes the whole object three more
// times and compares every field of it, much of the mutating webhook's CPU
// (BenchmarkStamperNewRevision), for a patch that can only touch
// annotations.
func annotationPatch(current map[string]string, changes map[string]*string) []jsonpatch.JsonPatchOperation {
	keys := slices.Sorted(maps.Keys(changes))
	if len(current) == 0 {
		// No annotations to add to: add them whole.
		add := map[string]string{}
		for _, k := range keys {
			if v := changes[k]; v != nil {
				add[k] = *v
			}
		}
		if len(add) == 0 {
			return nil
		}
		return []jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/annotations", Value: add}}
	}
	var ops []jsonpatch.JsonPatchOperation
	for _, k := range keys {
		v := changes[k]
		old, has := current[k]
		path := "/metadata/annotations/" + jsonPointerEscaper.Replace(k)
		switch {
		case v == nil && has:
			ops = append(ops, jsonpatch.JsonPatchOperation{Operation: "remove", Path: path})
		case v != nil && (!has || old != *v):
			ops = append(ops, jsonpatch.JsonPatchOperation{Operation: "add", Path: path, Value: *v})
		}
	}
	return ops
}

// jsonPointerEscaper escapes an annotation key as a JSON pointer token
// (RFC 6901): "~" as "~0", "/" as "~1".
var jsonPointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// recordStored records rec, the stamps of oldObj, when oldObj is what the
// API server stored (else counts and logs the request); what names the
// record in the log.
func (s *Stamper) recordStored(ctx context.Context, oldObj client.Object, oldSnap revisions.Snapshot, rec revisions.Record, what, user string) error {
	stored, err := s.Stored.Verified(ctx, s.Kind, oldObj, oldSnap, what, user)
	if err != nil || !stored {
		return err
	}
	if err := s.Recorder.Record(ctx, oldObj, s.Kind.GVK, oldSnap, rec); err != nil {
		return err
	}
	revisionsRecordedTotal.WithLabelValues(s.Kind.GVK.Kind).Inc()
	return nil
}

func (s *Stamper) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC().Truncate(time.Second)
	}
	return time.Now().UTC().Truncate(time.Second)
}

// withAnnotations returns raw (a JSON object) with its annotations changed:
// a nil value removes the key. Everything else is left byte-for-byte alone in
// meaning, so the patch the API server applies touches annotations only.
func withAnnotations(raw []byte, changes map[string]*string) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decoding the object: %w", err)
	}
	if obj == nil {
		return nil, fmt.Errorf("decoding the object: it is null, not a JSON object")
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	for k, v := range changes {
		if v == nil {
			delete(ann, k)
			continue
		}
		ann[k] = *v
	}
	if len(ann) == 0 {
		delete(meta, "annotations")
	} else {
		meta["annotations"] = ann
	}
	return json.Marshal(obj)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func strPtr(s string) *string { return &s }

// untracked returns the changes that take every revision stamp off an
// object without revisions, leaving the override annotation (the
// validating webhook's to judge).
func untracked(ann map[string]string) map[string]*string {
	out := map[string]*string{}
	for k := range ann {
		if strings.HasPrefix(k, revisions.Prefix) && k != revisions.AnnotationOverride {
			out[k] = nil
		}
	}
	return out
}

// stampHighest sets the highest-run annotation of the object id to highest.
func stampHighest(out map[string]*string, highest revisions.HighestRun, id string) error {
	data, err := json.Marshal(highest)
	if err != nil {
		return fmt.Errorf("encoding the highest versions run by %s: %w", id, err)
	}
	out[revisions.AnnotationHighestRun] = strPtr(string(data))
	return nil
}
