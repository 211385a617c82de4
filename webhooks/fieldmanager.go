package webhooks

import (
	"bytes"
	"encoding/json"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// fieldManagerOf is the field manager of a request as the API server
// records it in the object's managedFields: the one the request's options
// name or, when they name none, the manager of the entry of the object's
// managedFields that this request changed. A client that sends no
// fieldManager (clusterctl, most controllers) is recorded by the API server
// under its user agent's name ("clusterctl"), which only that entry
// carries. "" when neither says.
func fieldManagerOf(req admission.Request) string {
	if m := optionsFieldManager(req.Options.Raw); m != "" {
		return m
	}
	return changedManager(req.OldObject.Raw, req.Object.Raw)
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
	APIVersion  string          `json:"apiVersion"`
	Time        string          `json:"time"`
	Subresource string          `json:"subresource"`
	FieldsV1    json.RawMessage `json:"fieldsV1"`
}

// same says whether two entries are alike in everything a request's change
// of the manager's fields updates.
func (e managedEntry) same(o managedEntry) bool {
	return e.Manager == o.Manager && e.Operation == o.Operation && e.APIVersion == o.APIVersion &&
		e.Time == o.Time && e.Subresource == o.Subresource && bytes.Equal(e.FieldsV1, o.FieldsV1)
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

// changedManager is the manager of the main resource's managedFields entry
// that newRaw has and oldRaw has not (new, or with other fields or another
// time): the manager of the request that turned one into the other. When
// several changed, the one with the latest time; "" when none did.
func changedManager(oldRaw, newRaw []byte) string {
	old := managedEntries(oldRaw)
	var changed managedEntry
	for _, e := range managedEntries(newRaw) {
		if e.Subresource != "" || e.Manager == "" {
			continue
		}
		unchanged := false
		for _, o := range old {
			if o.same(e) {
				unchanged = true
				break
			}
		}
		// RFC 3339 times of one precision compare as strings.
		if !unchanged && (changed.Manager == "" || e.Time > changed.Time) {
			changed = e
		}
	}
	return changed.Manager
}
