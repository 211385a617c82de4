package revisions_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// withKubeadmDefaults writes out on a KubeadmControlPlane every default the
// canonical form drops (Cluster API's ApplyPreviousKubeadmConfigDefaults),
// as a user or a GitOps tool may: kubeadmConfigSpec.format cloud-config,
// {init,join}Configuration.nodeRegistration.imagePullPolicy IfNotPresent,
// and the file discovery's exec apiVersion.
func withKubeadmDefaults(k *controlplanev1.KubeadmControlPlane) {
	s := &k.Spec.KubeadmConfigSpec
	s.Format = bootstrapv1.CloudConfig
	s.InitConfiguration.NodeRegistration.ImagePullPolicy = corev1.PullIfNotPresent
	s.JoinConfiguration.NodeRegistration.ImagePullPolicy = corev1.PullIfNotPresent
	s.JoinConfiguration.Discovery.File.KubeConfig.User.Exec.APIVersion = "client.authentication.k8s.io/v1"
}

// kubeadmDefaultsOf returns the values of the defaults withKubeadmDefaults
// writes, to see that a rollback keeps them.
func kubeadmDefaultsOf(k *controlplanev1.KubeadmControlPlane) []string {
	s := k.Spec.KubeadmConfigSpec
	return []string{string(s.Format), string(s.InitConfiguration.NodeRegistration.ImagePullPolicy),
		string(s.JoinConfiguration.NodeRegistration.ImagePullPolicy), s.JoinConfiguration.Discovery.File.KubeConfig.User.Exec.APIVersion}
}

// minimalKCP is a KubeadmControlPlane whose kubeadmConfigSpec says only
// format: cloud-config, as a control plane written with nothing else to
// configure is.
func minimalKCP(version, infra string) *controlplanev1.KubeadmControlPlane {
	k := newKCP()
	k.Spec.Version = version
	k.Spec.MachineTemplate.Spec.InfrastructureRef.Name = infra
	k.Spec.KubeadmConfigSpec = bootstrapv1.KubeadmConfigSpec{Format: bootstrapv1.CloudConfig}
	return k
}

// patchSpec returns the spec part of a rollback patch, as JSON ("" when the
// patch has none), after checking the patch holds the precondition.
func patchSpec(t *testing.T, patch []byte, resourceVersion string) string {
	t.Helper()
	var p map[string]any
	require.NoError(t, json.Unmarshal(patch, &p))
	assert.Equal(t, map[string]any{"resourceVersion": resourceVersion}, p["metadata"], "the patch's metadata is the precondition alone")
	spec, ok := p["spec"]
	if !ok {
		return ""
	}
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	return string(raw)
}

// A rollback patch of a KubeadmControlPlane changes exactly the fields its
// target revision changes against the live object: it never takes away a
// default the live object writes out and the canonical form drops (Cluster
// API refuses, for one, a kubeadmConfigSpec of only format: cloud-config
// taken away: "spec.kubeadmConfigSpec: Forbidden: cannot be modified").
func TestRollbackPatchKeepsKubeadmDefaults(t *testing.T) {
	edited := func(base func() *controlplanev1.KubeadmControlPlane, edits ...func(*controlplanev1.KubeadmControlPlane)) func() *controlplanev1.KubeadmControlPlane {
		return func() *controlplanev1.KubeadmControlPlane {
			k := base()
			for _, e := range edits {
				e(k)
			}
			return k
		}
	}
	version := func(v string) func(*controlplanev1.KubeadmControlPlane) {
		return func(k *controlplanev1.KubeadmControlPlane) { k.Spec.Version = v }
	}
	infra := func(name string) func(*controlplanev1.KubeadmControlPlane) {
		return func(k *controlplanev1.KubeadmControlPlane) { k.Spec.MachineTemplate.Spec.InfrastructureRef.Name = name }
	}
	tests := []struct {
		name         string
		live, target func() *controlplanev1.KubeadmControlPlane
		wantSpec     string // the patch's spec, JSON; "" for none
		keepDefaults bool   // the live object's written-out defaults stay
	}{
		{name: "version-only revert, kubeadmConfigSpec only format: cloud-config",
			live: func() *controlplanev1.KubeadmControlPlane { return minimalKCP("v1.35.0", "cp-1") }, target: func() *controlplanev1.KubeadmControlPlane { return minimalKCP("v1.34.2", "cp-1") },
			wantSpec: `{"version":"v1.34.2"}`},
		{name: "template-only revert, kubeadmConfigSpec only format: cloud-config",
			live: func() *controlplanev1.KubeadmControlPlane { return minimalKCP("v1.34.2", "cp-2") }, target: func() *controlplanev1.KubeadmControlPlane { return minimalKCP("v1.34.2", "cp-1") },
			wantSpec: `{"machineTemplate":{"spec":{"infrastructureRef":{"name":"cp-1"}}}}`},
		{name: "version-only revert, every dropped default written out on the live object",
			live: edited(newKCP, withKubeadmDefaults, version("v1.35.0")), target: newKCP,
			wantSpec: `{"version":"v1.34.2"}`, keepDefaults: true},
		{name: "template-only revert, every dropped default written out on the live object",
			live: edited(newKCP, withKubeadmDefaults, infra("cp-2")), target: newKCP,
			wantSpec: `{"machineTemplate":{"spec":{"infrastructureRef":{"name":"cp-1"}}}}`, keepDefaults: true},
		{name: "defaults written out on both: the same",
			live: edited(newKCP, withKubeadmDefaults, version("v1.35.0")), target: edited(newKCP, withKubeadmDefaults),
			wantSpec: `{"version":"v1.34.2"}`, keepDefaults: true},
		{name: "defaults written out on the target only: nothing to add",
			live: edited(newKCP, version("v1.35.0")), target: edited(newKCP, withKubeadmDefaults),
			wantSpec: `{"version":"v1.34.2"}`},
		{name: "a file added since, taken away beside the defaults",
			live: edited(newKCP, withKubeadmDefaults, func(k *controlplanev1.KubeadmControlPlane) {
				k.Spec.KubeadmConfigSpec.Files = append(k.Spec.KubeadmConfigSpec.Files, bootstrapv1.File{Path: "/x", Content: "y"})
			}), target: newKCP,
			wantSpec:     `{"kubeadmConfigSpec":{"files":[{"content":"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n","owner":"root:root","path":"/etc/kubernetes/audit-policy.yaml","permissions":"0600"}]}}`,
			keepDefaults: true},
		{name: "a section the target lacks: its content taken away, its default left",
			live: edited(newKCP, withKubeadmDefaults), target: edited(newKCP, func(k *controlplanev1.KubeadmControlPlane) {
				k.Spec.KubeadmConfigSpec.InitConfiguration = bootstrapv1.InitConfiguration{}
			}),
			wantSpec:     `{"kubeadmConfigSpec":{"initConfiguration":{"nodeRegistration":{"criSocket":null,"kubeletExtraArgs":null}}}}`,
			keepDefaults: true},
		{name: "every content field of kubeadmConfigSpec taken away, format: cloud-config left",
			live: edited(newKCP, withKubeadmDefaults), target: edited(newKCP, func(k *controlplanev1.KubeadmControlPlane) {
				k.Spec.KubeadmConfigSpec = bootstrapv1.KubeadmConfigSpec{}
			}),
			wantSpec:     `{"kubeadmConfigSpec":{"clusterConfiguration":null,"files":null,"initConfiguration":{"nodeRegistration":{"criSocket":null,"kubeletExtraArgs":null}},"joinConfiguration":{"nodeRegistration":{"criSocket":null,"kubeletExtraArgs":null}},"ntp":null,"postKubeadmCommands":null,"preKubeadmCommands":null,"users":null}}`,
			keepDefaults: true},
		{name: "a value that is not the default is content: format ignition taken back to the default",
			live: edited(newKCP, func(k *controlplanev1.KubeadmControlPlane) { k.Spec.KubeadmConfigSpec.Format = bootstrapv1.Ignition }), target: newKCP,
			wantSpec: `{"kubeadmConfigSpec":{"format":null}}`},
		{name: "imagePullPolicy Always taken back to the default",
			live: edited(newKCP, func(k *controlplanev1.KubeadmControlPlane) {
				k.Spec.KubeadmConfigSpec.JoinConfiguration.NodeRegistration.ImagePullPolicy = corev1.PullAlways
			}), target: newKCP,
			wantSpec: `{"kubeadmConfigSpec":{"joinConfiguration":{"nodeRegistration":{"imagePullPolicy":null}}}}`},
		{name: "an empty taint list is content (no taints, not kubeadm's): taken away",
			live: edited(newKCP, func(k *controlplanev1.KubeadmControlPlane) {
				k.Spec.KubeadmConfigSpec.InitConfiguration.NodeRegistration.Taints = &[]corev1.Taint{}
			}), target: newKCP,
			wantSpec: `{"kubeadmConfigSpec":{"initConfiguration":{"nodeRegistration":{"taints":null}}}}`},
		{name: "an empty joinConfiguration.controlPlane the target lacks: left",
			live: edited(newKCP, version("v1.35.0")), target: edited(newKCP, func(k *controlplanev1.KubeadmControlPlane) {
				k.Spec.KubeadmConfigSpec.JoinConfiguration.ControlPlane = nil
			}),
			wantSpec: `{"version":"v1.34.2"}`},
		{name: "the machine template's stamps left, its other annotations taken away",
			live: edited(newKCP, func(k *controlplanev1.KubeadmControlPlane) {
				k.Spec.MachineTemplate.ObjectMeta.Annotations = map[string]string{revisions.AnnotationRevision: "5", "example.com/x": "y"}
			}), target: newKCP,
			wantSpec: `{"machineTemplate":{"metadata":{"annotations":{"example.com/x":null}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live, target := tt.live(), kcpSnap(t, tt.target())
			live.ResourceVersion = "815"
			patch, err := revisions.RollbackPatch(live, target)
			require.NoError(t, err)
			got := patchSpec(t, patch, "815")
			if tt.wantSpec == "" {
				assert.Empty(t, got)
			} else {
				assert.JSONEq(t, tt.wantSpec, got)
			}
			var after controlplanev1.KubeadmControlPlane
			applyPatch(t, live, patch, &after)
			assert.Equal(t, target, kcpSnap(t, &after), "the revision content is the target's")
			if tt.keepDefaults {
				assert.Equal(t, kubeadmDefaultsOf(live), kubeadmDefaultsOf(&after), "the defaults written out stay")
			}
			if live.Spec.KubeadmConfigSpec.Format == bootstrapv1.CloudConfig {
				assert.Equal(t, bootstrapv1.CloudConfig, after.Spec.KubeadmConfigSpec.Format, "format: cloud-config stays")
			}
		})
	}
}

// The same for the other kinds: what the canonical form drops (the
// template's rollout-guard.io/ annotations, empty objects, an empty value
// of a list element) stays on the live object, and only what the target
// changes is written.
func TestRollbackPatchKeepsWhatTheCanonicalFormDrops(t *testing.T) {
	template := func(infra string, annotations map[string]string) clusterv1.MachineTemplateSpec {
		t := newMD().Spec.Template
		t.Spec.InfrastructureRef.Name = infra
		t.Annotations = annotations
		return t
	}
	md := func(infra string, annotations map[string]string) *clusterv1.MachineDeployment {
		m := newMD()
		m.Spec.Template = template(infra, annotations)
		return m
	}
	mp := func(infra string, annotations map[string]string) *clusterv1.MachinePool {
		p := &clusterv1.MachinePool{}
		p.Name, p.Namespace, p.ResourceVersion = "mp-0", "default", "4711"
		p.Spec.ClusterName = "dev"
		p.Spec.Template = template(infra, annotations)
		return p
	}
	stamps := map[string]string{revisions.AnnotationRevision: "4", revisions.AnnotationChangedBy: "alice"}
	selector := func(match *clusterv1.PatchSelectorMatchMachineDeploymentClass, image string) *clusterv1.ClusterClass {
		cc := &clusterv1.ClusterClass{}
		cc.Name, cc.Namespace, cc.ResourceVersion = "demo-class", "default", "12"
		cc.Spec.KubernetesVersions = []string{"v1.35.2", "v1.36.1"}
		cc.Spec.Patches = []clusterv1.ClusterClassPatch{{
			Name: "image",
			Definitions: []clusterv1.PatchDefinition{{
				Selector: clusterv1.PatchSelector{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta2", Kind: "DevMachineTemplate",
					MatchResources: clusterv1.PatchSelectorMatch{MachineDeploymentClass: match}},
				JSONPatches: []clusterv1.JSONPatch{{Op: "replace", Path: "/spec/template/spec/image", Value: &apiextensionsv1.JSON{Raw: []byte(`"` + image + `"`)}}},
			}},
		}, {
			Name: "other",
			Definitions: []clusterv1.PatchDefinition{{
				Selector: clusterv1.PatchSelector{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta2", Kind: "DevClusterTemplate",
					MatchResources: clusterv1.PatchSelectorMatch{MachineDeploymentClass: &clusterv1.PatchSelectorMatchMachineDeploymentClass{}}},
				JSONPatches: []clusterv1.JSONPatch{{Op: "add", Path: "/spec/template/spec/x", Value: &apiextensionsv1.JSON{Raw: []byte(`"y"`)}}},
			}},
		}}
		return cc
	}
	cluster := func(version, image string) *clusterv1.Cluster {
		c := &clusterv1.Cluster{}
		c.Name, c.Namespace, c.ResourceVersion = "demo-cc", "default", "33"
		c.Spec.Topology.ClassRef.Name = "demo-class"
		c.Spec.Topology.Version = version
		c.Spec.Topology.Variables = []clusterv1.ClusterVariable{
			{Name: "options", Value: apiextensionsv1.JSON{Raw: []byte(`{}`)}},
			{Name: "workerImage", Value: apiextensionsv1.JSON{Raw: []byte(`"` + image + `"`)}},
		}
		return c
	}
	tests := []struct {
		name     string
		live     runtime.Object
		target   func(t *testing.T) revisions.Snapshot
		wantSpec string
	}{
		{name: "MachineDeployment template revert, the template's stamps alone in its annotations",
			live: md("md-2", stamps), target: func(t *testing.T) revisions.Snapshot { return mdSnap(t, md("md-1", nil)) },
			wantSpec: `{"template":{"spec":{"infrastructureRef":{"name":"md-1"}}}}`},
		{name: "MachineDeployment template revert, an annotation of others taken away, the stamps left",
			live: md("md-2", mergeMaps(stamps, map[string]string{"example.com/x": "y"})), target: func(t *testing.T) revisions.Snapshot { return mdSnap(t, md("md-1", nil)) },
			wantSpec: `{"template":{"metadata":{"annotations":{"example.com/x":null}},"spec":{"infrastructureRef":{"name":"md-1"}}}}`},
		{name: "MachinePool template revert, the template's stamps alone in its annotations",
			live: mp("mp-2", stamps), target: func(t *testing.T) revisions.Snapshot {
				s, err := revisions.ForMachinePool(mp("mp-1", nil))
				require.NoError(t, err)
				return s
			},
			wantSpec: `{"template":{"spec":{"infrastructureRef":{"name":"mp-1"}}}}`},
		{name: "ClusterClass revert, an empty selector object of an unchanged patch left",
			live: selector(&clusterv1.PatchSelectorMatchMachineDeploymentClass{Names: []string{"default-worker"}}, "v2"), target: func(t *testing.T) revisions.Snapshot {
				s, err := revisions.ForClusterClass(selector(&clusterv1.PatchSelectorMatchMachineDeploymentClass{Names: []string{"default-worker"}}, "v1"))
				require.NoError(t, err)
				return s
			},
			wantSpec: `{"patches":[` +
				`{"definitions":[{"jsonPatches":[{"op":"replace","path":"/spec/template/spec/image","value":"v1"}],"selector":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"DevMachineTemplate","matchResources":{"machineDeploymentClass":{"names":["default-worker"]}}}}],"name":"image"},` +
				`{"definitions":[{"jsonPatches":[{"op":"add","path":"/spec/template/spec/x","value":"y"}],"selector":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta2","kind":"DevClusterTemplate","matchResources":{"machineDeploymentClass":{}}}}],"name":"other"}]}`},
		{name: "topology version revert, a variable's empty value left",
			live: cluster("v1.36.1", "v1"), target: func(t *testing.T) revisions.Snapshot {
				s, err := revisions.ForClusterTopology(cluster("v1.35.2", "v1"))
				require.NoError(t, err)
				return s
			},
			wantSpec: `{"topology":{"version":"v1.35.2"}}`},
		{name: "topology variable revert, the unchanged variable's empty value kept in the list written",
			live: cluster("v1.36.1", "v2"), target: func(t *testing.T) revisions.Snapshot {
				s, err := revisions.ForClusterTopology(cluster("v1.36.1", "v1"))
				require.NoError(t, err)
				return s
			},
			wantSpec: `{"topology":{"variables":[{"name":"options","value":{}},{"name":"workerImage","value":"v1"}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := tt.target(t)
			patch, err := revisions.RollbackPatch(tt.live, target)
			require.NoError(t, err)
			acc := tt.live.(interface{ GetResourceVersion() string })
			assert.JSONEq(t, tt.wantSpec, patchSpec(t, patch, acc.GetResourceVersion()))
			// Applied, the revision content is the target's.
			after := reflect.New(reflect.TypeOf(tt.live).Elem()).Interface().(runtime.Object)
			applyPatch(t, tt.live, patch, after)
			var got revisions.Snapshot
			switch o := after.(type) {
			case *clusterv1.MachineDeployment:
				got = mdSnap(t, o)
				assert.Equal(t, tt.live.(*clusterv1.MachineDeployment).Spec.Template.Annotations[revisions.AnnotationRevision], o.Spec.Template.Annotations[revisions.AnnotationRevision])
			case *clusterv1.MachinePool:
				got, err = revisions.ForMachinePool(o)
				assert.Equal(t, tt.live.(*clusterv1.MachinePool).Spec.Template.Annotations[revisions.AnnotationRevision], o.Spec.Template.Annotations[revisions.AnnotationRevision])
			case *clusterv1.ClusterClass:
				got, err = revisions.ForClusterClass(o)
			case *clusterv1.Cluster:
				got, err = revisions.ForClusterTopology(o)
			}
			require.NoError(t, err)
			assert.Equal(t, target, got, "the revision content is the target's")
		})
	}
}
