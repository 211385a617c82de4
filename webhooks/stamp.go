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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// Stamper is the mutating webhook of MachineDeployments, MachinePools,
// KubeadmControlPlanes and the control planes of other providers the guard
// polices. On every change of what a rollout is made of it
// stamps the object with the next revision number, who made the change (from
// the request, never from the object), when, through which field manager and
// why; it records the revision being replaced in a ControllerRevision when
// the request's old object is what the API server stored (Persisted); it
// stamps a restart (rollout.after changed) for the history reconciler to
// record once stored; and it overwrites any stamp a client tried to set
// itself.
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
	Policy Decider
	// Overrides says who may use the break-glass override.
	Overrides policy.OverrideGroups
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Decoder decodes admission requests.
	Decoder admission.Decoder
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
	stamps, err := s.stamps(ctx, req, oldObj, newObj)
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
// times and compares every field of it, a third of the mutating webhook's
// CPU (BenchmarkStamperNewRevision), for a patch that can only touch
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

// stamps returns the annotations the object must carry after this request:
// nil values delete a key.
func (s *Stamper) stamps(ctx context.Context, req admission.Request, oldObj, newObj client.Object) (map[string]*string, error) {
	kind := s.Kind.GVK.Kind
	id := fmt.Sprintf("%s %s/%s", kind, newObj.GetNamespace(), newObj.GetName())
	newSnap, err := s.Kind.Snapshot(newObj)
	if err != nil {
		return nil, fmt.Errorf("rollout-guard could not take the revision of %s: %w", id, err)
	}
	now := s.now()
	user := req.UserInfo.Username
	manager := fieldManagerOf(req)
	newAnn := newObj.GetAnnotations()
	var oldAnn map[string]string
	if oldObj != nil {
		oldAnn = oldObj.GetAnnotations()
	}
	clientCause := ""
	if c := newAnn[revisions.AnnotationChangeCause]; c != "" && c != oldAnn[revisions.AnnotationChangeCause] {
		clientCause = c
	}

	var rec revisions.Record
	var restart *revisions.Restart
	dryRun := req.DryRun != nil && *req.DryRun
	switch {
	case oldObj == nil:
		if reason := createUnverified(newObj); reason != "" {
			noteUnverified(ctx, kind, reason, "nothing (a create)", newObj, user)
		}
		rec = revisions.Record{Revision: 1, History: []int64{1}, ChangedBy: user, ChangedAt: now, FieldManager: manager,
			ChangeCause: firstNonEmpty(clientCause, "created"), ChangeType: revisions.ChangeCreated}
	default:
		oldSnap, err := s.Kind.Snapshot(oldObj)
		if err != nil {
			return nil, fmt.Errorf("rollout-guard could not take the previous revision of %s: %w", id, err)
		}
		oldRec, err := revisions.RecordFromAnnotations(oldAnn)
		if err != nil {
			log.FromContext(ctx).Info("ignoring malformed revision stamps on the stored object", "object", id, "error", err.Error())
			oldRec = revisions.Record{}
		}
		if oldRec.Revision == 0 {
			oldRec = history.Adopted(oldObj)
		}
		if oldSnap.Hash == newSnap.Hash {
			// Not a new revision: keep the stored stamps, whatever the client
			// sent. A restart is stamped, and recorded once the API server
			// has stored it (revisions.AnnotationRestart).
			rec = oldRec
			if after := s.Kind.RolloutAfter(newObj); after != "" && after != s.Kind.RolloutAfter(oldObj) {
				restart = &revisions.Restart{At: now, By: user, FieldManager: manager, After: after, Cause: clientCause}
				// This stamp replaces the stored one: make sure the restart
				// stored is recorded, as the reconciler may not have seen it.
				if !dryRun && oldAnn[revisions.AnnotationRestart] != "" {
					if err := s.recordStored(ctx, oldObj, oldSnap, oldRec, "the restart before", user); err != nil {
						return nil, fmt.Errorf("rollout-guard could not record the last restart of %s: %w", id, err)
					}
				}
			}
			break
		}
		// A new revision: record the one it replaces, then stamp the new one,
		// numbered above every recorded revision (one recorded for a change
		// that slipped past the guard is above the stored stamps).
		next := oldRec.Revision + 1
		if !dryRun {
			// Not stored: answered as it would be, recording nothing. A
			// request of the API server's own carries the stored object (its
			// retry, if this was one made with an old copy, records).
			stored, err := s.Stored.Verified(ctx, s.Kind, oldObj, oldSnap, fmt.Sprintf("revision %d", oldRec.Revision), user)
			if err != nil {
				return nil, fmt.Errorf("rollout-guard could not check revision %d of %s against the API server: %w", oldRec.Revision, id, err)
			}
			if stored {
				highest, err := s.Recorder.RecordReplaced(ctx, oldObj, s.Kind.GVK, oldSnap, oldRec)
				if err != nil {
					return nil, fmt.Errorf("rollout-guard could not record revision %d of %s: %w", oldRec.Revision, id, err)
				}
				next = max(next, highest+1)
				revisionsRecordedTotal.WithLabelValues(kind).Inc()
			}
		}
		cause := clientCause
		if cause == "" {
			if cause, err = revisions.ChangeCause(oldSnap, newSnap); err != nil {
				return nil, fmt.Errorf("rollout-guard could not describe the change of %s: %w", id, err)
			}
		}
		changeType := revisions.ChangeRollout
		if inPlace, err := revisions.IsInPlace(oldSnap, newSnap); err == nil && inPlace {
			changeType = revisions.ChangeInPlace
		}
		rec = revisions.Record{Revision: next, History: []int64{next}, ChangedBy: user, ChangedAt: now, FieldManager: manager,
			ChangeCause: cause, ChangeType: changeType}
	}

	// Break-glass: a request that sets the override annotation, from a member
	// of an override group, is recorded with the rules it overrides.
	rec.Override = nil
	if reason, requested := policy.OverrideRequested(oldObj, newObj); requested {
		if s.Overrides.Allows(req.UserInfo) {
			d, _, err := s.Policy.Decide(ctx, oldObj, newObj)
			if err != nil {
				return nil, err
			}
			if rules := policy.RuleIDs(d); len(rules) > 0 {
				rec.Override = &revisions.Override{By: user, Reason: reason, Rules: rules}
			}
		}
	} else if oldObj != nil && rec.Revision == policy.StampsOf(oldObj).Revision {
		// Same revision: keep the override that made it, if any.
		rec.Override = policy.StampsOf(oldObj).Override
	}

	out := map[string]*string{}
	// Forget every stamp the client sent; set exactly ours.
	for k := range newAnn {
		if strings.HasPrefix(k, revisions.Prefix) && k != revisions.AnnotationOverride {
			out[k] = nil
		}
	}
	// An override annotation carried over from the stored object is spent.
	if oldObj != nil && newAnn[revisions.AnnotationOverride] != "" && newAnn[revisions.AnnotationOverride] == oldAnn[revisions.AnnotationOverride] {
		out[revisions.AnnotationOverride] = nil
	}
	for k, v := range rec.Annotations() {
		if v == "" {
			out[k] = nil // an empty stamp says nothing; keep the object tidy
			continue
		}
		out[k] = strPtr(v)
	}
	// The latest restart of the live revision: this request's, else the
	// stored one while the revision stays; a new revision has none yet.
	out[revisions.AnnotationRestart] = nil
	switch {
	case restart != nil:
		stamp, err := revisions.RestartStamp(*restart)
		if err != nil {
			return nil, fmt.Errorf("rollout-guard could not stamp the restart of %s: %w", id, err)
		}
		out[revisions.AnnotationRestart] = strPtr(stamp)
	case oldObj != nil && rec.Revision == policy.StampsOf(oldObj).Revision && oldAnn[revisions.AnnotationRestart] != "":
		out[revisions.AnnotationRestart] = strPtr(oldAnn[revisions.AnnotationRestart])
	}
	if s.Kind.GVK.Kind == kinds.KubeadmControlPlane.GVK.Kind {
		oldKCP, _ := oldObj.(*controlplanev1.KubeadmControlPlane)
		var prev int64
		highest := policy.HighestRunOf(oldKCP)
		if oldKCP != nil {
			prev = policy.StampsOf(oldKCP).Revision
			// A revert of a bump that never rolled out takes the bump out of
			// what the control plane has run.
			newKCP, _ := newObj.(*controlplanev1.KubeadmControlPlane)
			if rec.Revision != prev {
				before, err := s.Policy.RevertedRun(ctx, oldKCP, newKCP)
				if err != nil {
					return nil, fmt.Errorf("rollout-guard could not tell whether %s reverts a bump: %w", id, err)
				}
				if before != nil {
					highest = *before
				}
			}
		}
		// Advance keeps what ran before this revision, so that a bump can be
		// reverted while it has not rolled out (policy.RevertedRun).
		if err := stampHighest(out, highest.Advance(newSnap, rec.Revision, prev), id); err != nil {
			return nil, err
		}
	}
	if newCP, isContract := newObj.(*unstructured.Unstructured); isContract {
		// A control plane of another provider: the highest Kubernetes
		// version it has run, kept as for a KubeadmControlPlane (no etcd).
		oldCP, _ := oldObj.(*unstructured.Unstructured)
		highest := policy.HighestRunOfContract(oldCP)
		var prev int64
		if oldCP != nil {
			prev = policy.StampsOf(oldCP).Revision
			if before := policy.RevertedRunOfContract(oldCP, newCP); rec.Revision != prev && before != nil {
				highest = *before
			}
		}
		if err := stampHighest(out, highest.Advance(newSnap, rec.Revision, prev), id); err != nil {
			return nil, err
		}
	}
	return out, nil
}

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

// fieldManagerOf is the field manager a request names in its options.
func fieldManagerOf(req admission.Request) string {
	if len(req.Options.Raw) == 0 {
		return ""
	}
	var opts struct {
		FieldManager string `json:"fieldManager"`
	}
	if err := json.Unmarshal(req.Options.Raw, &opts); err != nil {
		return ""
	}
	return opts.FieldManager
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

// stampHighest sets the highest-run annotation of the object id to highest.
func stampHighest(out map[string]*string, highest revisions.HighestRun, id string) error {
	data, err := json.Marshal(highest)
	if err != nil {
		return fmt.Errorf("encoding the highest versions run by %s: %w", id, err)
	}
	out[revisions.AnnotationHighestRun] = strPtr(string(data))
	return nil
}
