package install

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// Names the shipped manifests must agree on.
const (
	namespace          = framework.GuardNamespace
	deploymentName     = "rollout-guard-controller-manager"
	webhookServiceName = "rollout-guard-webhook"
	servingCertName    = "rollout-guard-serving-cert"
	servingSecretName  = "rollout-guard-webhook-server-cert"
	injectCAAnnotation = "cert-manager.io/inject-ca-from"
	validatingName     = "rollout-guard-validating"
	mutatingName       = "rollout-guard-mutating"
	defaultImage       = "rollout-guard/webhook:dev"
	fieldOwner         = "rollout-guard-install-test"
)

// manifest is the output of a kustomization.
type manifest []*unstructured.Unstructured

// build runs kustomize on dir (relative to the repository root, or absolute).
func build(t *testing.T, dir string) manifest {
	t.Helper()
	if !strings.HasPrefix(dir, "/") {
		dir = repoPath(dir)
	}
	objs, err := framework.BuildKustomization(dir)
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	return objs
}

// find returns the one object of kind and name.
func (m manifest) find(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, u := range m {
		if u.GetKind() == kind && u.GetName() == name {
			found = append(found, u)
		}
	}
	require.Len(t, found, 1, "%s %s in the manifest", kind, name)
	return found[0]
}

// ofKind returns every object of kind.
func (m manifest) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range m {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

// ids lists "Kind/name" of every object, sorted.
func (m manifest) ids() []string {
	var out []string
	for _, u := range m {
		out = append(out, u.GetKind()+"/"+u.GetName())
	}
	slices.Sort(out)
	return out
}

// as converts u to the typed object T, strictly: a field T does not know
// fails the test.
func as[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true), "%s %s", u.GetKind(), u.GetName())
	return out
}

// webhookConfigurations returns the client configs of every webhook of
// both configurations in m, by webhook name, and the configurations' annotations by name.
func webhookConfigurations(t *testing.T, m manifest) (map[string]admissionregistrationv1.WebhookClientConfig, map[string]map[string]string) {
	t.Helper()
	clientConfigs := map[string]admissionregistrationv1.WebhookClientConfig{}
	annotations := map[string]map[string]string{}
	for _, u := range m.ofKind("ValidatingWebhookConfiguration") {
		cfg := as[admissionregistrationv1.ValidatingWebhookConfiguration](t, u)
		annotations[cfg.Name] = cfg.Annotations
		for _, w := range cfg.Webhooks {
			clientConfigs[w.Name] = w.ClientConfig
		}
	}
	for _, u := range m.ofKind("MutatingWebhookConfiguration") {
		cfg := as[admissionregistrationv1.MutatingWebhookConfiguration](t, u)
		annotations[cfg.Name] = cfg.Annotations
		for _, w := range cfg.Webhooks {
			clientConfigs[w.Name] = w.ClientConfig
		}
	}
	return clientConfigs, annotations
}

// TestDefaultWiring checks that the objects of config/default refer to each
// other correctly: what the Deployment mounts is what cert-manager writes,
// what the webhooks call is the Service that selects the guard's pods,
// what the CA injector reads is the serving Certificate, and so on.
func TestDefaultWiring(t *testing.T) {
	m := build(t, "config/default")
	assert.Equal(t, []string{
		"Certificate/rollout-guard-ca",
		"Certificate/rollout-guard-serving-cert",
		"ClusterRole/rollout-guard",
		"ClusterRole/rollout-guard-control-planes",
		"ClusterRole/rollout-guard-history-reader",
		"ClusterRole/rollout-guard-metrics-reader",
		"ClusterRoleBinding/rollout-guard",
		"ClusterRoleBinding/rollout-guard-control-planes",
		"CustomResourceDefinition/rolloutrevisions.rollout-guard.io",
		"Deployment/rollout-guard-controller-manager",
		"Issuer/rollout-guard-ca-issuer",
		"Issuer/rollout-guard-selfsigned-issuer",
		"MutatingWebhookConfiguration/rollout-guard-mutating",
		"Namespace/rollout-guard-system",
		"PodDisruptionBudget/rollout-guard-controller-manager",
		"Role/rollout-guard-armed",
		"Role/rollout-guard-arming",
		"Role/rollout-guard-leader-election",
		"Role/rollout-guard-stamp-key",
		"RoleBinding/rollout-guard-arming",
		"RoleBinding/rollout-guard-leader-election",
		"RoleBinding/rollout-guard-stamp-key",
		"Secret/rollout-guard-stamp-key",
		"Service/rollout-guard-metrics",
		"Service/rollout-guard-webhook",
		"ServiceAccount/rollout-guard",
		"ValidatingAdmissionPolicy/rollout-guard-arming",
		"ValidatingAdmissionPolicyBinding/rollout-guard-arming",
		"ValidatingWebhookConfiguration/rollout-guard-validating",
	}, m.ids())
	for _, u := range m {
		switch u.GetKind() {
		case "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			assert.Empty(t, u.GetNamespace(), "%s %s is cluster-scoped", u.GetKind(), u.GetName())
		default:
			assert.Equal(t, namespace, u.GetNamespace(), "%s %s", u.GetKind(), u.GetName())
		}
		assert.Equal(t, "rollout-guard", u.GetLabels()["app.kubernetes.io/part-of"], "%s %s", u.GetKind(), u.GetName())
	}
	// The history store's CRD carries clusterctl's label, so that
	// clusterctl move carries RolloutRevisions with their objects.
	crdLabels := m.find(t, "CustomResourceDefinition", "rolloutrevisions.rollout-guard.io").GetLabels()
	assert.Contains(t, crdLabels, "clusterctl.cluster.x-k8s.io", "the RolloutRevision CRD is labelled for clusterctl move")

	// The Deployment.
	dep := as[appsv1.Deployment](t, m.find(t, "Deployment", deploymentName))
	podLabels := labels.Set(dep.Spec.Template.Labels)
	selector, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	require.NoError(t, err)
	assert.True(t, selector.Matches(podLabels), "the Deployment selects its pods")
	assert.Equal(t, ptr.To[int32](2), dep.Spec.Replicas)
	assert.Equal(t, intstr.FromInt32(0), *dep.Spec.Strategy.RollingUpdate.MaxUnavailable, "an upgrade never has fewer ready replicas")
	pod := dep.Spec.Template.Spec
	sa := as[corev1.ServiceAccount](t, m.find(t, "ServiceAccount", framework.GuardServiceAccountName))
	assert.Equal(t, sa.Name, pod.ServiceAccountName)
	require.NotNil(t, pod.Affinity)
	require.NotNil(t, pod.Affinity.PodAntiAffinity)
	require.Len(t, pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1)
	anti := pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
	assert.Equal(t, corev1.LabelHostname, anti.TopologyKey)
	antiSelector, err := metav1.LabelSelectorAsSelector(anti.LabelSelector)
	require.NoError(t, err)
	assert.True(t, antiSelector.Matches(podLabels), "the anti-affinity keeps the guard's own replicas apart")
	require.NotNil(t, pod.SecurityContext)
	assert.Equal(t, ptr.To(true), pod.SecurityContext.RunAsNonRoot)
	assert.Equal(t, ptr.To[int64](65532), pod.SecurityContext.RunAsUser, "the distroless nonroot user")
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)

	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, defaultImage, c.Image)
	assert.Equal(t, []string{
		"--leader-elect",
		"--webhook-port=9443",
		"--cert-dir=/tmp/k8s-webhook-server/serving-certs",
		"--metrics-bind-address=:8443",
		"--health-probe-bind-address=:8081",
		"--shutdown-delay=5s",
	}, c.Args)
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	assert.Equal(t, map[string]int32{"webhook-server": 9443, "metrics": 8443, "health": 8081}, ports)
	require.NotNil(t, c.LivenessProbe)
	require.NotNil(t, c.ReadinessProbe)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	for _, probe := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		assert.Equal(t, int32(8081), ports[probe.HTTPGet.Port.StrVal], "probes use the health port")
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		request, limit := c.Resources.Requests[res], c.Resources.Limits[res]
		assert.False(t, request.IsZero(), "request for %s", res)
		assert.False(t, limit.IsZero(), "limit for %s", res)
		assert.Positive(t, limit.Cmp(request), "limit above request for %s", res)
	}
	require.NotNil(t, c.SecurityContext)
	assert.Equal(t, ptr.To(true), c.SecurityContext.RunAsNonRoot)
	assert.Equal(t, ptr.To(true), c.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, ptr.To(false), c.SecurityContext.AllowPrivilegeEscalation)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, c.SecurityContext.SeccompProfile.Type)

	// The serving certificate: cert-manager writes the Secret the
	// Deployment mounts at the --cert-dir.
	cert := m.find(t, "Certificate", servingCertName)
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	assert.Equal(t, servingSecretName, secretName)
	require.Len(t, c.VolumeMounts, 1)
	assert.Equal(t, "/tmp/k8s-webhook-server/serving-certs", c.VolumeMounts[0].MountPath)
	assert.True(t, c.VolumeMounts[0].ReadOnly)
	var certVolume *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == c.VolumeMounts[0].Name {
			certVolume = &pod.Volumes[i]
		}
	}
	require.NotNil(t, certVolume)
	require.NotNil(t, certVolume.Secret)
	assert.Equal(t, servingSecretName, certVolume.Secret.SecretName)
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	assert.ElementsMatch(t, []string{
		webhookServiceName + "." + namespace + ".svc",
		webhookServiceName + "." + namespace + ".svc.cluster.local",
	}, dnsNames)
	// The chain: self-signed Issuer → CA Certificate → CA Issuer → serving Certificate.
	issuerOf := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		name, _, _ := unstructured.NestedString(u.Object, "spec", "issuerRef", "name")
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "issuerRef", "kind")
		return m.find(t, kind, name)
	}
	caIssuer := issuerOf(cert)
	caSecret, _, _ := unstructured.NestedString(caIssuer.Object, "spec", "ca", "secretName")
	caCert := m.find(t, "Certificate", "rollout-guard-ca")
	caCertSecret, _, _ := unstructured.NestedString(caCert.Object, "spec", "secretName")
	assert.Equal(t, caCertSecret, caSecret, "the CA Issuer signs with the CA Certificate's key")
	isCA, _, _ := unstructured.NestedBool(caCert.Object, "spec", "isCA")
	assert.True(t, isCA)
	rotation, _, _ := unstructured.NestedString(caCert.Object, "spec", "privateKey", "rotationPolicy")
	assert.Equal(t, "Never", rotation, "a renewed CA keeps its key, so serving certificates signed before stay trusted")
	selfSigned := issuerOf(caCert)
	_, isSelfSigned, _ := unstructured.NestedMap(selfSigned.Object, "spec", "selfSigned")
	assert.True(t, isSelfSigned)

	// The Services select the guard's pods and reach its ports.
	svc := as[corev1.Service](t, m.find(t, "Service", webhookServiceName))
	assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels))
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, int32(443), svc.Spec.Ports[0].Port)
	assert.Equal(t, intstr.FromInt32(ports["webhook-server"]), svc.Spec.Ports[0].TargetPort)
	metricsSvc := as[corev1.Service](t, m.find(t, "Service", "rollout-guard-metrics"))
	assert.True(t, labels.SelectorFromSet(metricsSvc.Spec.Selector).Matches(podLabels))
	require.Len(t, metricsSvc.Spec.Ports, 1)
	assert.Equal(t, int32(8443), ports[metricsSvc.Spec.Ports[0].TargetPort.StrVal])

	// A drain never takes both replicas.
	pdb := as[policyv1.PodDisruptionBudget](t, m.find(t, "PodDisruptionBudget", deploymentName))
	assert.Equal(t, ptr.To(intstr.FromInt32(1)), pdb.Spec.MinAvailable)
	pdbSelector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	require.NoError(t, err)
	assert.True(t, pdbSelector.Matches(podLabels))

	// Every webhook calls the Service and trusts the CA that cert-manager
	// injects from the serving Certificate.
	clientConfigs, annotations := webhookConfigurations(t, m)
	assert.ElementsMatch(t, []string{validatingName, mutatingName}, keys(annotations))
	for name, ann := range annotations {
		assert.Equal(t, namespace+"/"+servingCertName, ann[injectCAAnnotation], "configuration %s", name)
	}
	require.NotEmpty(t, clientConfigs)
	for name, cc := range clientConfigs {
		require.NotNil(t, cc.Service, "webhook %s", name)
		assert.Equal(t, webhookServiceName, cc.Service.Name, "webhook %s", name)
		assert.Equal(t, namespace, cc.Service.Namespace, "webhook %s", name)
		assert.Contains(t, []int32{0, 443}, ptr.Deref(cc.Service.Port, 0), "webhook %s", name)
		assert.Empty(t, cc.CABundle, "webhook %s: cert-manager injects the CA", name)
	}

	// Every binding binds a role of the manifest to the guard's ServiceAccount.
	for _, u := range append(m.ofKind("ClusterRoleBinding"), m.ofKind("RoleBinding")...) {
		var roleRef rbacv1.RoleRef
		var subjects []rbacv1.Subject
		if u.GetKind() == "RoleBinding" {
			b := as[rbacv1.RoleBinding](t, u)
			roleRef, subjects = b.RoleRef, b.Subjects
		} else {
			b := as[rbacv1.ClusterRoleBinding](t, u)
			roleRef, subjects = b.RoleRef, b.Subjects
		}
		m.find(t, roleRef.Kind, roleRef.Name)
		assert.Equal(t, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: namespace}}, subjects, "%s %s", u.GetKind(), u.GetName())
	}
}

// keys returns the keys of m.
func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// warningRecorder keeps the warnings the API server returns.
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

// HandleWarningHeaderWithContext records one warning.
func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// take returns the warnings recorded so far and forgets them.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.warnings
	w.warnings = nil
	return out
}

// recordingClient returns an admin client whose API server warnings go to
// the returned recorder.
func recordingClient(t *testing.T) (client.Client, *warningRecorder) {
	t.Helper()
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = rec
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	return c, rec
}

// applyDryRun server-side applies every object of m in a dry run, after
// applying m's Namespaces for real (namespaced objects need them). Every
// object must be accepted, without warnings.
func applyDryRun(t *testing.T, m manifest) {
	t.Helper()
	ctx := t.Context()
	c, warnings := recordingClient(t)
	for _, ns := range m.ofKind("Namespace") {
		require.NoError(t, c.Apply(ctx, client.ApplyConfigurationFromUnstructured(ns.DeepCopy()), client.FieldOwner(fieldOwner), client.ForceOwnership),
			"creating namespace %s", ns.GetName())
	}
	for _, u := range m {
		u = u.DeepCopy()
		if strings.HasSuffix(u.GetKind(), "WebhookConfiguration") {
			// The environment registers the guard under these names, with
			// URLs instead of the Service; an apply would merge the two.
			// Check them as a fresh install would create them.
			u.SetName(u.GetName() + "-install-check")
		}
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership, client.DryRunAll)
		assert.NoError(t, err, "server-side dry-run apply of %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
		assert.Empty(t, warnings.take(), "warnings for %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
	}
}

// TestDefaultIsAcceptedByTheAPIServer applies everything config/default
// makes, in a server-side dry run, to the API server with the Cluster API
// and cert-manager CRDs. The namespace carries the restricted Pod Security
// level in warn mode, so a pod template that breaks it comes back with a
// warning; the test shows that such a warning does come back for a
// Deployment that breaks the level, so that "no warning" means something.
func TestDefaultIsAcceptedByTheAPIServer(t *testing.T) {
	m := build(t, "config/default")
	applyDryRun(t, m)

	// The same Deployment with privilege escalation allowed: warned about.
	dep := m.find(t, "Deployment", deploymentName).DeepCopy()
	containers, _, err := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	unstructured.RemoveNestedField(containers[0].(map[string]any), "securityContext", "allowPrivilegeEscalation")
	require.NoError(t, unstructured.SetNestedSlice(dep.Object, containers, "spec", "template", "spec", "containers"))
	c, warnings := recordingClient(t)
	require.NoError(t, c.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(dep), client.FieldOwner(fieldOwner), client.ForceOwnership, client.DryRunAll))
	got := strings.Join(warnings.take(), "\n")
	assert.Contains(t, got, `would violate PodSecurity "restricted`)
	assert.Contains(t, got, "allowPrivilegeEscalation")

	// The serving Certificate with a misspelt field: refused by
	// cert-manager's schema, so the Certificates above were checked too.
	cert := m.find(t, "Certificate", servingCertName).DeepCopy()
	require.NoError(t, unstructured.SetNestedField(cert.Object, "rollout-guard-webhook-server-cert", "spec", "secretNam"))
	err = c.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(cert), client.FieldOwner(fieldOwner), client.ForceOwnership, client.DryRunAll)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "secretNam")
}
