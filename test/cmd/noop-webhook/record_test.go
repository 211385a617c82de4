package main

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestReplacedRevision: an update makes a new revision exactly when the
// kind's revision fields change (by value); labels, annotations, replicas
// and status never do, and the replaced revision is the old object's
// revision fields.
func TestReplacedRevision(t *testing.T) {
	const md = `{"metadata":{"name":"a","labels":{"l":"1"},"annotations":{"x":"1"}},"spec":{"replicas":3,"template":{"spec":{"version":"v1.35.0","infrastructureRef":{"name":"t1"}}}},"status":{"replicas":1}}`
	const kcp = `{"metadata":{"name":"cp"},"spec":{"replicas":3,"version":"v1.36.0","machineTemplate":{"spec":{"infrastructureRef":{"name":"t1"}}},"kubeadmConfigSpec":{"format":"cloud-config"}},"status":{"replicas":3}}`
	tests := []struct {
		name      string
		kind      string
		old, new  string
		making    bool
		wantFirst string // a field the replaced revision must hold
	}{
		{name: "md unchanged", kind: "MachineDeployment", old: md, new: md},
		{name: "md label", kind: "MachineDeployment", old: md, new: `{"metadata":{"name":"a","labels":{"l":"2"},"annotations":{"x":"1"}},"spec":{"replicas":3,"template":{"spec":{"version":"v1.35.0","infrastructureRef":{"name":"t1"}}}},"status":{"replicas":1}}`},
		{name: "md annotation", kind: "MachineDeployment", old: md, new: `{"metadata":{"name":"a","labels":{"l":"1"},"annotations":{"x":"2"}},"spec":{"replicas":3,"template":{"spec":{"version":"v1.35.0","infrastructureRef":{"name":"t1"}}}},"status":{"replicas":1}}`},
		{name: "md replicas", kind: "MachineDeployment", old: md, new: `{"metadata":{"name":"a","labels":{"l":"1"},"annotations":{"x":"1"}},"spec":{"replicas":5,"template":{"spec":{"version":"v1.35.0","infrastructureRef":{"name":"t1"}}}},"status":{"replicas":1}}`},
		{name: "md status", kind: "MachineDeployment", old: md, new: `{"metadata":{"name":"a","labels":{"l":"1"},"annotations":{"x":"1"}},"spec":{"replicas":3,"template":{"spec":{"version":"v1.35.0","infrastructureRef":{"name":"t1"}}}},"status":{"replicas":2}}`},
		{name: "md template, keys reordered", kind: "MachineDeployment", old: md, new: `{"spec":{"template":{"spec":{"infrastructureRef":{"name":"t1"},"version":"v1.35.0"}},"replicas":3},"metadata":{"name":"a","labels":{"l":"1"},"annotations":{"x":"1"}},"status":{"replicas":1}}`},
		{name: "md template", kind: "MachineDeployment", old: md, new: `{"metadata":{"name":"a"},"spec":{"replicas":3,"template":{"spec":{"version":"v1.35.0","infrastructureRef":{"name":"t2"}}}}}`, making: true, wantFirst: "template"},
		{name: "md version", kind: "MachineDeployment", old: md, new: `{"metadata":{"name":"a"},"spec":{"replicas":3,"template":{"spec":{"version":"v1.35.1","infrastructureRef":{"name":"t1"}}}}}`, making: true, wantFirst: "template"},
		{name: "machinepool template", kind: "MachinePool", old: md, new: `{"metadata":{"name":"a"},"spec":{"template":{"spec":{"version":"v1.35.1"}}}}`, making: true, wantFirst: "template"},
		{name: "kcp replicas", kind: "KubeadmControlPlane", old: kcp, new: `{"metadata":{"name":"cp","labels":{"a":"b"}},"spec":{"replicas":5,"version":"v1.36.0","machineTemplate":{"spec":{"infrastructureRef":{"name":"t1"}}},"kubeadmConfigSpec":{"format":"cloud-config"}},"status":{"replicas":1}}`},
		{name: "kcp version", kind: "KubeadmControlPlane", old: kcp, new: `{"metadata":{"name":"cp"},"spec":{"replicas":3,"version":"v1.36.1","machineTemplate":{"spec":{"infrastructureRef":{"name":"t1"}}},"kubeadmConfigSpec":{"format":"cloud-config"}}}`, making: true, wantFirst: "version"},
		{name: "kcp machineTemplate", kind: "KubeadmControlPlane", old: kcp, new: `{"metadata":{"name":"cp"},"spec":{"replicas":3,"version":"v1.36.0","machineTemplate":{"spec":{"infrastructureRef":{"name":"t2"}}},"kubeadmConfigSpec":{"format":"cloud-config"}}}`, making: true, wantFirst: "machineTemplate"},
		{name: "kcp kubeadmConfigSpec", kind: "KubeadmControlPlane", old: kcp, new: `{"metadata":{"name":"cp"},"spec":{"replicas":3,"version":"v1.36.0","machineTemplate":{"spec":{"infrastructureRef":{"name":"t1"}}},"kubeadmConfigSpec":{"format":"ignition"}}}`, making: true, wantFirst: "kubeadmConfigSpec"},
		{name: "kcp field removed", kind: "KubeadmControlPlane", old: kcp, new: `{"metadata":{"name":"cp"},"spec":{"replicas":3,"version":"v1.36.0","machineTemplate":{"spec":{"infrastructureRef":{"name":"t1"}}}}}`, making: true, wantFirst: "kubeadmConfigSpec"},
		{name: "cluster: not recorded here", kind: "Cluster", old: `{"spec":{"topology":{"version":"v1.35.0"}}}`, new: `{"spec":{"topology":{"version":"v1.36.0"}}}`},
		{name: "create: nothing replaced", kind: "MachineDeployment", old: "", new: md},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			replaced, making, err := replacedRevision(tt.kind, []byte(tt.old), []byte(tt.new))
			if err != nil {
				t.Fatal(err)
			}
			if making != tt.making {
				t.Fatalf("making = %v, want %v", making, tt.making)
			}
			if !making {
				if replaced != nil {
					t.Errorf("replaced = %s, want nothing", replaced)
				}
				return
			}
			var content map[string]json.RawMessage
			if err := json.Unmarshal(replaced, &content); err != nil {
				t.Fatalf("replaced %s: %v", replaced, err)
			}
			var old struct {
				Spec map[string]json.RawMessage `json:"spec"`
			}
			_ = json.Unmarshal([]byte(tt.old), &old)
			if same, _ := jsonEqual(content[tt.wantFirst], old.Spec[tt.wantFirst]); !same {
				t.Errorf("replaced %s: spec.%s is not the old object's %s", replaced, tt.wantFirst, old.Spec[tt.wantFirst])
			}
			if _, ok := content["replicas"]; ok {
				t.Errorf("replaced %s holds replicas", replaced)
			}
		})
	}
	if _, _, err := replacedRevision("MachineDeployment", []byte(`{`), []byte(`{}`)); err == nil {
		t.Error("a malformed old object: want an error")
	}
}

// TestRolloutRevisionOfTheReplaced: the record is named and owned as the
// guard's are, and carries the replaced content.
func TestRolloutRevisionOfTheReplaced(t *testing.T) {
	old := `{"metadata":{"name":"c0-md-0","uid":"u-1","annotations":{"rollout-bench/revision":"4","rollout-bench/changed-by":"x","rollout-bench/probe":"mutate"}},"spec":{"template":{"spec":{"version":"v1.35.0"}}}}`
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Name: "c0-md-0", Namespace: "bench",
		Kind:      metav1.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"},
		OldObject: runtime.RawExtension{Raw: []byte(old)},
	}}
	content := []byte(`{"template":{"spec":{"version":"v1.35.0"}}}`)
	rr, err := rolloutRevision(req, content)
	if err != nil {
		t.Fatal(err)
	}
	hash := rr.Labels[recordLabelHash]
	if len(hash) != 10 || rr.Name != "c0-md-0-"+hash || rr.Namespace != "bench" {
		t.Errorf("name %s/%s, hash %q; want bench/c0-md-0-<10 hex>", rr.Namespace, rr.Name, hash)
	}
	if rr.Labels[recordLabelOwnerUID] != "u-1" || rr.Labels[recordLabelOwnerKind] != "MachineDeployment" || rr.Revision != 4 || rr.Labels[recordLabelRevision] != "4" {
		t.Errorf("labels %v, revision %d; want the owner's UID and kind, revision 4", rr.Labels, rr.Revision)
	}
	if len(rr.OwnerReferences) != 1 || rr.OwnerReferences[0].UID != "u-1" || rr.OwnerReferences[0].APIVersion != "cluster.x-k8s.io/v1beta2" ||
		rr.OwnerReferences[0].Controller == nil || !*rr.OwnerReferences[0].Controller {
		t.Errorf("owner references %+v; want the object as controller", rr.OwnerReferences)
	}
	if _, ok := rr.Annotations["rollout-bench/probe"]; ok || rr.Annotations["rollout-bench/changed-by"] != "x" {
		t.Errorf("annotations %v; want the old stamps, without the probe marker", rr.Annotations)
	}
	if string(rr.Data.Raw) != string(content) {
		t.Errorf("data %s, want %s", rr.Data.Raw, content)
	}
}
