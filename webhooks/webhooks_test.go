package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/policy"
)

// These tests drive the handlers with an in-memory reader standing in for
// the manager's cache; test/e2e drives the same handlers through a real API
// server.

func testScheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, clusterv1.AddToScheme(s))
	require.NoError(t, controlplanev1.AddToScheme(s))
	require.NoError(t, rgv1alpha1.AddToScheme(s))
	return s
}

// cluster returns a Cluster "c1" with a KubeadmControlPlane at cpVersion,
// workers MachineDeployments at mdVersions and one worker Machine per pool.
func cluster(cpVersion string, mdVersions ...string) []client.Object {
	objs := []client.Object{
		&clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"},
			Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "c1-cp",
			}},
		},
		kcp(cpVersion),
	}
	for i, v := range mdVersions {
		objs = append(objs,
			&clusterv1.MachineDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("md-%d", i)},
				Spec:       clusterv1.MachineDeploymentSpec{ClusterName: "c1", Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{Version: v}}},
			},
			&clusterv1.Machine{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("md-%d-m", i)},
				Spec:       clusterv1.MachineSpec{ClusterName: "c1", Version: v},
			},
		)
	}
	return objs
}

// kcp returns a KubeadmControlPlane at version, with a kubeadmConfigSpec of
// the size real ones have (API server flags, files, commands, kubelet flags).
func kcp(version string) *controlplanev1.KubeadmControlPlane {
	k := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1-cp", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
		Spec:       controlplanev1.KubeadmControlPlaneSpec{Replicas: ptr.To[int32](3), Version: version},
		Status:     controlplanev1.KubeadmControlPlaneStatus{Versions: []clusterv1.StatusVersion{{Version: version, Replicas: 3}}},
	}
	k.Spec.MachineTemplate.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: "c1-cp"}
	cfg := &k.Spec.KubeadmConfigSpec
	for i := range 8 {
		cfg.ClusterConfiguration.APIServer.ExtraArgs = append(cfg.ClusterConfiguration.APIServer.ExtraArgs, bootstrapv1.Arg{Name: fmt.Sprintf("flag-%d", i), Value: ptr.To(fmt.Sprintf("value-%d", i))})
		cfg.InitConfiguration.NodeRegistration.KubeletExtraArgs = append(cfg.InitConfiguration.NodeRegistration.KubeletExtraArgs, bootstrapv1.Arg{Name: fmt.Sprintf("kubelet-flag-%d", i), Value: ptr.To("x")})
		cfg.Files = append(cfg.Files, bootstrapv1.File{Path: fmt.Sprintf("/etc/kubernetes/extra-%d.yaml", i), Content: strings.Repeat("key: value\n", 20), Permissions: "0600"})
		cfg.PreKubeadmCommands = append(cfg.PreKubeadmCommands, fmt.Sprintf("echo step %d", i))
	}
	return k
}

func testFacts(t testing.TB, objs ...client.Object) policy.Policy {
	s := testScheme(t)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&clusterv1.MachineDeployment{}, policy.ClusterNameField, func(o client.Object) []string { return []string{o.(*clusterv1.MachineDeployment).Spec.ClusterName} }).
		WithIndex(&clusterv1.MachinePool{}, policy.ClusterNameField, func(o client.Object) []string { return []string{o.(*clusterv1.MachinePool).Spec.ClusterName} }).
		WithIndex(&clusterv1.Machine{}, policy.ClusterNameField, func(o client.Object) []string { return []string{o.(*clusterv1.Machine).Spec.ClusterName} }).
		Build()
	return policy.Policy{Reader: c, Mapper: c.RESTMapper(), Indexed: true}
}

// review builds the AdmissionRequest the API server sends for an update.
func review(t testing.TB, kind string, oldObj, newObj runtime.Object) admission.Request {
	oldRaw, err := json.Marshal(oldObj)
	require.NoError(t, err)
	newRaw, err := json.Marshal(newObj)
	require.NoError(t, err)
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "1",
		Operation: admissionv1.Update,
		Kind:      metav1.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: kind},
		Namespace: "ns",
		Name:      "c1-cp",
		Object:    runtime.RawExtension{Raw: newRaw},
		OldObject: runtime.RawExtension{Raw: oldRaw},
	}}
}

func TestKubeadmControlPlaneHandler(t *testing.T) {
	cases := []struct {
		name        string
		world       []client.Object
		from, to    string
		wantAllowed bool
		wantCode    int32
		wantInMsg   []string
		wantWarning string
	}{
		{name: "minor upgrade", world: cluster("v1.34.2", "v1.34.2", "v1.33.1"), from: "v1.34.2", to: "v1.35.0", wantAllowed: true},
		{name: "downgrade", world: cluster("v1.35.2", "v1.34.2"), from: "v1.35.2", to: "v1.34.2", wantCode: http.StatusUnprocessableEntity,
			wantInMsg: []string{`spec.version: Forbidden: KubeadmControlPlane c1-cp: Kubernetes downgrade from v1.35.2 to v1.34.2`, "[rule ControlPlaneDowngrade]"}},
		{name: "upgrade leaving a pool too old", world: cluster("v1.34.2", "v1.31.0"), from: "v1.34.2", to: "v1.35.0", wantCode: http.StatusUnprocessableEntity,
			wantInMsg: []string{"MachineDeployment md-0 runs v1.31.0", "Machine md-0-m runs v1.31.0", "[rule ControlPlaneLeavesWorkerTooOld]"}},
		{name: "invalid version", world: cluster("v1.34.2"), from: "v1.34.2", to: "1.35", wantCode: http.StatusUnprocessableEntity,
			wantInMsg: []string{`spec.version: Invalid value: "1.35"`, "[rule InvalidVersion]"}},
		{name: "no cluster label nor owner: judged alone, with a warning", world: nil, from: "v1.34.2", to: "v1.35.0", wantAllowed: true,
			wantWarning: "worker skew not checked"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := kcpValidator(testFacts(t, tc.world...))
			oldKCP, newKCP := kcp(tc.from), kcp(tc.to)
			if tc.world == nil {
				oldKCP.Labels, newKCP.Labels = nil, nil
			}
			req := review(t, "KubeadmControlPlane", oldKCP, newKCP)
			// The guard's handler, decoding lean, answers as
			// controller-runtime's does.
			resp := (&admission.Webhook{Handler: validating[*controlplanev1.KubeadmControlPlane]{
				validator: v, new: func() *controlplanev1.KubeadmControlPlane { return &controlplanev1.KubeadmControlPlane{} }, decoder: newLeanDecoder(testScheme(t)),
			}}).Handle(context.Background(), req)
			assert.Equal(t, admission.WithValidator(testScheme(t), v).Handle(context.Background(), req), resp)
			assert.Equal(t, tc.wantAllowed, resp.Allowed, "result: %+v", resp.Result)
			if !tc.wantAllowed {
				assert.Equal(t, tc.wantCode, resp.Result.Code)
				for _, want := range tc.wantInMsg {
					assert.Contains(t, resp.Result.Message, want)
				}
			}
			if tc.wantWarning != "" {
				require.Len(t, resp.Warnings, 1)
				assert.Contains(t, resp.Warnings[0], tc.wantWarning)
			}
		})
	}
}

func TestMachineDeploymentHandlerWithoutControlPlane(t *testing.T) {
	v, _, _ := NewValidators(testFacts(t), nil, nil)
	md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md"}, Spec: clusterv1.MachineDeploymentSpec{ClusterName: "gone"}}
	md.Spec.Template.Spec.Version = "v1.35.0"
	warnings, err := v.ValidateCreate(context.Background(), md)
	require.NoError(t, err)
	require.Equal(t, admission.Warnings{"rollout-guard: version skew of MachineDeployment ns/md not checked: Cluster ns/gone not found"}, warnings)

	md.Spec.Template.Spec.Version = "latest"
	_, err = v.ValidateCreate(context.Background(), md)
	require.Error(t, err, "an unparseable version must be refused even when the control plane is unknown")
	assert.Contains(t, err.Error(), `spec.template.spec.version: Invalid value: "latest"`)
}

// BenchmarkKubeadmControlPlaneHandler measures one validating admission of a
// KubeadmControlPlane minor upgrade, from the decoded AdmissionRequest to the
// response, in a cluster with 3 worker pools and 3 worker machines.
func BenchmarkKubeadmControlPlaneHandler(b *testing.B) {
	h := admission.WithValidator(testScheme(b), kcpValidator(testFacts(b, cluster("v1.34.2", "v1.34.2", "v1.34.2", "v1.33.5")...)))
	req := review(b, "KubeadmControlPlane", kcp("v1.34.2"), kcp("v1.35.0"))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := h.Handle(ctx, req); !resp.Allowed {
			b.Fatalf("refused: %v", resp.Result)
		}
	}
}

// BenchmarkMachineDeploymentHandler measures one validating admission of a
// MachineDeployment version change.
func BenchmarkMachineDeploymentHandler(b *testing.B) {
	h := admission.WithValidator(testScheme(b), mdValidator(testFacts(b, cluster("v1.35.2", "v1.34.2")...)))
	oldMD := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md-0"}, Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c1"}}
	oldMD.Spec.Template.Spec.Version = "v1.34.2"
	newMD := oldMD.DeepCopy()
	newMD.Spec.Template.Spec.Version = "v1.35.2"
	req := review(b, "MachineDeployment", oldMD, newMD)
	req.Kind = metav1.GroupVersionKind{Group: "cluster.x-k8s.io", Version: "v1beta2", Kind: "MachineDeployment"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := h.Handle(ctx, req); !resp.Allowed {
			b.Fatalf("refused: %v", resp.Result)
		}
	}
}

func kcpValidator(f policy.Policy) *Validator[*controlplanev1.KubeadmControlPlane] {
	_, v, _ := NewValidators(f, nil, nil)
	return v
}

func mdValidator(f policy.Policy) *Validator[*clusterv1.MachineDeployment] {
	v, _, _ := NewValidators(f, nil, nil)
	return v
}
