package webhooks

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func TestFieldManagerOf(t *testing.T) {
	const (
		kubectl         = `{"manager":"kubectl-patch","operation":"Update","apiVersion":"cluster.x-k8s.io/v1beta2","time":"2026-12-04T10:00:00Z","fieldsV1":{"f:spec":{"f:replicas":{}}}}`
		status          = `{"manager":"capi-controller","operation":"Update","apiVersion":"cluster.x-k8s.io/v1beta2","time":"2026-12-04T10:00:05Z","subresource":"status","fieldsV1":{"f:status":{}}}`
		status2         = `{"manager":"capi-controller","operation":"Update","apiVersion":"cluster.x-k8s.io/v1beta2","time":"2026-12-04T10:09:05Z","subresource":"status","fieldsV1":{"f:status":{"f:x":{}}}}`
		clusterctl      = `{"manager":"clusterctl","operation":"Update","apiVersion":"cluster.x-k8s.io/v1beta2","time":"2026-12-04T10:01:00Z","fieldsV1":{"f:spec":{"f:rollout":{}}}}`
		clusterctlLater = `{"manager":"clusterctl","operation":"Update","apiVersion":"cluster.x-k8s.io/v1beta2","time":"2026-12-04T10:01:00Z","fieldsV1":{"f:spec":{"f:rollout":{"f:after":{}}}}}`
		other           = `{"manager":"other","operation":"Update","apiVersion":"cluster.x-k8s.io/v1beta2","time":"2026-12-04T10:02:00Z","fieldsV1":{"f:spec":{"f:paused":{}}}}`
		// argo owns the template, then loses it to a writer in the same second.
		argo     = `{"manager":"argo","operation":"Update","apiVersion":"cluster.x-k8s.io/v1beta2","time":"2026-12-04T10:03:00Z","fieldsV1":{"f:spec":{"f:paused":{},"f:template":{}}}}`
		argoLost = `{"manager":"argo","operation":"Update","apiVersion":"cluster.x-k8s.io/v1beta2","time":"2026-12-04T10:03:00Z","fieldsV1":{"f:spec":{"f:paused":{}}}}`
		writer   = `{"manager":"e2e.test","operation":"Update","apiVersion":"cluster.x-k8s.io/v1beta2","time":"2026-12-04T10:03:00Z","fieldsV1":{"f:spec":{"f:template":{}}}}`
	)
	objWith := func(spec string, entries ...string) []byte {
		out := `{"metadata":{"name":"md","managedFields":[`
		for i, e := range entries {
			if i > 0 {
				out += ","
			}
			out += e
		}
		return []byte(out + `]},"spec":` + spec + `}`)
	}
	obj := func(entries ...string) []byte { return objWith(`{}`, entries...) }
	const (
		v1 = `{"paused":false,"template":{"spec":{"version":"v1.35.2","list":[1,2]}}}`
		v2 = `{"paused":false,"template":{"spec":{"version":"v1.36.1","list":[1,2]}}}`
		l2 = `{"paused":false,"template":{"spec":{"version":"v1.35.2","list":[1,3]}}}`
		// bob owns the version leaf, carol the list, dave the paused flag.
		bob   = `{"manager":"bob","operation":"Update","time":"2026-12-04T10:04:00Z","fieldsV1":{"f:spec":{"f:template":{"f:spec":{"f:version":{}}}}}}`
		carol = `{"manager":"carol","operation":"Update","time":"2026-12-04T10:04:00Z","fieldsV1":{"f:spec":{"f:template":{"f:spec":{"f:list":{}}}}}}`
		dave  = `{"manager":"dave","operation":"Update","time":"2026-12-04T10:04:30Z","fieldsV1":{"f:spec":{"f:paused":{}}}}`
		whole = `{"manager":"erin","operation":"Update","time":"2026-12-04T10:04:00Z","fieldsV1":{"f:spec":{"f:template":{}}}}`
	)
	for _, tc := range []struct {
		name     string
		options  string
		old, new []byte
		want     string
	}{
		{name: "named in the options", options: `{"fieldManager":"kubectl-patch"}`, old: obj(kubectl), new: obj(clusterctl), want: "kubectl-patch"},
		{name: "a new entry", old: obj(kubectl), new: obj(kubectl, clusterctl), want: "clusterctl"},
		{name: "an entry whose fields changed within the same second", old: obj(kubectl, clusterctl), new: obj(kubectl, clusterctlLater), want: "clusterctl"},
		{name: "a status entry is not the main resource's", old: obj(kubectl, status), new: obj(kubectl, status2), want: ""},
		{name: "several changed: the latest", old: obj(kubectl), new: obj(kubectl, clusterctl, other), want: "other"},
		{name: "a create", new: obj(clusterctl), want: "clusterctl"},
		{name: "the writer, not the manager whose fields it took in the same second", old: obj(argo), new: obj(argoLost, writer), want: "e2e.test"},
		{name: "the writer that gained a field in the same second it last wrote", old: obj(argoLost, `{"manager":"e2e.test","operation":"Update","time":"2026-12-04T10:03:00Z","fieldsV1":{"f:spec":{}}}`), new: obj(argoLost, writer), want: "e2e.test"},
		{name: "a manager's time advanced without new fields", old: obj(kubectl, `{"manager":"clusterctl","operation":"Update","time":"2026-12-04T09:00:00Z","fieldsV1":{"f:spec":{"f:rollout":{}}}}`), new: obj(kubectl, clusterctl), want: "clusterctl"},
		{name: "nothing changed", old: obj(kubectl), new: obj(kubectl), want: ""},
		{name: "entries alike: the owner of the changed leaf", old: objWith(v1, bob, carol, dave), new: objWith(v2, bob, carol, dave), want: "bob"},
		{name: "entries alike: the owner of the changed list", old: objWith(v1, bob, carol, dave), new: objWith(l2, bob, carol, dave), want: "carol"},
		{name: "entries alike: the owner of a field above the change", old: objWith(v1, whole, dave), new: objWith(v2, whole, dave), want: "erin"},
		{name: "entries alike, spec alike", old: objWith(v1, bob, dave), new: objWith(v1, bob, dave), want: ""},
		{name: "no managedFields", old: []byte(`{"metadata":{}}`), new: []byte(`{"metadata":{}}`), want: ""},
		{name: "not JSON", old: []byte(`{`), new: []byte(`[`), options: `{`, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				OldObject: runtime.RawExtension{Raw: tc.old},
				Object:    runtime.RawExtension{Raw: tc.new},
				Options:   runtime.RawExtension{Raw: []byte(tc.options)},
			}}
			assert.Equal(t, tc.want, fieldManagerOf(req))
		})
	}
}

// BenchmarkFieldManagerOf prices reading a request's field manager from a
// control plane as Cluster API writes it (three managedFields entries):
// named in the options, read from the entry the request changed, and found
// as the owner of the spec field it changed when no entry shows a change.
func BenchmarkFieldManagerOf(b *testing.B) {
	oldRaw := asWritten(b, "kubeadmcontrolplane-as-written.json")
	var obj map[string]any
	require.NoError(b, json.Unmarshal(oldRaw, &obj))
	obj["spec"].(map[string]any)["version"] = "v1.99.0"
	alike, err := json.Marshal(obj)
	require.NoError(b, err)
	entries := obj["metadata"].(map[string]any)["managedFields"].([]any)
	entries[1].(map[string]any)["time"] = "2030-01-01T00:00:00Z"
	changed, err := json.Marshal(obj)
	require.NoError(b, err)
	for _, bc := range []struct {
		name    string
		options string
		newRaw  []byte
		want    string
	}{
		{name: "from=options", options: `{"fieldManager":"kubectl-patch"}`, newRaw: changed, want: "kubectl-patch"},
		{name: "from=changed-entry", newRaw: changed, want: "soak"},
		{name: "from=spec-owner", newRaw: alike, want: "soak"},
	} {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			OldObject: runtime.RawExtension{Raw: oldRaw},
			Object:    runtime.RawExtension{Raw: bc.newRaw},
			Options:   runtime.RawExtension{Raw: []byte(bc.options)},
		}}
		b.Run(bc.name, func(b *testing.B) {
			if got := fieldManagerOf(req); got != bc.want {
				b.Fatalf("field manager %q, want %q", got, bc.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				fieldManagerOf(req)
			}
		})
	}
}
