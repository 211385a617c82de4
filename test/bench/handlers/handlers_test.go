package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	capiadmission "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/admission"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/webhooks"
)

// validateKCPPath is where both Cluster API and the guard serve the
// validating webhook of KubeadmControlPlanes.
const validateKCPPath = "/validate-controlplane-cluster-x-k8s-io-v1beta2-kubeadmcontrolplane"

const (
	namespace   = "bench"
	clusterName = "c1"
	kcpName     = "c1-control-plane"
)

var (
	env *framework.Environment
	// guardMux and capiMux serve the webhooks of the guard and of Cluster
	// API; floorMux a validator that judges nothing.
	guardMux, capiMux, floorMux http.Handler
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logFile, err := os.CreateTemp("", "rollout-guard-bench-handlers-*.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating the log file:", err)
		return 1
	}
	defer logFile.Close()
	ctrl.SetLogger(logr.Discard())
	env, err = framework.Start(ctx, framework.Options{Log: logFile})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the API server:", err)
		return 1
	}
	code := func() int {
		if err := setup(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	cancel()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the API server:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// newManager returns a manager that is never started as a whole (its webhook
// server would need certificates and a port); only what each side needs of
// it runs.
func newManager(opts ctrl.Options) (ctrl.Manager, error) {
	opts.Scheme = env.Scheme
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	opts.WebhookServer = webhook.NewServer(webhook.Options{})
	return ctrl.NewManager(env.Config, opts)
}

// setup creates the cluster the guard judges against, and the two muxes.
func setup(ctx context.Context) error {
	if err := createCluster(ctx, env.Client); err != nil {
		return err
	}

	// The guard: its webhooks, its cache options, its cache filled from the API server.
	guardMgr, err := newManager(ctrl.Options{Cache: webhooks.CacheOptions(nil), Client: webhooks.ClientOptions()})
	if err != nil {
		return fmt.Errorf("creating the guard's manager: %w", err)
	}
	recorder := &history.Recorder{Client: guardMgr.GetClient(), Reader: guardMgr.GetAPIReader()}
	if err := webhooks.SetupWithManager(ctx, guardMgr, webhooks.Options{Recorder: recorder}); err != nil {
		return fmt.Errorf("setting up the guard's webhooks: %w", err)
	}
	go func() {
		if err := guardMgr.GetCache().Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "the guard's cache stopped:", err)
		}
	}()
	if !guardMgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("the guard's cache did not sync")
	}
	guardMux = guardMgr.GetWebhookServer().WebhookMux()

	// Cluster API's KubeadmControlPlane webhooks, as its controller manager registers them.
	capiMgr, err := newManager(ctrl.Options{})
	if err != nil {
		return fmt.Errorf("creating Cluster API's manager: %w", err)
	}
	if err := (&capiadmission.KubeadmControlPlane{}).SetupWebhookWithManager(capiMgr); err != nil {
		return fmt.Errorf("setting up Cluster API's KubeadmControlPlane webhooks: %w", err)
	}
	capiMux = capiMgr.GetWebhookServer().WebhookMux()

	// The floor: a typed validator that judges nothing, registered the same way.
	floorMgr, err := newManager(ctrl.Options{})
	if err != nil {
		return fmt.Errorf("creating the floor's manager: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(floorMgr, &controlplanev1.KubeadmControlPlane{}).WithValidator(noopValidator{}).Complete(); err != nil {
		return fmt.Errorf("registering the no-op validator: %w", err)
	}
	floorMux = floorMgr.GetWebhookServer().WebhookMux()
	return nil
}

// noopValidator allows everything: what any typed controller-runtime
// validating webhook pays before it judges anything (HTTP, decoding the
// AdmissionReview and both objects, encoding the answer).
type noopValidator struct{}

func (noopValidator) ValidateCreate(context.Context, *controlplanev1.KubeadmControlPlane) (admission.Warnings, error) {
	return nil, nil
}

func (noopValidator) ValidateUpdate(context.Context, *controlplanev1.KubeadmControlPlane, *controlplanev1.KubeadmControlPlane) (admission.Warnings, error) {
	return nil, nil
}

func (noopValidator) ValidateDelete(context.Context, *controlplanev1.KubeadmControlPlane) (admission.Warnings, error) {
	return nil, nil
}

// createCluster creates a Cluster, its KubeadmControlPlane and three worker
// pools with one Machine each, one pool a minor behind.
func createCluster(ctx context.Context, c client.Client) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		builder.Cluster(namespace, clusterName).WithControlPlane(kcpName).WithInfrastructure(clusterName).Build(),
		kubeadmControlPlane("v1.34.2"),
	}
	for i, v := range []string{"v1.34.2", "v1.34.2", "v1.33.5"} {
		name := fmt.Sprintf("%s-md-%d", clusterName, i)
		md := builder.MachineDeployment(namespace, name).WithClusterName(clusterName).WithReplicas(1).
			WithSelector(map[string]string{"pool": name}).WithVersion(v).
			WithBootstrapTemplate(name).WithInfrastructureTemplate(name).Build()
		m := builder.Machine(namespace, name+"-m").WithLabels(map[string]string{clusterv1.ClusterNameLabel: clusterName}).
			WithClusterName(clusterName).WithVersion(v).WithBootstrapDataSecret("bootstrap").WithInfrastructureRef("DevMachine", name+"-m").Build()
		objs = append(objs, md, m)
	}
	for _, obj := range objs {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// kubeadmControlPlane returns the KubeadmControlPlane of the cluster at
// version, with the kubeadmConfigSpec of the product's handler benchmark
// (webhooks.BenchmarkKubeadmControlPlaneHandler): 8 API server flags, 8
// kubelet flags, 8 files of 20 lines, 8 commands.
func kubeadmControlPlane(version string) *controlplanev1.KubeadmControlPlane {
	// Its machines run v1.34.2 whatever the spec says: an update changes the spec only.
	k := builder.KubeadmControlPlane(namespace, kcpName).WithClusterName(clusterName).WithReplicas(3).WithVersion(version).
		WithInfrastructureTemplate(kcpName).WithStatusVersion("v1.34.2", 3).Build()
	k.TypeMeta = metav1.TypeMeta{APIVersion: controlplanev1.GroupVersion.String(), Kind: "KubeadmControlPlane"}
	cfg := &k.Spec.KubeadmConfigSpec
	for i := range 8 {
		cfg.ClusterConfiguration.APIServer.ExtraArgs = append(cfg.ClusterConfiguration.APIServer.ExtraArgs, bootstrapv1.Arg{Name: fmt.Sprintf("flag-%d", i), Value: ptr.To(fmt.Sprintf("value-%d", i))})
		cfg.InitConfiguration.NodeRegistration.KubeletExtraArgs = append(cfg.InitConfiguration.NodeRegistration.KubeletExtraArgs, bootstrapv1.Arg{Name: fmt.Sprintf("kubelet-flag-%d", i), Value: ptr.To("x")})
		cfg.Files = append(cfg.Files, bootstrapv1.File{Path: fmt.Sprintf("/etc/kubernetes/extra-%d.yaml", i), Content: strings.Repeat("key: value\n", 20), Permissions: "0600"})
		cfg.PreKubeadmCommands = append(cfg.PreKubeadmCommands, fmt.Sprintf("echo step %d", i))
	}
	return k
}

// reviewBody is the AdmissionReview the API server sends for an update of
// the KubeadmControlPlane from one version to another.
func reviewBody(tb testing.TB, from, to string) []byte {
	tb.Helper()
	raw := func(obj runtime.Object) runtime.RawExtension {
		b, err := json.Marshal(obj)
		if err != nil {
			tb.Fatalf("encoding: %v", err)
		}
		return runtime.RawExtension{Raw: b}
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "bench",
			Kind:      metav1.GroupVersionKind{Group: controlplanev1.GroupVersion.Group, Version: "v1beta2", Kind: "KubeadmControlPlane"},
			Resource:  metav1.GroupVersionResource{Group: controlplanev1.GroupVersion.Group, Version: "v1beta2", Resource: "kubeadmcontrolplanes"},
			Namespace: namespace,
			Name:      kcpName,
			Operation: admissionv1.Update,
			UserInfo:  authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}},
			Object:    raw(kubeadmControlPlane(to)),
			OldObject: raw(kubeadmControlPlane(from)),
		},
	}
	b, err := json.Marshal(review)
	if err != nil {
		tb.Fatalf("encoding the AdmissionReview: %v", err)
	}
	return b
}

// processCPU returns the user and system CPU time this process has used.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serve sends one AdmissionReview to mux and returns its response.
func serve(tb testing.TB, mux http.Handler, body []byte) *admissionv1.AdmissionResponse {
	req := httptest.NewRequest(http.MethodPost, validateKCPPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("HTTP %d: %s", rec.Code, rec.Body.String())
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		tb.Fatalf("decoding the AdmissionReview response %q: %v", rec.Body.String(), err)
	}
	return out.Response
}

// TestBothWebhooksJudge proves each mux reaches its own webhook: the guard
// refuses a control-plane downgrade that Cluster API's webhook lets through
// (the gap the guard exists for), and both allow the minor upgrade the
// benchmark measures.
func TestBothWebhooksJudge(t *testing.T) {
	cases := []struct {
		name            string
		from, to        string
		guardOK, capiOK bool
		guardRefusal    string
	}{
		{name: "minor upgrade", from: "v1.34.2", to: "v1.35.0", guardOK: true, capiOK: true},
		{name: "downgrade", from: "v1.34.2", to: "v1.33.5", guardOK: false, capiOK: true, guardRefusal: "[rule ControlPlaneDowngrade]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := reviewBody(t, tc.from, tc.to)
			guard, capi := serve(t, guardMux, body), serve(t, capiMux, body)
			if guard.Allowed != tc.guardOK {
				t.Errorf("guard: allowed %v, want %v (%v)", guard.Allowed, tc.guardOK, guard.Result)
			}
			if capi.Allowed != tc.capiOK {
				t.Errorf("Cluster API: allowed %v, want %v (%v)", capi.Allowed, tc.capiOK, capi.Result)
			}
			if tc.guardRefusal != "" && (guard.Result == nil || !strings.Contains(guard.Result.Message, tc.guardRefusal)) {
				t.Errorf("guard's refusal %v does not name %q", guard.Result, tc.guardRefusal)
			}
		})
	}
}

// BenchmarkKubeadmControlPlaneUpdate measures one validating admission of a
// KubeadmControlPlane minor upgrade (v1.34.2 to v1.35.0), from the HTTP
// request to the encoded response: sub-benchmark guard is rollout-guard
// (decode, read the cluster's workers from its cache, history from the
// stamps, policy), clusterapi is Cluster API v1.14.2's own webhook, noop a
// validator that judges nothing (the floor both pay).
func BenchmarkKubeadmControlPlaneUpdate(b *testing.B) {
	body := reviewBody(b, "v1.34.2", "v1.35.0")
	for _, side := range []struct {
		name string
		mux  *http.Handler
	}{{"guard", &guardMux}, {"clusterapi", &capiMux}, {"noop", &floorMux}} {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			start := processCPU(b)
			for b.Loop() {
				if resp := serve(b, *side.mux, body); !resp.Allowed {
					b.Fatalf("refused: %v", resp.Result)
				}
			}
			// On a shared machine wall time per operation swings with the
			// load; the CPU time the process spent (garbage collection
			// included) does not, so it is reported beside ns/op.
			b.ReportMetric(float64((processCPU(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
