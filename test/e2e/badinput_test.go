package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// badInputCase is one hand-written bad (or odd) request through the API
// server, and its exact outcome.
type badInputCase struct {
	name  string
	world framework.WorldSpec
	// setup prepares the world (deletes a control plane, removes a label).
	setup func(t *testing.T, w *framework.World)
	// do sends the request as c, a client whose warnings are recorded.
	do func(t *testing.T, w *framework.World, c client.Client) error
	// wantErr is the whole error text, "" for an allowed request.
	wantErr string
	// wantWarnings are the whole warnings the API server passed on.
	wantWarnings []string
	// check runs after an allowed request.
	check func(t *testing.T, w *framework.World)
}

// TestBadInputThroughTheAPIServer sends hand-written bad requests the way a
// user would, through the API server: non-semantic versions, a deleted
// control plane, missing facts, missing templates, large objects, forged
// stamps, a version the API server does not serve. Each gets a clear
// refusal naming the object and field, or an allowance that is right (with
// a warning when the guard could not judge everything).
func TestBadInputThroughTheAPIServer(t *testing.T) {
	ctx := context.Background()
	merge := func(obj client.Object, patch string) func(*testing.T, *framework.World, client.Client) error {
		return func(_ *testing.T, _ *framework.World, c client.Client) error {
			return c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, []byte(patch)))
		}
	}
	onW := func(pick target, patch string) func(*testing.T, *framework.World, client.Client) error {
		return func(t *testing.T, w *framework.World, c client.Client) error { return merge(pick(w), patch)(t, w, c) }
	}
	deleteKCP := func(t *testing.T, w *framework.World) {
		require.NoError(t, env.Client.Delete(ctx, w.KCP))
		waitGuardForgets(t, w)
	}
	// files of 10 KiB each (the CRD's limit per file), about 1 MiB in all.
	bigFiles := func() []bootstrapv1.File {
		var files []bootstrapv1.File
		for i := range 100 {
			files = append(files, bootstrapv1.File{Path: fmt.Sprintf("/etc/big/%d", i), Content: strings.Repeat("x", 10240)})
		}
		return files
	}
	withBigFiles := func(t *testing.T, w *framework.World) {
		patch := client.MergeFrom(w.KCP.DeepCopy())
		w.KCP.Spec.KubeadmConfigSpec.Files = bigFiles()
		require.NoError(t, env.Client.Patch(ctx, w.KCP, patch))
	}
	invalidVersion := func(prefix, field, value, kind, name string) string {
		return prefix + fmt.Sprintf(`%s: Invalid value: %q: %s %s: %s %q is not a valid Kubernetes version [rule InvalidVersion]; write a Kubernetes version such as v1.35.2`, field, value, kind, name, field, value)
	}

	cases := []badInputCase{
		{
			name:    "non-semver KubeadmControlPlane version",
			world:   framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			do:      onW(onKCP, `{"spec":{"version":"latest"}}`),
			wantErr: invalidVersion(kcpDenied, "spec.version", "latest", "KubeadmControlPlane", "c1-control-plane"),
		},
		{
			name:    "MachineDeployment version without the patch number and the v",
			world:   framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			do:      onW(onMD, `{"spec":{"template":{"spec":{"version":"1.34"}}}}`),
			wantErr: invalidVersion(mdDenied, "spec.template.spec.version", "1.34", "MachineDeployment", "c1-md-0"),
		},
		{
			name:    "non-semver topology version",
			world:   framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2", Topology: true},
			do:      onW(onCluster, `{"spec":{"topology":{"version":"v1.35.x"}}}`),
			wantErr: invalidVersion(clusterDenied, "spec.topology.version", "v1.35.x", "Cluster", "c1"),
		},
		{
			name:  "deleted control plane: a worker version change is allowed, with a warning that skew was not checked",
			world: framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			setup: deleteKCP,
			do:    onW(onMD, `{"spec":{"template":{"spec":{"version":"v1.35.0"}}}}`),
			wantWarnings: []string{
				"rollout-guard: version skew of MachineDeployment %[1]s/c1-md-0 not checked: KubeadmControlPlane %[1]s/c1-control-plane of Cluster c1 not found",
			},
			check: func(t *testing.T, w *framework.World) {
				w.MD = refetch(t, w.MD)
				assert.Equal(t, "v1.35.0", w.MD.Spec.Template.Spec.Version)
			},
		},
		{
			name:    "deleted control plane: a non-semver worker version is still refused",
			world:   framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			setup:   deleteKCP,
			do:      onW(onMD, `{"spec":{"template":{"spec":{"version":"latest"}}}}`),
			wantErr: invalidVersion(mdDenied, "spec.template.spec.version", "latest", "MachineDeployment", "c1-md-0"),
			wantWarnings: []string{
				"rollout-guard: version skew of MachineDeployment %[1]s/c1-md-0 not checked: KubeadmControlPlane %[1]s/c1-control-plane of Cluster c1 not found",
			},
		},
		{
			name:    "deleted control plane: a topology downgrade is still refused, judged on the Cluster alone",
			world:   framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.34.2", Topology: true},
			setup:   deleteKCP,
			do:      onW(onCluster, `{"spec":{"topology":{"version":"v1.34.2"}}}`),
			wantErr: clusterDenied + `spec.topology.version: Forbidden: Cluster c1: Kubernetes downgrade from v1.35.2 to v1.34.2 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.topology.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)`,
			wantWarnings: []string{
				"rollout-guard: KubeadmControlPlane %[1]s/c1-control-plane of Cluster c1 not found; judged on spec.topology.version alone",
			},
		},
		{
			// Its Cluster is the one whose spec.controlPlaneRef names it: the
			// workers are still checked, and nothing is left unjudged.
			name:  "control plane without its cluster label: a minor skip is still refused",
			world: framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			setup: func(t *testing.T, w *framework.World) {
				require.NoError(t, env.Client.Patch(ctx, w.KCP.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/labels"}]`))))
			},
			do:      onW(onKCP, `{"spec":{"version":"v1.36.0"}}`),
			wantErr: kcpDenied + `spec.version: Forbidden: KubeadmControlPlane c1-control-plane: upgrade from v1.34.2 to v1.36.0 skips v1.35; kubeadm upgrades one minor at a time [rule ControlPlaneMinorSkip]; set spec.version to a v1.35.x release first and wait until every control-plane machine runs it, then upgrade to v1.36`,
		},
		{
			name:  "Cluster without a controlPlaneRef: a worker upgrade is allowed, with a warning",
			world: framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			setup: func(t *testing.T, w *framework.World) {
				require.NoError(t, env.Client.Patch(ctx, w.Cluster.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/controlPlaneRef"}]`))))
				waitGuardForgets(t, w)
			},
			do: onW(onMD, `{"spec":{"template":{"spec":{"version":"v1.34.3"}}}}`),
			wantWarnings: []string{
				"rollout-guard: version skew of MachineDeployment %[1]s/c1-md-0 not checked: Cluster %[1]s/c1 has no spec.controlPlaneRef",
			},
		},
		{
			name:  "missing infrastructure template: allowed and stamped (Cluster API reports the missing template)",
			world: framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			do:    onW(onMD, `{"spec":{"template":{"spec":{"infrastructureRef":{"name":"no-such-template"}}}}}`),
			check: func(t *testing.T, w *framework.World) {
				w.MD = refetch(t, w.MD)
				rec, err := revisions.RecordFromAnnotations(w.MD.Annotations)
				require.NoError(t, err)
				assert.EqualValues(t, 2, rec.Revision)
				assert.Equal(t, "bad-input-user", rec.ChangedBy)
				assert.Equal(t, revisions.ChangeRollout, rec.ChangeType)
			},
		},
		{
			name:    "1 MiB control plane with a minor skip: refused like a small one",
			world:   framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			setup:   withBigFiles,
			do:      onW(onKCP, `{"spec":{"version":"v1.36.0"}}`),
			wantErr: kcpDenied + `spec.version: Forbidden: KubeadmControlPlane c1-control-plane: upgrade from v1.34.2 to v1.36.0 skips v1.35; kubeadm upgrades one minor at a time [rule ControlPlaneMinorSkip]; set spec.version to a v1.35.x release first and wait until every control-plane machine runs it, then upgrade to v1.36`,
		},
		{
			name:  "1 MiB control plane with an upgrade: allowed and its replaced revision recorded",
			world: framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			setup: withBigFiles,
			do:    onW(onKCP, `{"spec":{"version":"v1.35.0"}}`),
			check: func(t *testing.T, w *framework.World) {
				w.KCP = refetch(t, w.KCP)
				assert.Equal(t, "v1.35.0", w.KCP.Spec.Version)
				assert.Len(t, w.KCP.Spec.KubeadmConfigSpec.Files, 100)
				assert.Equal(t, "3", w.KCP.Annotations[revisions.AnnotationRevision], "revision 1 created, 2 the big files, 3 the upgrade")
				revs, _, err := history.List(ctx, env.Client, w.Namespace, string(w.KCP.UID))
				require.NoError(t, err)
				var replaced *revisions.Revision
				for i := range revs {
					if revs[i].Record.Revision == 2 {
						replaced = &revs[i]
					}
				}
				require.NotNil(t, replaced, "revision 2, replaced by the upgrade, was not recorded")
				assert.Contains(t, string(replaced.Snapshot.Data), strings.Repeat("x", 10240), "the recorded revision lost the large files")
			},
		},
		{
			// A namespace editor (create on MachineDeployments, nothing on
			// RolloutRevisions) cannot restore history: its stamps are a
			// forgery.
			name:  "forged stamps on create: overwritten with the creator and revision 1",
			world: framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			do: func(t *testing.T, w *framework.World, _ client.Client) error {
				editor := grantMachineDeploymentEditor(t, w.Namespace)
				md := w.MD.DeepCopy()
				md.ObjectMeta = metav1.ObjectMeta{Namespace: w.Namespace, Name: "forged", Annotations: map[string]string{
					revisions.AnnotationChangedBy: "someone-else", revisions.AnnotationRevision: "42", revisions.AnnotationOverriddenBy: "someone-else",
				}}
				return editor.Create(ctx, md)
			},
			check: func(t *testing.T, w *framework.World) {
				md := &clusterv1.MachineDeployment{}
				require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: "forged"}, md))
				assert.Equal(t, machineDeploymentEditor, md.Annotations[revisions.AnnotationChangedBy])
				assert.Equal(t, "1", md.Annotations[revisions.AnnotationRevision])
				assert.NotContains(t, md.Annotations, revisions.AnnotationOverriddenBy)
			},
		},
		{
			// Whoever may create RolloutRevisions could write that past
			// anyway: its create with stamps is a restore (clusterctl move, a
			// directory backup), and the stamps are kept as they are.
			name:  "stamps on create by a user who may create RolloutRevisions: kept, a restore",
			world: framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			do: func(_ *testing.T, w *framework.World, c client.Client) error {
				md := w.MD.DeepCopy()
				md.ObjectMeta = metav1.ObjectMeta{Namespace: w.Namespace, Name: "restored", Annotations: map[string]string{
					revisions.AnnotationChangedBy: "someone-else", revisions.AnnotationRevision: "42", revisions.AnnotationOverriddenBy: "someone-else",
				}}
				return c.Create(ctx, md)
			},
			check: func(t *testing.T, w *framework.World) {
				md := &clusterv1.MachineDeployment{}
				require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: "restored"}, md))
				assert.Equal(t, "someone-else", md.Annotations[revisions.AnnotationChangedBy])
				assert.Equal(t, "42", md.Annotations[revisions.AnnotationRevision])
				assert.Equal(t, "someone-else", md.Annotations[revisions.AnnotationOverriddenBy])
			},
		},
		{
			name:  "Cluster API's bookkeeping (status, finalizer, scale): allowed, revision unchanged",
			world: framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			do: func(t *testing.T, w *framework.World, c client.Client) error {
				kcp := refetch(t, w.KCP)
				kcp.Status.Versions = []clusterv1.StatusVersion{{Version: "v1.34.2", Replicas: 3}}
				kcp.Status.ObservedGeneration = kcp.Generation
				if err := c.Status().Update(ctx, kcp); err != nil {
					return err
				}
				return merge(w.MD, `{"metadata":{"finalizers":["cluster.x-k8s.io/machinedeployment"]},"spec":{"replicas":5}}`)(t, w, c)
			},
			check: func(t *testing.T, w *framework.World) {
				w.MD = refetch(t, w.MD)
				assert.EqualValues(t, 5, *w.MD.Spec.Replicas)
				assert.Equal(t, "1", w.MD.Annotations[revisions.AnnotationRevision])
			},
		},
		{
			name:  "a version the API server does not serve: refused before any webhook",
			world: framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"},
			do: func(t *testing.T, w *framework.World, _ client.Client) error {
				// Sent as raw HTTP: a client's REST mapper would refuse it before sending.
				hc, err := rest.HTTPClientFor(env.Config)
				require.NoError(t, err)
				url := fmt.Sprintf("%s/apis/cluster.x-k8s.io/v1alpha3/namespaces/%s/machinedeployments/%s", env.Config.Host, w.Namespace, w.MD.Name)
				req, err := http.NewRequest(http.MethodPatch, url, strings.NewReader(`{"spec":{"template":{"spec":{"version":"v1.33.0"}}}}`))
				require.NoError(t, err)
				req.Header.Set("Content-Type", string(types.MergePatchType))
				resp, err := hc.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
			},
			wantErr: "HTTP 404: 404 page not found",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.world)
			if tc.setup != nil {
				tc.setup(t, w)
			}
			c, warnings := warningClient(t, "bad-input-user", "system:masters")
			err := tc.do(t, w, c)
			if tc.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.Error(t, err, "allowed")
				assert.Equal(t, tc.wantErr, err.Error())
			}
			var want []string
			for _, w1 := range tc.wantWarnings {
				want = append(want, fmt.Sprintf(w1, w.Namespace))
			}
			assert.Equal(t, want, warnings.texts)
			if tc.check != nil {
				tc.check(t, w)
			}
		})
	}
}

// refetch reads obj again from the API server.
func refetch[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	fresh := obj.DeepCopyObject().(T)
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), fresh))
	return fresh
}

// waitGuardForgets waits until the guard's cache no longer gives w's worker
// pool a control plane: a dry-run worker version change far ahead of it is
// allowed (with a warning) rather than refused.
func waitGuardForgets(t *testing.T, w *framework.World) {
	t.Helper()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		md := refetch(t, w.MD)
		md.Spec.Template.Spec.Version = "v1.99.0"
		return env.Client.Update(ctx, md, client.DryRunAll) == nil
	}, 30*time.Second, 100*time.Millisecond, "the guard still judges %s/%s against a control plane", w.Namespace, w.MD.Name)
}

// TestBadRequestsStraightToTheGuard posts to the guard's own URL over TLS
// what the API server would never send. Each answer is exact; afterwards the
// guard is still ready and still refuses what it should.
func TestBadRequestsStraightToTheGuard(t *testing.T) {
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(env.GuardCABundle()))
	httpClient := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}

	alice := authenticationv1.UserInfo{Username: "alice"}
	kcpJSON := func(version string, ann map[string]string) []byte {
		k := w.KCP.DeepCopy()
		k.SetGroupVersionKind(controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"))
		k.Spec.Version = version
		k.Annotations = ann
		b, err := json.Marshal(k)
		require.NoError(t, err)
		return b
	}
	mdJSON := func(version string) []byte {
		m := w.MD.DeepCopy()
		m.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("MachineDeployment"))
		m.Spec.Template.Spec.Version = version
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	reviewOf := func(kind string, op admissionv1.Operation, oldRaw, newRaw []byte, dryRun bool) []byte {
		ar := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID: "direct-1", Kind: metav1.GroupVersionKind{Version: "v1beta2", Kind: kind}, Operation: op,
				Namespace: w.Namespace, Name: "c1-control-plane", UserInfo: alice,
				Object: runtime.RawExtension{Raw: newRaw}, OldObject: runtime.RawExtension{Raw: oldRaw},
				DryRun: ptr.To(dryRun),
			},
		}
		b, err := json.Marshal(ar)
		require.NoError(t, err)
		return b
	}
	review := func(kind string, op admissionv1.Operation, oldRaw, newRaw []byte) []byte {
		return reviewOf(kind, op, oldRaw, newRaw, false)
	}
	// A dry-run, so that the refused override is not noted in history.
	override := reviewOf("KubeadmControlPlane", admissionv1.Update, kcpJSON("v1.34.2", nil),
		kcpJSON("v1.33.5", map[string]string{revisions.AnnotationOverride: "posted directly"}), true)
	const (
		validateKCP = "/validate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane"
		validateMD  = "/validate-cluster-x-k8s-io-v1beta2-machinedeployment"
		mutateKCP   = "/mutate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane"
	)
	oversized := append([]byte(`{"request":{"operation":"UPDATE","object":{"metadata":{"annotations":{"a":"`), bytes.Repeat([]byte("x"), 8<<20)...)
	oversized = append(oversized, []byte(`"}}}}}`)...)

	cases := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        []byte
		wantStatus  int    // HTTP status
		wantAllowed bool   // for an AdmissionReview answer
		wantCode    int32  // the response's status code
		wantMsg     string // the whole message (or the body, for a non-review answer)
		wantInMsg   string
	}{
		{name: "empty body", path: validateKCP, contentType: "application/json",
			wantStatus: http.StatusOK, wantCode: http.StatusBadRequest, wantMsg: "request body is empty"},
		{name: "wrong content type", path: validateKCP, contentType: "application/x-www-form-urlencoded",
			body:       review("KubeadmControlPlane", admissionv1.Update, kcpJSON("v1.34.2", nil), kcpJSON("v1.33.5", nil)),
			wantStatus: http.StatusOK, wantCode: http.StatusBadRequest, wantMsg: "contentType=application/x-www-form-urlencoded, expected application/json"},
		{name: "malformed JSON", path: validateMD, contentType: "application/json", body: []byte(`{"request":{"operation":"UPDATE",`),
			wantStatus: http.StatusOK, wantCode: http.StatusBadRequest, wantMsg: "couldn't get version/kind; json parse error: unexpected end of JSON input"},
		{name: "8 MiB body", path: validateKCP, contentType: "application/json", body: oversized,
			wantStatus: http.StatusOK, wantCode: http.StatusRequestEntityTooLarge, wantMsg: "request entity is too large; limit is 7340032 bytes"},
		{name: "wrong kind", path: validateKCP, contentType: "application/json",
			body:       review("MachineDeployment", admissionv1.Update, mdJSON("v1.34.2"), mdJSON("v1.36.0")),
			wantStatus: http.StatusOK, wantCode: http.StatusBadRequest, wantMsg: "rollout-guard could not decode the MachineDeployment " + w.Namespace + "/" + w.KCP.Name + " in request.object: unable to decode cluster.x-k8s.io/v1beta2, Kind=MachineDeployment into *v1beta2.KubeadmControlPlane"},
		{name: "unknown operation to the stamper", path: mutateKCP, contentType: "application/json",
			body:       review("KubeadmControlPlane", "PATCH", kcpJSON("v1.34.2", nil), kcpJSON("v1.35.0", nil)),
			wantStatus: http.StatusOK, wantCode: http.StatusBadRequest, wantMsg: fmt.Sprintf(`rollout-guard cannot stamp KubeadmControlPlane %s/c1-control-plane: operation "PATCH" is not CREATE or UPDATE`, w.Namespace)},
		{name: "a minor skip posted directly is judged like one through the API server", path: validateKCP, contentType: "application/json",
			body:       review("KubeadmControlPlane", admissionv1.Update, kcpJSON("v1.34.2", nil), kcpJSON("v1.36.0", nil)),
			wantStatus: http.StatusOK, wantCode: http.StatusUnprocessableEntity,
			wantMsg: `KubeadmControlPlane.controlplane.cluster.x-k8s.io "c1-control-plane" is invalid: spec.version: Forbidden: KubeadmControlPlane c1-control-plane: upgrade from v1.34.2 to v1.36.0 skips v1.35; kubeadm upgrades one minor at a time [rule ControlPlaneMinorSkip]; set spec.version to a v1.35.x release first and wait until every control-plane machine runs it, then upgrade to v1.36`},
		{name: "an override from a user outside the groups, posted directly", path: validateKCP, contentType: "application/json",
			body:       override,
			wantStatus: http.StatusOK, wantCode: http.StatusUnprocessableEntity,
			wantInMsg: "metadata.annotations[rollout-guard.io/override]: Forbidden: override not honoured: user alice is not in an override group (platform-admins)"},
		{name: "unknown path", path: "/validate-v1-secret", contentType: "application/json",
			body:       review("KubeadmControlPlane", admissionv1.Update, kcpJSON("v1.34.2", nil), kcpJSON("v1.34.1", nil)),
			wantStatus: http.StatusNotFound, wantMsg: "404 page not found\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req, err := http.NewRequest(method, env.GuardURL()+tc.path, bytes.NewReader(tc.body))
			require.NoError(t, err)
			if tc.body == nil {
				req.Body = http.NoBody
			}
			req.Header.Set("Content-Type", tc.contentType)
			resp, err := httpClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.wantStatus, resp.StatusCode, "%s", body)
			if tc.wantStatus != http.StatusOK {
				assert.Equal(t, tc.wantMsg, string(body))
				return
			}
			var answer admissionv1.AdmissionReview
			require.NoError(t, json.Unmarshal(body, &answer), "%s", body)
			require.NotNil(t, answer.Response, "%s", body)
			require.Equal(t, tc.wantAllowed, answer.Response.Allowed, "%s", body)
			require.NotNil(t, answer.Response.Result)
			assert.Equal(t, tc.wantCode, answer.Response.Result.Code)
			if tc.wantMsg != "" {
				assert.Equal(t, tc.wantMsg, answer.Response.Result.Message)
			}
			if tc.wantInMsg != "" {
				assert.Contains(t, answer.Response.Result.Message, tc.wantInMsg)
			}
		})
	}

	// Still ready, still judging.
	resp, err := http.Get(env.GuardReadyzURL())
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	err = edit(t, mergePatch, w.KCP, "v1.36.0", kcpVersion...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "[rule ControlPlaneMinorSkip]")
	assert.True(t, apierrors.IsInvalid(err), "%v", err)
}

// machineDeploymentEditor is a namespace editor of the bad-input tests: it
// may create and read MachineDeployments, and nothing of RolloutRevisions.
const machineDeploymentEditor = "bad-input-editor"

// grantMachineDeploymentEditor gives machineDeploymentEditor its Role in
// namespace, waits until the API server authorizes by it, and returns a
// client that impersonates it. It checks that the editor may not create
// RolloutRevisions there, so may not restore history.
func grantMachineDeploymentEditor(t *testing.T, namespace string) client.Client {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: machineDeploymentEditor},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"machinedeployments"},
			Verbs: []string{"get", "list", "watch", "create"}}},
	}))
	require.NoError(t, env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: machineDeploymentEditor},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: machineDeploymentEditor},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: machineDeploymentEditor}},
	}))
	allowed := func(group, resource string) bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: machineDeploymentEditor, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "create", Group: group, Resource: resource},
		}}
		require.NoError(t, env.Client.Create(ctx, sar))
		return sar.Status.Allowed
	}
	require.Eventually(t, func() bool { return allowed(clusterv1.GroupVersion.Group, "machinedeployments") },
		30*time.Second, 100*time.Millisecond, "the editor's RoleBinding never took effect")
	require.False(t, allowed(rgv1alpha1.GroupVersion.Group, rgv1alpha1.Resource.Resource), "the editor may create rolloutrevisions")
	editor, _ := warningClient(t, machineDeploymentEditor)
	return editor
}
