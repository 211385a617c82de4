package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// strict decodes v's JSON into out, refusing unknown fields: the API
// server would prune them silently, and the world would be smaller than
// it claims.
func strict(t *testing.T, v any, out any) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("%T: %v\n%s", out, err, raw)
	}
}

// TestRealisticObjectsAreCAPITypes: every field of the realistic specs
// and statuses is a field of Cluster API's v1beta2 types.
func TestRealisticObjectsAreCAPITypes(t *testing.T) {
	var spec bootstrapv1.KubeadmConfigSpec
	dec := json.NewDecoder(strings.NewReader(kubeadmConfigSpecJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		t.Fatalf("kubeadmConfigSpec: %v", err)
	}
	if len(spec.Files) == 0 || len(spec.PreKubeadmCommands) == 0 || spec.ClusterConfiguration.Etcd.Local.ImageTag == "" ||
		len(spec.InitConfiguration.NodeRegistration.KubeletExtraArgs) == 0 || len(spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs) == 0 {
		t.Errorf("kubeadmConfigSpec lacks a part of the quick start's: %+v", spec)
	}
	if got, err := kubeadmConfigSpec("c0001"); err != nil || !strings.Contains(got.Files[0].Content, "c0001.example.internal") {
		t.Errorf("kubeadmConfigSpec(c0001): %v, file names %q", err, got.Files[0].Content)
	}

	var kcp struct {
		Status controlplanev1.KubeadmControlPlaneStatus `json:"status"`
	}
	strict(t, kcpStatus("c0001", 3, "v1.35.0", 1), &kcp)
	if len(kcp.Status.Conditions) < 10 || kcp.Status.Version != "v1.35.0" || kcp.Status.Deprecated == nil {
		t.Errorf("KubeadmControlPlane status: %+v", kcp.Status)
	}
	var md struct {
		Status clusterv1.MachineDeploymentStatus `json:"status"`
	}
	strict(t, mdStatus("c0001-md-0", "v1.34.0", 2, 1), &md)
	if len(md.Status.Conditions) < 9 || md.Status.Deprecated == nil {
		t.Errorf("MachineDeployment status: %+v", md.Status)
	}
	for _, cp := range []bool{true, false} {
		var m struct {
			Status clusterv1.MachineStatus `json:"status"`
		}
		strict(t, machineStatus("c0001-m0", "v1.35.0", cp, 7), &m)
		if m.Status.NodeInfo == nil || m.Status.NodeInfo.KubeletVersion != "v1.35.0" || m.Status.NodeRef.Name == "" || len(m.Status.Addresses) != 3 {
			t.Errorf("Machine status (control plane %v): %+v", cp, m.Status)
		}
	}
}
