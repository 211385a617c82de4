package e2e

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/webhooks"
)

// The control-plane kinds of other providers in these tests: minimal CRDs
// shaped by Cluster API's control-plane contract (spec.version,
// spec.replicas, spec.machineTemplate, spec.rollout.after; status.version,
// status.versions and the replica counts). The guard lists kthrees with
// --control-plane-kinds; kzero it does not, and may not read.
var (
	kthrees = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KthreesControlPlane"}
	kzero   = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KzeroControlPlane"}
)

// controlPlaneKindsArg is the guard's flag listing kthrees.
var controlPlaneKindsArg = "--control-plane-kinds=" + kthrees.Kind + "." + kthrees.Group

// contractCRD is a minimal CRD of a control-plane kind that follows Cluster
// API's contract, labelled with the contract version as providers label
// theirs.
func contractCRD(gvk schema.GroupVersionKind) *apiextensionsv1.CustomResourceDefinition {
	plural := strings.ToLower(gvk.Kind) + "s"
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	num := apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32"}
	open := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"version":         str,
		"replicas":        num,
		"machineTemplate": open,
		"rollout": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"after": {Type: "string", Format: "date-time"},
		}},
	}}
	status := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"version": str,
		"versions": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"version": str, "replicas": num},
		}}},
		"replicas": num, "readyReplicas": num, "availableReplicas": num, "upToDateReplicas": num,
		"observedGeneration": {Type: "integer", Format: "int64"},
	}}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + gvk.Group, Labels: map[string]string{framework.ContractLabel: "v1beta2"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: gvk.Kind, ListKind: gvk.Kind + "List", Plural: plural, Singular: strings.ToLower(gvk.Kind)},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gvk.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec, "status": status},
				}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

// installContractKinds installs the CRDs of kthrees and kzero and, as
// docs/control-planes.md has an operator do, a ClusterRole labelled
// rollout-guard.io/aggregate-to-control-planes=true that lets the guard read
// kthrees. The test environment runs no kube-controller-manager, which would
// aggregate that role into rollout-guard-control-planes: a binding of the
// role to the guard's ServiceAccount stands in for it. It runs before the
// guard starts, which resolves the kinds it lists at start.
func installContractKinds(ctx context.Context, e *framework.Environment) error {
	c := e.Client
	for _, gvk := range []schema.GroupVersionKind{kthrees, kzero} {
		crd := contractCRD(gvk)
		if err := c.Create(ctx, crd); err != nil {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
				return false, err
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return fmt.Errorf("waiting for CRD %s: %w", crd.Name, err)
		}
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-kthrees", Labels: map[string]string{"rollout-guard.io/aggregate-to-control-planes": "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{kthrees.Group}, Resources: []string{"kthreescontrolplanes"}, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-kthrees"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: framework.GuardNamespace, Name: framework.GuardServiceAccountName}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// registerKthrees registers the guard's webhooks for kthrees, as
// docs/control-planes.md has an operator do for a listed kind, pointed at the
// running guard, until the test ends.
func registerKthrees(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	gk := kthrees.GroupKind()
	url := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(env.GuardURL() + path), CABundle: env.GuardCABundle()}
	}
	rules := func(op admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{op}, Rule: admissionregistrationv1.Rule{
			APIGroups: []string{kthrees.Group}, APIVersions: []string{kthrees.Version}, Resources: []string{"kthreescontrolplanes"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		}}}
	}
	sideEffects := ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun)
	versionChanged := []admissionregistrationv1.MatchCondition{{Name: "version-changed", Expression: "object.spec.?version.orValue('') != oldObject.spec.?version.orValue('')"}}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-kthreescontrolplanes"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "validate.kthreescontrolplane.rollout-guard.io", ClientConfig: url(webhooks.ValidateContractControlPlanePath(gk)), Rules: rules(admissionregistrationv1.Update),
				FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: sideEffects, AdmissionReviewVersions: []string{"v1"}, MatchConditions: versionChanged},
			{Name: "validate-create.kthreescontrolplane.rollout-guard.io", ClientConfig: url(webhooks.ValidateContractControlPlanePath(gk)), Rules: rules(admissionregistrationv1.Create),
				FailurePolicy: ptr.To(admissionregistrationv1.Ignore), SideEffects: sideEffects, AdmissionReviewVersions: []string{"v1"}},
		},
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-kthreescontrolplanes"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			{Name: "stamp.kthreescontrolplane.rollout-guard.io", ClientConfig: url(webhooks.MutateContractControlPlanePath(gk)), Rules: rules(admissionregistrationv1.Update),
				FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: sideEffects, AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy)},
			{Name: "stamp-create.kthreescontrolplane.rollout-guard.io", ClientConfig: url(webhooks.MutateContractControlPlanePath(gk)), Rules: rules(admissionregistrationv1.Create),
				FailurePolicy: ptr.To(admissionregistrationv1.Ignore), SideEffects: sideEffects, AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy)},
		},
	}
	for _, obj := range []client.Object{validating, mutating} {
		require.NoError(t, env.Client.Create(ctx, obj))
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
}

// contractCluster creates namespace ns with Cluster c1 whose control plane
// is c1-cp of kind gvk at version (its machines reported running it, on
// DevMachineTemplate c1-cp), and MachineDeployment c1-md-0 at mdVersion.
func contractCluster(t *testing.T, ns string, gvk schema.GroupVersionKind, version, mdVersion string) (*unstructured.Unstructured, *clusterv1.MachineDeployment) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	cluster := builder.Cluster(ns, "c1").WithControlPlaneRef(gvk.Group, gvk.Kind, "c1-cp").WithInfrastructure("c1").Build()
	require.NoError(t, env.Client.Create(ctx, cluster))
	require.NoError(t, env.Client.Create(ctx, builder.DevMachineTemplate(ns, "c1-cp").Unstructured()))
	cp := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"version":  version,
			"replicas": int64(3),
			"machineTemplate": map[string]any{"spec": map[string]any{"infrastructureRef": map[string]any{
				"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachineTemplate", "name": "c1-cp",
			}}},
		},
	}}
	cp.SetGroupVersionKind(gvk)
	cp.SetNamespace(ns)
	cp.SetName("c1-cp")
	cp.SetLabels(map[string]string{clusterv1.ClusterNameLabel: "c1"})
	require.NoError(t, env.Client.Create(ctx, cp))
	setRunning(t, cp, version)

	md := env.WorldIn(ns).AddPool(t, framework.WorldPoolName, mdVersion)
	return cp, md
}

// setRunning reports, in cp's status, every machine at version.
func setRunning(t *testing.T, cp *unstructured.Unstructured, version string) {
	t.Helper()
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(cp), cp))
	require.NoError(t, unstructured.SetNestedSlice(cp.Object, []any{map[string]any{"version": version, "replicas": int64(3)}}, "status", "versions"))
	require.NoError(t, unstructured.SetNestedField(cp.Object, version, "status", "version"))
	require.NoError(t, env.Client.Status().Update(context.Background(), cp))
}

// setVersion sets cp's spec.version as user and returns the API server's answer.
func setVersion(t *testing.T, c client.Client, cp *unstructured.Unstructured, version string) error {
	t.Helper()
	fresh := cp.DeepCopy()
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(fresh), fresh))
	require.NoError(t, unstructured.SetNestedField(fresh.Object, version, "spec", "version"))
	return c.Update(context.Background(), fresh)
}

// TestContractControlPlane: a control-plane kind of another provider,
// listed with --control-plane-kinds, is policed through the contract's
// fields: an upgrade goes through and is stamped and recorded; its
// downgrade and a skipped minor are refused with the rules' words naming
// its kind, not kubeadm; a MachineDeployment newer than it is refused; and
// rollout history lists its revisions.
func TestContractControlPlane(t *testing.T) {
	ctx := context.Background()
	registerKthrees(t)
	cp, md := contractCluster(t, "e2e-kthrees", kthrees, "v1.34.3", "v1.34.3")
	waitGuardSeesControlPlane(t, md)

	alice := framework.UserClient(t, env, "alice")
	require.NoError(t, setVersion(t, alice, cp, "v1.35.2"), "one minor up")
	setRunning(t, cp, "v1.35.2")
	rec := env.Stamps(t, cp)
	assert.EqualValues(t, 2, rec.Revision)
	assert.Equal(t, "alice", rec.ChangedBy)
	assert.Equal(t, "version v1.34.3 → v1.35.2", rec.ChangeCause)

	const prefix = `admission webhook "validate.kthreescontrolplane.rollout-guard.io" denied the request: KthreesControlPlane.controlplane.cluster.x-k8s.io "c1-cp" is invalid: spec.version: Forbidden: `
	err := setVersion(t, alice, cp, "v1.34.3")
	require.Error(t, err, "a minor downgrade")
	assert.Equal(t, prefix+"KthreesControlPlane c1-cp: Kubernetes downgrade from v1.35.2 to v1.34.3 is not supported: a Kubernetes control plane cannot be downgraded [rule ControlPlaneDowngrade]; keep spec.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore its datastore from a backup)", err.Error())

	err = setVersion(t, alice, cp, "v1.37.0")
	require.Error(t, err, "two minors at once")
	assert.Equal(t, prefix+"KthreesControlPlane c1-cp: upgrade from v1.35.2 to v1.37.0 skips v1.36; the API servers of a control plane must stay within one minor of each other [rule ControlPlaneMinorSkip]; set spec.version to a v1.36.x release first and wait until every control-plane machine runs it, then upgrade to v1.37", err.Error())

	err = edit(t, mergePatch, md, "v1.36.0", mdVersion...)
	require.Error(t, err, "a worker newer than the control plane")
	assert.Equal(t, `admission webhook "validate.machinedeployment.rollout-guard.io" denied the request: MachineDeployment.cluster.x-k8s.io "c1-md-0" is invalid: spec.template.spec.version: Forbidden: MachineDeployment c1-md-0: v1.36.0 is newer than v1.35.2, the oldest version of control plane KthreesControlPlane c1-cp (its spec.version); a kubelet must not be newer than the API server [rule WorkerNewerThanControlPlane]; keep spec.template.spec.version at v1.35.x or older until every machine of control plane KthreesControlPlane c1-cp runs v1.36 or newer`, err.Error())
	require.NoError(t, edit(t, mergePatch, md, "v1.35.2", mdVersion...), "a worker up to it")

	// Its history: both revisions, recorded as the contract's fields.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		revs, bad, err := history.List(ctx, env.Client, cp.GetNamespace(), string(cp.GetUID()))
		require.NoError(c, err)
		require.Empty(c, bad)
		assert.Len(c, revs, 2, framework.DescribeHistory(revs))
	}, 20*time.Second, 100*time.Millisecond, "the two revisions of KthreesControlPlane c1-cp were never recorded")
	out := rolloutCLI(t, "history", "kthreescontrolplane.controlplane.cluster.x-k8s.io/c1-cp", "-n", cp.GetNamespace())
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Regexp(t, `^REVISION\s+VERSION\s+INFRASTRUCTURE\s+BOOTSTRAP\s+CHANGED-BY\s+VIA\s+AGE\s+CHANGE-CAUSE$`, lines[0])
	assert.Regexp(t, `^1\s+v1\.34\.3\s+DevMachineTemplate/c1-cp\s+.*created$`, lines[1])
	assert.Regexp(t, `^2\s+v1\.35\.2\s+DevMachineTemplate/c1-cp\s+.*alice\s+.*version v1\.34\.3 → v1\.35\.2$`, lines[2])

	// An undo to revision 1 is the downgrade, below its worker too:
	// refused before sending.
	ref := "kthreescontrolplane.controlplane.cluster.x-k8s.io/c1-cp"
	code, _, stderr := runRollout(t, "undo", ref, "-n", cp.GetNamespace())
	assert.Equal(t, rollout.ExitRefused, code, stderr)
	assert.Equal(t, "error: rollout-guard's policy refuses this change (checked before sending; nothing was changed): KthreesControlPlane.controlplane.cluster.x-k8s.io \"c1-cp\" is invalid: ["+
		"spec.version: Forbidden: KthreesControlPlane c1-cp: Kubernetes downgrade from v1.35.2 to v1.34.3 is not supported: a Kubernetes control plane cannot be downgraded [rule ControlPlaneDowngrade]; keep spec.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore its datastore from a backup), "+
		"spec.version: Forbidden: KthreesControlPlane c1-cp: MachineDeployment c1-md-0 runs v1.35.2, newer than v1.34.3; a kubelet must not be newer than the API server [rule ControlPlaneLeavesWorkerNewer]; keep spec.version at v1.35.x or later while MachineDeployment c1-md-0 runs v1.35]\n"+
		"To ask the guard itself, add --dry-run=server. To override (members of the guard's override groups only; recorded in the history), add --force --reason TEXT.\n", stderr)
	assert.EqualValues(t, 2, env.Stamps(t, cp).Revision, "nothing was sent")

	// Its kind has spec.rollout.after: restart sets it.
	code, out, stderr = runRollout(t, "restart", ref, "-n", cp.GetNamespace(), "--yes")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "kthreescontrolplane.controlplane.cluster.x-k8s.io/c1-cp restarted\n", out)
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(cp), cp))
	after, _, _ := unstructured.NestedString(cp.Object, "spec", "rollout", "after")
	assert.NotEmpty(t, after)
}

// TestUnlistedControlPlaneKind: a Cluster whose control plane is of a kind
// the guard does not list, and may not read, keeps its worker edits allowed
// with a warning that names the flag to add it with.
func TestUnlistedControlPlaneKind(t *testing.T) {
	ctx := context.Background()
	_, md := contractCluster(t, "e2e-kzero", kzero, "v1.35.2", "v1.35.2")
	c, warnings := warningClient(t, "")
	fresh := md.DeepCopy()
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(fresh), fresh))
	fresh.Spec.Template.Spec.Version = "v1.36.0"
	require.NoError(t, c.Update(ctx, fresh), "not judged: its control plane cannot be read")
	require.Len(t, warnings.texts, 1)
	assert.Contains(t, warnings.texts[0], "rollout-guard: version skew of MachineDeployment e2e-kzero/c1-md-0 not checked: control plane KzeroControlPlane e2e-kzero/c1-cp could not be read within 2s")
	assert.True(t, strings.HasSuffix(warnings.texts[0], "; to have it policed, add KzeroControlPlane.controlplane.cluster.x-k8s.io to the guard's --control-plane-kinds"), warnings.texts[0])
}

// waitGuardSeesControlPlane waits until the guard judges md against its
// Cluster's control plane (the guard reads through a cache): a dry-run
// update far above any control plane is refused for being newer.
func waitGuardSeesControlPlane(t *testing.T, md *clusterv1.MachineDeployment) {
	t.Helper()
	ctx := context.Background()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		fresh := md.DeepCopy()
		require.NoError(c, env.Client.Get(ctx, client.ObjectKeyFromObject(fresh), fresh))
		fresh.Spec.Template.Spec.Version = "v1.99.0"
		err := env.Client.Update(ctx, fresh, client.DryRunAll)
		require.Error(c, err, "a dry-run update to v1.99.0")
		assert.Contains(c, err.Error(), "[rule WorkerNewerThanControlPlane]")
	}, 15*time.Second, 50*time.Millisecond, "the guard never judged MachineDeployment %s against its control plane", md.Name)
}

// rolloutCLI runs the rollout CLI in-process as the admin and returns its
// standard output, failing the test on an error.
func rolloutCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := runRollout(t, args...)
	require.Equal(t, 0, code, "rollout %s: %s", strings.Join(args, " "), stderr)
	return stdout
}

// runRollout runs the rollout CLI in-process as the admin: its exit code,
// standard output and standard error.
func runRollout(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, env.WriteKubeconfig(kubeconfig))
	var stdout, stderr bytes.Buffer
	opts := framework.RolloutOptions(filepath.Join(dir, "cache"), &stdout, &stderr)
	code := rollout.Execute(context.Background(), opts, append(args, "--kubeconfig="+kubeconfig))
	t.Logf("rollout %s\n--- exit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	return code, stdout.String(), stderr.String()
}
