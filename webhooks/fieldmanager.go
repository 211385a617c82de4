package webhooks

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// fieldManagerOf is the field manager of a request as the API server
// records it in the object's managedFields: the one the request's options
// name or, when they name none, the manager of the entry of the object's
// managedFields that this request changed. A client that sends no
// fieldManager (clusterctl, most controllers) is recorded by the API server
// under its user agent's name ("clusterctl"), which only that entry
// carries. "" when neither says. Reading managedFields decodes both
// objects, so the stamper asks only for the stamps that name the manager
// (a new revision, a restart, a create), never for an unchanged content.
func fieldManagerOf(req admission.Request) string {
	if m := optionsFieldManager(req.Options.Raw); m != "" {
		return m
	}
	if m := changedManager(req.OldObject.Raw, req.Object.Raw); m != "" {
		return m
	}
	return specOwner(req.OldObject.Raw, req.Object.Raw)
}

// optionsFieldManager is the fieldManager of a request's options (create,
// update or patch options), "" when they name none.
func optionsFieldManager(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var opts struct {
		FieldManager string `json:"fieldManager"`
	}
	if err := json.Unmarshal(raw, &opts); err != nil {
		return ""
	}
	return opts.FieldManager
}

// managedEntry is the part of a managedFields entry that tells whether a
// request changed it.
type managedEntry struct {
	Manager     string          `json:"manager"`
	Operation   string          `json:"operation"`
	Time        string          `json:"time"`
	Subresource string          `json:"subresource"`
	FieldsV1    json.RawMessage `json:"fieldsV1"`
}

// owner says whether o is the entry of the same manager as e.
func (e managedEntry) owner(o managedEntry) bool {
	return e.Manager == o.Manager && e.Operation == o.Operation && e.Subresource == o.Subresource
}

// managedEntries reads the managedFields of an object's JSON; nil when it
// has none or is not JSON.
func managedEntries(raw []byte) []managedEntry {
	if len(raw) == 0 {
		return nil
	}
	var obj struct {
		Metadata struct {
			ManagedFields []managedEntry `json:"managedFields"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil
	}
	return obj.Metadata.ManagedFields
}

// changedManager is the manager of the request that turned oldRaw into
// newRaw, as the API server recorded it in the main resource's
// managedFields: the entry that is new, whose time the API server advanced,
// or that gained fields. An entry that only lost fields belongs to another
// manager whose fields this request took over. When several qualify, the
// one with the latest time; "" when none does (a request that changed none
// of its manager's fields within the same second as its last one).
func changedManager(oldRaw, newRaw []byte) string {
	old := managedEntries(oldRaw)
	var changed managedEntry
	for _, e := range managedEntries(newRaw) {
		if e.Subresource != "" || e.Manager == "" {
			continue
		}
		i := slices.IndexFunc(old, e.owner)
		if i >= 0 && old[i].Time == e.Time && !gained(old[i].FieldsV1, e.FieldsV1) {
			continue
		}
		// RFC 3339 times of one precision compare as strings.
		if changed.Manager == "" || e.Time > changed.Time {
			changed = e
		}
	}
	return changed.Manager
}

// specOwner is the manager that owns, in newRaw's managedFields, a field of
// spec this request changed: an update takes ownership of every field it
// changes, so that is the request's manager even when its entry looks the
// same as before (a client that wrote twice in one second, changing only
// fields it already owned). Lists are compared whole. When several own
// one, the one with the latest time; "" when the spec did not change or no
// entry owns the change.
func specOwner(oldRaw, newRaw []byte) string {
	if len(oldRaw) == 0 {
		return ""
	}
	var before, after struct {
		Spec any `json:"spec"`
	}
	if json.Unmarshal(oldRaw, &before) != nil || json.Unmarshal(newRaw, &after) != nil {
		return ""
	}
	var paths []fieldpath.Path
	changedPaths(fieldpath.MakePathOrDie("spec"), before.Spec, after.Spec, &paths)
	if len(paths) == 0 {
		return ""
	}
	var owner managedEntry
	for _, e := range managedEntries(newRaw) {
		if e.Subresource != "" || e.Manager == "" {
			continue
		}
		set := &fieldpath.Set{}
		if set.FromJSON(bytes.NewReader(e.FieldsV1)) != nil {
			continue
		}
		if slices.ContainsFunc(paths, func(p fieldpath.Path) bool { return owns(set, p) }) &&
			(owner.Manager == "" || e.Time > owner.Time) {
			owner = e
		}
	}
	return owner.Manager
}

// changedPaths appends to out the paths below at where before and after
// differ: down through objects, lists and values whole.
func changedPaths(at fieldpath.Path, before, after any, out *[]fieldpath.Path) {
	b, bok := before.(map[string]any)
	a, aok := after.(map[string]any)
	if !bok || !aok {
		if !reflect.DeepEqual(before, after) {
			*out = append(*out, at.Copy())
		}
		return
	}
	for _, k := range slices.Sorted(maps.Keys(a)) {
		changedPaths(append(at, fieldpath.PathElement{FieldName: &k}), b[k], a[k], out)
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			*out = append(*out, append(at.Copy(), fieldpath.PathElement{FieldName: &k}))
		}
	}
}

// owns says whether set holds path p, a field above it (owned whole) or a
// field below it.
func owns(set *fieldpath.Set, p fieldpath.Path) bool {
	for i := range p {
		if set.Has(p[:i+1]) {
			return true
		}
	}
	for _, pe := range p {
		set = set.WithPrefix(pe)
	}
	return !set.Empty()
}

// gained says whether the field set after holds a field the set before does
// not; false when either cannot be read.
func gained(before, after json.RawMessage) bool {
	if bytes.Equal(before, after) {
		return false
	}
	b, a := &fieldpath.Set{}, &fieldpath.Set{}
	if b.FromJSON(bytes.NewReader(before)) != nil || a.FromJSON(bytes.NewReader(after)) != nil {
		return false
	}
	return !a.Difference(b).Empty()
}
