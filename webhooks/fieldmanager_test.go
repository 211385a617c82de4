package webhooks

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
	)
	obj := func(entries ...string) []byte {
		out := `{"metadata":{"name":"md","managedFields":[`
		for i, e := range entries {
			if i > 0 {
				out += ","
			}
			out += e
		}
		return []byte(out + `]},"spec":{}}`)
	}
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
		{name: "nothing changed", old: obj(kubectl), new: obj(kubectl), want: ""},
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
