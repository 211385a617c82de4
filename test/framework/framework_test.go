package framework_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/rollout-guard/rollout-guard/arming"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// env is the package's one environment, with the stand-in guard running.
var env *framework.Environment

// TestMain starts one environment for the package. When the test binary is
// invoked as "webhook" (through the symlink in the stand-in bin directory)
// it is the stand-in guard instead.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "webhook" {
		os.Exit(standInGuard(os.Args[1:]))
	}
	if binDir := os.Getenv(orphanedEnvironmentBinDir); binDir != "" {
		os.Exit(orphanedEnvironment(binDir))
	}
	os.Exit(runTests(m))
}

// orphanedEnvironmentBinDir, set in the environment of this test binary,
// makes it start an environment from that bin directory, print the pid and
// command line of each of its children, then "ready", and wait to be
// killed (TestControlPlaneStoppedWhenItsProcessIsKilled).
const orphanedEnvironmentBinDir = "FRAMEWORK_TEST_ORPHANED_ENVIRONMENT_BIN_DIR"

// orphanedEnvironment is the test binary run with orphanedEnvironmentBinDir.
func orphanedEnvironment(binDir string) int {
	env, err := framework.Start(context.Background(), framework.Options{BinDir: binDir, Log: io.Discard})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the environment:", err)
		return 1
	}
	// Never stopped: the test kills this process.
	fmt.Printf("workdir %s\n", env.WorkDir)
	for pid, cmdline := range framework.ChildProcesses() {
		fmt.Printf("%d %s\n", pid, cmdline)
	}
	fmt.Println("ready")
	select {}
}

func runTests(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.ConsoleEncoder()))
	binDir, cleanup, err := standInBinDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	begin := time.Now()
	env, err = framework.Start(ctx, framework.Options{BinDir: binDir, StartGuard: true, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the environment:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "environment started in %s\n", time.Since(begin).Round(time.Millisecond))
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the environment:", err)
		return 1
	}
	return code
}

// standInBinDir makes a bin directory with the repository's etcd,
// kube-apiserver and kubectl, and this test binary as webhook.
func standInBinDir() (string, func(), error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", nil, fmt.Errorf("finding the working directory: %w", err)
	}
	root, err := framework.FindRepoRoot(wd)
	if err != nil {
		return "", nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("finding the test binary: %w", err)
	}
	dir, err := os.MkdirTemp("", "rollout-guard-standin-bin-")
	if err != nil {
		return "", nil, fmt.Errorf("creating the stand-in bin directory: %w", err)
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	links := map[string]string{"webhook": self}
	for _, name := range []string{"etcd", "kube-apiserver", "kubectl"} {
		links[name] = filepath.Join(root, "bin", name)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			cleanup()
			return "", nil, fmt.Errorf("linking %s: %w", name, err)
		}
	}
	return dir, cleanup, nil
}

// standInGuard is a stand-in for bin/webhook with the same flags: a
// controller-runtime webhook server that admits every request, with
// /readyz on the health probe address.
func standInGuard(args []string) int {
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig")
	host := fs.String("webhook-host", "", "webhook server address")
	port := fs.Int("webhook-port", 9443, "webhook server port")
	certDir := fs.String("cert-dir", "", "directory of tls.crt and tls.key")
	probeAddr := fs.String("health-probe-bind-address", ":8081", "health probe address")
	metricsAddr := fs.String("metrics-bind-address", "0", "metrics address")
	fs.Bool("leader-elect", false, "ignored")
	armNamespace := fs.String("arm-namespace", "", "namespace of the RoleBinding that arms the webhooks")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctrl.SetLogger(zap.New(zap.ConsoleEncoder()))
	log := ctrl.Log.WithName("stand-in-guard")
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Error(err, "loading the kubeconfig")
		return 1
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 clientgoscheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *probeAddr,
		WebhookServer:          webhook.NewServer(webhook.Options{Host: *host, Port: *port, CertDir: *certDir}),
	})
	if err != nil {
		log.Error(err, "creating the manager")
		return 1
	}
	mgr.GetWebhookServer().Register("/", &admission.Webhook{
		Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
			log.Info("admitting", "operation", req.Operation, "kind", req.Kind.Kind, "name", req.Name, "user", req.UserInfo.Username)
			return admission.Allowed("stand-in guard")
		}),
	})
	// Like the guard's stamper, it stamps a new MachineDeployment: the
	// environment knows the API server reached the guard by that stamp,
	// since creates fail open.
	mgr.GetWebhookServer().Register("/mutate-cluster-x-k8s-io-v1beta2-machinedeployment", &admission.Webhook{
		Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
			log.Info("stamping", "operation", req.Operation, "kind", req.Kind.Kind, "name", req.Name, "user", req.UserInfo.Username)
			return admission.Patched("stand-in guard", jsonpatch.JsonPatchOperation{
				Operation: "add", Path: "/metadata/annotations", Value: map[string]string{"rollout-guard.io/revision": "1"},
			})
		}),
	})
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		log.Error(err, "adding the health check")
		return 1
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		log.Error(err, "adding the readiness check")
		return 1
	}
	// As the guard does: the webhooks are called only once it has armed them.
	armer := &arming.Armer{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: *armNamespace,
		Ready: []healthz.Checker{mgr.GetWebhookServer().StartedChecker()}, Log: log.WithName("arming")}
	if err := mgr.Add(armer); err != nil {
		log.Error(err, "adding the arming")
		return 1
	}
	if err := mgr.AddReadyzCheck("armed", armer.Checker); err != nil {
		log.Error(err, "adding the armed check")
		return 1
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		return 1
	}
	return 0
}

func TestClusterAPICRDsServedInBothVersions(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	require.NoError(t, err)
	want := map[string][]string{
		"cluster.x-k8s.io":              {"clusters", "machinedeployments", "machinesets", "machines", "machinepools", "clusterclasses", "machinehealthchecks"},
		"controlplane.cluster.x-k8s.io": {"kubeadmcontrolplanes", "kubeadmcontrolplanetemplates"},
		"bootstrap.cluster.x-k8s.io":    {"kubeadmconfigs", "kubeadmconfigtemplates"},
	}
	for group, resources := range want {
		for _, version := range []string{"v1beta1", "v1beta2"} {
			list, err := dc.ServerResourcesForGroupVersion(group + "/" + version)
			require.NoError(t, err, "%s/%s", group, version)
			served := map[string]bool{}
			for _, r := range list.APIResources {
				served[r.Name] = true
			}
			for _, r := range resources {
				assert.True(t, served[r], "%s/%s serves %s", group, version, r)
			}
		}
	}

	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, env.Client.Get(t.Context(), client.ObjectKey{Name: "machinedeployments.cluster.x-k8s.io"}, &crd))
	assert.Equal(t, "v1beta2", crd.Labels[framework.ContractLabel])
	require.NotNil(t, crd.Spec.Conversion)
	assert.Equal(t, apiextensionsv1.WebhookConverter, crd.Spec.Conversion.Strategy)
	require.NotNil(t, crd.Spec.Conversion.Webhook.ClientConfig.URL)
	assert.True(t, strings.HasPrefix(*crd.Spec.Conversion.Webhook.ClientConfig.URL, "https://127.0.0.1:"))
}

// TestStartStopsEverythingWhenTheGuardFails runs before the conversion test,
// which so also shows that the environment still answers Cluster API's
// API-version lookups after a second one has come and gone.
func TestStartStopsEverythingWhenTheGuardFails(t *testing.T) {
	before := childProcesses(t)
	// As system:masters, so this start also takes the GuardAsAdmin path.
	_, err := framework.Start(t.Context(), framework.Options{
		BinDir: env.BinDir, StartGuard: true, GuardAsAdmin: true, GuardArgs: []string{"--no-such-flag"}, Log: os.Stderr, WorkDir: t.TempDir(),
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the guard exited before it was ready")
	assert.Contains(t, err.Error(), "flag provided but not defined: -no-such-flag", "the error ends with the guard's log")
	assert.Equal(t, before, childProcesses(t), "no etcd, kube-apiserver or guard left running")
}

// TestControlPlaneStoppedWhenItsProcessIsKilled: etcd and kube-apiserver
// do not outlive a process that started an environment and was killed
// before it could stop it (a sandbox killed with SIGKILL, a test binary
// that timed out): a watchdog stops them and removes their files.
func TestControlPlaneStoppedWhenItsProcessIsKilled(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), orphanedEnvironmentBinDir+"="+env.BinDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	children := map[int]string{}
	var dirs []string
	ready := make(chan error, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if lines.Text() == "ready" {
				ready <- nil
				return
			}
			if dir, ok := strings.CutPrefix(lines.Text(), "workdir "); ok {
				dirs = append(dirs, dir)
				continue
			}
			pid, cmdline, _ := strings.Cut(lines.Text(), " ")
			if n, err := strconv.Atoi(pid); err == nil {
				children[n] = cmdline
			}
		}
		ready <- fmt.Errorf("the process ended before its environment was ready: %v", lines.Err())
	}()
	select {
	case err := <-ready:
		require.NoError(t, err, "stderr:\n%s", stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("no environment within 2 minutes; stderr:\n%s", stderr.String())
	}
	var controlPlane []string
	for _, cmdline := range children {
		for _, bin := range []string{"etcd", "kube-apiserver"} {
			if strings.HasPrefix(cmdline, filepath.Join(env.BinDir, bin)+" ") {
				controlPlane = append(controlPlane, bin)
			}
		}
		for _, arg := range strings.Fields(cmdline) {
			for _, flag := range []string{"--data-dir=", "--cert-dir="} {
				if dir, ok := strings.CutPrefix(arg, flag); ok {
					dirs = append(dirs, dir)
				}
			}
		}
	}
	require.Len(t, dirs, 3, "the work directory, etcd's data directory and kube-apiserver's certificates")
	sort.Strings(controlPlane)
	require.Equal(t, []string{"etcd", "kube-apiserver"}, controlPlane, "the killed process's children: %v", children)

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Empty(t, framework.Survivors(children, 45*time.Second), "processes left running 45 s after their parent was killed")
	for _, dir := range dirs {
		_, err := os.Stat(dir)
		assert.True(t, os.IsNotExist(err), "%s left behind (%v)", dir, err)
	}
}

// childProcesses lists the names of this process's child processes.
func childProcesses(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var names []string
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		comm := string(stat[strings.IndexByte(string(stat), '(')+1 : strings.LastIndexByte(string(stat), ')')])
		names = append(names, comm)
	}
	sort.Strings(names)
	return names
}

func TestV1Beta1MachineDeploymentReadsBackAsV1Beta2(t *testing.T) {
	ctx := t.Context()
	createInfrastructureTemplateCRD(t)

	rolloutAfter := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	md := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta1",
		"kind":       "MachineDeployment",
		"metadata":   map[string]any{"name": "conversion", "namespace": "default"},
		"spec": map[string]any{
			"clusterName":     "conversion",
			"replicas":        int64(2),
			"minReadySeconds": int64(17),
			"paused":          true,
			"rolloutAfter":    rolloutAfter.UTC().Format(time.RFC3339),
			"strategy": map[string]any{
				"type":          "RollingUpdate",
				"rollingUpdate": map[string]any{"maxSurge": int64(2), "maxUnavailable": int64(1), "deletePolicy": "Oldest"},
			},
			"selector": map[string]any{"matchLabels": map[string]any{"app": "conversion"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "conversion"}},
				"spec": map[string]any{
					"clusterName": "conversion",
					"version":     "v1.35.2",
					"bootstrap": map[string]any{"configRef": map[string]any{
						"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfigTemplate", "name": "conversion-bootstrap",
					}},
					"infrastructureRef": map[string]any{
						"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "TestMachineTemplate", "name": "conversion-infra",
					},
				},
			},
		},
	}}
	require.NoError(t, env.Client.Create(ctx, md))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), md) })

	var got clusterv1.MachineDeployment
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "conversion"}, &got))
	assert.True(t, got.Spec.Rollout.After.Equal(&rolloutAfter), "rolloutAfter → rollout.after: %v", got.Spec.Rollout.After)
	assert.Equal(t, clusterv1.RollingUpdateMachineDeploymentStrategyType, got.Spec.Rollout.Strategy.Type)
	assert.Equal(t, ptr.To(intstr.FromInt32(2)), got.Spec.Rollout.Strategy.RollingUpdate.MaxSurge)
	assert.Equal(t, ptr.To(intstr.FromInt32(1)), got.Spec.Rollout.Strategy.RollingUpdate.MaxUnavailable)
	assert.Equal(t, clusterv1.OldestMachineSetDeletionOrder, got.Spec.Deletion.Order, "strategy.rollingUpdate.deletePolicy → deletion.order")
	assert.Equal(t, ptr.To[int32](17), got.Spec.Template.Spec.MinReadySeconds, "minReadySeconds moves into the template")
	assert.Equal(t, ptr.To(true), got.Spec.Paused)
	assert.Equal(t, clusterv1.ContractVersionedObjectReference{
		APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TestMachineTemplate", Name: "conversion-infra",
	}, got.Spec.Template.Spec.InfrastructureRef, "apiVersion → apiGroup")
	assert.Equal(t, clusterv1.ContractVersionedObjectReference{
		APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfigTemplate", Name: "conversion-bootstrap",
	}, got.Spec.Template.Spec.Bootstrap.ConfigRef)

	// Change it through v1beta2 and read it through v1beta1: the references
	// get their apiVersion back from the CRDs' contract labels.
	got.Spec.Template.Spec.Version = "v1.36.0"
	require.NoError(t, env.Client.Update(ctx, &got))
	var old clusterv1beta1.MachineDeployment
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "conversion"}, &old))
	assert.Equal(t, ptr.To("v1.36.0"), old.Spec.Template.Spec.Version)
	assert.Equal(t, "infrastructure.cluster.x-k8s.io/v1beta1", old.Spec.Template.Spec.InfrastructureRef.APIVersion)
	require.NotNil(t, old.Spec.Template.Spec.Bootstrap.ConfigRef)
	assert.Equal(t, "bootstrap.cluster.x-k8s.io/v1beta2", old.Spec.Template.Spec.Bootstrap.ConfigRef.APIVersion)
	require.NotNil(t, old.Spec.RolloutAfter)
	assert.True(t, old.Spec.RolloutAfter.Equal(&rolloutAfter))
	assert.Equal(t, ptr.To[int32](17), old.Spec.MinReadySeconds)
}

// TestConversionsReadCRDsThroughTheCache: the API server asks for a
// conversion of every Cluster API object it writes, and each conversion
// looks up the contract label of the referenced kinds' CRDs. Those
// lookups go through the environment's cache, as in Cluster API's own
// managers: writes read no CRD from the API server (each read is a quorum
// read of a CRD of up to a megabyte, which the benchmarks would count
// against every configuration alike).
func TestConversionsReadCRDsThroughTheCache(t *testing.T) {
	ctx := t.Context()
	createInfrastructureTemplateCRD(t)
	md := machineDeployment("crd-reads", "v1.35.2")
	require.NoError(t, env.Client.Create(ctx, md))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), md) })

	counts := func() (crdGets, conversions float64) {
		samples, err := framework.APIServerMetrics(ctx, env.Config)
		require.NoError(t, err)
		crdGets = framework.SumBy(samples, "apiserver_request_total",
			map[string]string{"resource": "customresourcedefinitions", "verb": "GET"})[""]
		conversions = framework.SumBy(samples, "apiserver_crd_conversion_webhook_duration_seconds_count",
			map[string]string{"crd_name": "machinedeployments.cluster.x-k8s.io"})[""]
		return crdGets, conversions
	}
	gets0, conv0 := counts()
	const writes = 10
	for i := range writes {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"write":"w%d"}}}`, i)
		require.NoError(t, env.Client.Patch(ctx, md, client.RawPatch(types.MergePatchType, []byte(patch))))
	}
	// Without conversions there would be nothing to read: make sure the
	// writes asked for them. Some are made for watchers, after the write
	// returns: wait until all are counted.
	var gets, conv float64
	assert.Eventually(t, func() bool {
		gets, conv = counts()
		return conv-conv0 >= writes
	}, 10*time.Second, 100*time.Millisecond)
	require.GreaterOrEqual(t, conv-conv0, float64(writes), "conversions of the MachineDeployment during %d writes", writes)
	assert.Zero(t, gets-gets0, "CRDs read from the API server during %d writes of a MachineDeployment", writes)
}

// createInfrastructureTemplateCRD installs a minimal infrastructure template
// kind that declares the v1beta2 contract in API version v1beta1.
func createInfrastructureTemplateCRD(t *testing.T) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "testmachinetemplates.infrastructure.cluster.x-k8s.io",
			Labels: map[string]string{framework.ContractLabel: "v1beta1"},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "infrastructure.cluster.x-k8s.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: "TestMachineTemplate", ListKind: "TestMachineTemplateList", Plural: "testmachinetemplates", Singular: "testmachinetemplate",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1beta1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
	err := env.Client.Create(t.Context(), crd)
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

func TestGuardStopAndRestart(t *testing.T) {
	ctx := t.Context()
	firstURL := env.GuardURL()
	require.NotEmpty(t, firstURL)
	t.Cleanup(func() {
		if env.GuardURL() == "" {
			require.NoError(t, env.StartGuard(context.Background()))
		}
	})

	// Every MachineDeployment create reaches the guard (its mutating webhook
	// stamps new objects): make one while the guard runs.
	unpoliced := machineDeployment("unpoliced", "")
	require.NoError(t, env.Client.Create(ctx, unpoliced))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), unpoliced) })

	require.NoError(t, env.StopGuard())
	require.NoError(t, env.StopGuard(), "stopping a stopped guard is a no-op")
	assert.Empty(t, env.GuardURL())

	// The registration stays: a policed update fails closed, one its match
	// conditions leave out (a label, as Cluster API's controllers set)
	// still goes through, and a create fails open, unstamped.
	whileDown := machineDeployment("while-down", "v1.36.0")
	require.NoError(t, env.Client.Create(ctx, whileDown), "creates fail open while the guard is down")
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), whileDown) })
	assert.Empty(t, whileDown.Annotations["rollout-guard.io/revision"], "nothing stamped the create")
	err := env.Client.Patch(ctx, whileDown, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"template":{"spec":{"version":"v1.36.1"}}}}`)))
	require.Error(t, err, "a version update while the guard is down")
	assert.Contains(t, err.Error(), "failed calling webhook")
	unpoliced.Labels = map[string]string{"example.com/touched": "while-the-guard-is-down"}
	require.NoError(t, env.Client.Update(ctx, unpoliced))

	require.NoError(t, env.StartGuard(ctx))
	secondURL := env.GuardURL()
	require.NotEmpty(t, secondURL)

	// Every webhook of the registration points at the new guard, trusts
	// envtest's CA, and keeps what the manifest says.
	want, err := framework.LocalWebhookConfigurations(env.GuardManifests(), secondURL, nil)
	require.NoError(t, err)
	for _, obj := range want {
		wantCfg, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration)
		if !ok {
			continue
		}
		var gotCfg admissionregistrationv1.ValidatingWebhookConfiguration
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(wantCfg), &gotCfg))
		require.Len(t, gotCfg.Webhooks, len(wantCfg.Webhooks))
		for i, w := range wantCfg.Webhooks {
			g := gotCfg.Webhooks[i]
			assert.Equal(t, w.Name, g.Name)
			assert.Equal(t, *w.ClientConfig.URL, *g.ClientConfig.URL)
			assert.NotEmpty(t, g.ClientConfig.CABundle)
			assert.Equal(t, w.MatchConditions, g.MatchConditions)
			assert.Equal(t, w.Rules, g.Rules)
			assert.Equal(t, w.FailurePolicy, g.FailurePolicy)
			assert.Equal(t, w.MatchPolicy, g.MatchPolicy)
		}
	}

	created := machineDeployment("after-restart", "v1.36.0")
	require.NoError(t, env.Client.Create(ctx, created), "the stand-in admits everything")
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), created) })
	assert.Contains(t, env.GuardLogTail(), "admitting")
}

// TestGuardIdentityAndCertificates: the guard runs as its ServiceAccount,
// with the rights of config/rbac alone, and serves from a cert directory of
// its own whose CA the webhook configurations trust.
func TestGuardIdentityAndCertificates(t *testing.T) {
	ctx := t.Context()
	cfg := env.GuardConfig()
	require.NotNil(t, cfg)
	guard, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	review := &authenticationv1.SelfSubjectReview{}
	require.NoError(t, guard.Create(ctx, review))
	assert.Equal(t, framework.GuardServiceAccount, review.Status.UserInfo.Username)
	assert.ElementsMatch(t, framework.GuardGroups(), review.Status.UserInfo.Groups)
	err = guard.List(ctx, &corev1.SecretList{})
	assert.True(t, apierrors.IsForbidden(err), "the guard may not list Secrets: %v", err)
	var sa corev1.ServiceAccount
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: framework.GuardNamespace, Name: framework.GuardServiceAccountName}, &sa))

	dir := env.GuardCertDir()
	require.NotEmpty(t, dir)
	for _, name := range []string{"tls.crt", "tls.key"} {
		_, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
	}
	var cfgs admissionregistrationv1.ValidatingWebhookConfigurationList
	require.NoError(t, env.Client.List(ctx, &cfgs))
	found := false
	for _, c := range cfgs.Items {
		for _, w := range c.Webhooks {
			if strings.HasSuffix(w.Name, ".rollout-guard.io") {
				found = true
				assert.Equal(t, env.GuardCABundle(), w.ClientConfig.CABundle, "webhook %s", w.Name)
			}
		}
	}
	assert.True(t, found)
}

func TestClientAsImpersonates(t *testing.T) {
	c, err := env.ClientAs("alice@example.com", "platform-team", "system:masters")
	require.NoError(t, err)
	review := &authenticationv1.SelfSubjectReview{}
	require.NoError(t, c.Create(t.Context(), review))
	assert.Equal(t, "alice@example.com", review.Status.UserInfo.Username)
	assert.Contains(t, review.Status.UserInfo.Groups, "platform-team")
}

func TestStartFailsCleanlyWithoutBinaries(t *testing.T) {
	_, err := framework.Start(t.Context(), framework.Options{BinDir: t.TempDir(), Log: os.Stderr})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "etcd is missing")
}

// machineDeployment is a valid v1beta2 MachineDeployment in namespace
// default, with template version version ("" for none).
func machineDeployment(name, version string) *clusterv1.MachineDeployment {
	return builder.MachineDeployment("default", name).WithClusterName(name).WithReplicas(1).
		WithSelector(map[string]string{"app": name}).WithVersion(version).
		WithBootstrapDataSecret(name).WithInfrastructureRef("TestMachineTemplate", name).Build()
}
