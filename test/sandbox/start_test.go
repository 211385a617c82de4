package sandbox_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// overrideGroup may use the guard's break-glass override in this package's
// sandbox: with it, a test sends an edit the guard would refuse too, so the
// only refusal left, and the message asserted, is Cluster API's (the API
// server reports the first webhook to answer).
const overrideGroup = "sandbox-test-overriders"

// TestSandboxRunsClusterAPIAsAManagementCluster starts the one sandbox of
// this package, with the ClusterClass-based demo cluster, and checks what
// a management cluster installed by clusterctl does: both demo clusters
// become ready, the ClusterClass is reconciled and names the topology's
// objects, and Cluster API's own defaulting and validating webhooks answer.
func TestSandboxRunsClusterAPIAsAManagementCluster(t *testing.T) {
	logFile, err := os.CreateTemp("", "rollout-guard-sandbox-*.log")
	require.NoError(t, err)
	t.Cleanup(func() { _ = logFile.Close() })
	t.Logf("sandbox logs (controllers, guard): %s", logFile.Name())
	sandbox.LogTo(logFile)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sb, err := sandbox.Start(ctx, sandbox.Options{
		Environment: framework.Options{
			Log:       logFile,
			GuardArgs: []string{"--override-groups=" + overrideGroup},
			// As make run starts it (test/cmd/sandbox).
			GuardClientAuth: true,
		},
		ControlPlaneMachines: 1,
		WorkerMachines:       1,
		ClassCluster:         true,
	})
	require.NoError(t, err, "starting the sandbox")
	children := framework.ChildProcesses()
	t.Cleanup(func() {
		assert.NoError(t, sb.Stop())
		assert.Empty(t, framework.Survivors(children, 10*time.Second), "processes left running after Stop")
	})
	t.Logf("sandbox with demo and demo-cc ready after %s (environment after %s)",
		sb.ReadyAfter.Round(100*time.Millisecond), sb.EnvironmentReadyAfter.Round(100*time.Millisecond))

	require.Len(t, sb.Clusters, 1)
	require.Len(t, sb.ClassClusters, 1)
	demo, cc := sb.Clusters[0], sb.ClassClusters[0]
	ns := demo.Namespace
	assert.Equal(t, "demo", demo.Name)
	assert.Equal(t, "demo-cc", cc.Name)
	assert.Equal(t, "demo-cc-control-plane", cc.ControlPlaneName())
	assert.Equal(t, "demo-cc-md-0", cc.MachineDeploymentName())

	t.Run("both clusters ready", func(t *testing.T) {
		state := sb.RequireClusterReady(t, ns, demo.Name, time.Minute)
		assert.Nil(t, state.Topology)
		assert.Equal(t, "v1.35.2", state.ControlPlane.Version)

		state = sb.RequireClusterReady(t, ns, cc.Name, time.Minute)
		require.NotNil(t, state.Topology)
		assert.True(t, state.Topology.Reconciled)
		assert.Equal(t, "demo-class", state.Topology.Class)
		assert.Equal(t, "demo-cc-control-plane", state.ControlPlane.Name)
		assert.Equal(t, sandbox.DefaultClassKubernetesVersion, state.ControlPlane.Version)
		require.Len(t, state.Workers, 1)
		assert.Equal(t, "demo-cc-md-0", state.Workers[0].Name)
		assert.Equal(t, sandbox.DefaultClassKubernetesVersion, state.Workers[0].Version)
		assert.Equal(t, 2, state.ReadyMachines)

		md := &clusterv1.MachineDeployment{}
		require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cc.MachineDeploymentName()}, md))
		assert.Contains(t, md.Labels, clusterv1.ClusterTopologyOwnedLabel)
		assert.Equal(t, "md-0", md.Labels[clusterv1.ClusterTopologyMachineDeploymentNameLabel])
		// Cluster API's MachineDeployment defaulting filled what the topology leaves out.
		assert.Equal(t, clusterv1.RollingUpdateMachineDeploymentStrategyType, md.Spec.Rollout.Strategy.Type)
	})

	t.Run("ClusterClass reconciled", func(t *testing.T) {
		class := &clusterv1.ClusterClass{}
		require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sandbox.DefaultClassName}, class))
		assert.True(t, sandbox.ClassReconciled(class), "conditions: %v", class.Status.Conditions)
		assert.Equal(t, sandbox.ClassKubernetesVersions, class.Spec.KubernetesVersions)
		var variables []string
		for _, v := range class.Status.Variables {
			variables = append(variables, v.Name)
		}
		assert.Equal(t, []string{sandbox.PortVariable}, variables)
	})

	t.Run("Cluster API's MachineDeployment webhooks", func(t *testing.T) {
		md := workerPool(demo, "demo-md-webhook")
		// Defaulting: the rollout strategy left out is filled in.
		defaulted := md.DeepCopy()
		require.NoError(t, sb.Client.Create(ctx, defaulted, client.DryRunAll))
		assert.Equal(t, clusterv1.RollingUpdateMachineDeploymentStrategyType, defaulted.Spec.Rollout.Strategy.Type)
		assert.Equal(t, ptr.To(intstr.FromInt32(1)), defaulted.Spec.Rollout.Strategy.RollingUpdate.MaxSurge)

		// Validation: a rollout that can neither add nor remove a machine.
		md.Spec.Rollout.Strategy.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
		md.Spec.Rollout.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		err := sb.Client.Create(ctx, md, client.DryRunAll)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `admission webhook "validation.machinedeployment.cluster.x-k8s.io" denied the request`)
		assert.Contains(t, err.Error(), "spec.rollout.strategy.rollingUpdate: Invalid value: \"0\": maxUnavailable and maxSurge cannot both be 0")
	})

	t.Run("Cluster API's Cluster webhook", func(t *testing.T) {
		oncall := framework.UserClient(t, sb, "oncall", overrideGroup)
		setVersion := func(c client.Client, name, version string, annotations map[string]string, opts ...client.PatchOption) error {
			anns := map[string]any{revisions.AnnotationOverride: "the guard lets it through: Cluster API's own check is under test"}
			for k, v := range annotations {
				anns[k] = v
			}
			patch, err := json.Marshal(map[string]any{
				"metadata": map[string]any{"annotations": anns},
				"spec":     map[string]any{"topology": map[string]any{"version": version}},
			})
			require.NoError(t, err)
			cluster := builder.Cluster(ns, name).Build()
			return c.Patch(ctx, cluster, client.RawPatch(types.MergePatchType, patch), opts...)
		}

		// A topology version decrease, without Cluster API's annotation.
		err = setVersion(oncall, cc.Name, "v1.32.4", nil, client.DryRunAll)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `admission webhook "validation.cluster.cluster.x-k8s.io" denied the request`)
		assert.Contains(t, err.Error(), `spec.topology.version: Invalid value: "v1.32.4": version cannot be decreased from "1.33.5" to "1.32.4"`)
		// With it, Cluster API skips its version checks.
		assert.NoError(t, setVersion(oncall, cc.Name, "v1.32.4",
			map[string]string{clusterv1.ClusterTopologyUnsafeUpdateVersionAnnotation: ""}, client.DryRunAll))

		// A version the class does not list.
		err = setVersion(oncall, cc.Name, "v1.34.0", nil, client.DryRunAll)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `spec.topology.version: Invalid value: "v1.34.0": version must match one of the versions defined in the ClusterClass`)

		// Two minors at once: a chained upgrade on a class that lists every
		// minor in between, refused ("+2 minors") on a class without a list.
		assert.NoError(t, setVersion(oncall, cc.Name, "v1.35.2", nil, client.DryRunAll))
		plain, err := sb.CreatePlainClassCluster(ctx, ns, "demo-plain", sandbox.DefaultClassKubernetesVersion)
		require.NoError(t, err)
		assert.Equal(t, sandbox.PlainClassName, plain.Class.Name)
		class := &clusterv1.ClusterClass{}
		require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sandbox.PlainClassName}, class))
		assert.Empty(t, class.Spec.KubernetesVersions)
		err = setVersion(oncall, plain.Name, "v1.35.2", nil, client.DryRunAll)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `spec.topology.version: Invalid value: "v1.35.2": version cannot be increased from "1.33.5" to "1.35.2"`)
	})

	t.Run("the guard accepts only the API server's client certificate", func(t *testing.T) {
		// The API server's calls reach it: Start waited for a stamped
		// dry-run create, and the edits above were judged by it too.
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(sb.Env.GuardCABundle()))
		post := func(certs []tls.Certificate) (*http.Response, error) {
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
				TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: certs, MinVersion: tls.VersionTLS13},
				DisableKeepAlives: true,
			}}
			return hc.Post(sb.Env.GuardURL()+"/validate-cluster-x-k8s-io-v1beta2-machinedeployment", "application/json", http.NoBody)
		}
		resp, err := post(nil)
		require.Error(t, err, "a request without a client certificate was answered")
		assert.Nil(t, resp)
		assert.Contains(t, err.Error(), "remote error: tls: certificate required")

		require.NotNil(t, sb.Env.GuardClientCertificate())
		resp, err = post([]tls.Certificate{*sb.Env.GuardClientCertificate()})
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	})

	t.Run("Cluster API's KubeadmControlPlane webhook", func(t *testing.T) {
		// Even control planes are refused with stacked etcd.
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))
		kcp := &metav1.PartialObjectMetadata{}
		kcp.SetGroupVersionKind(controlplanev1.GroupVersion.WithKind("KubeadmControlPlane"))
		kcp.SetNamespace(ns)
		kcp.SetName(demo.ControlPlaneName())
		err := sb.Client.Patch(ctx, kcp, patch, client.DryRunAll)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `admission webhook "validation.kubeadmcontrolplane.controlplane.cluster.x-k8s.io" denied the request`)
		assert.True(t, strings.Contains(err.Error(), "cannot be an even number when etcd is stacked"), err.Error())
	})
}

// workerPool returns a MachineDeployment of demo's cluster at its version,
// valid for the guard, with no rollout strategy.
func workerPool(demo sandbox.ClusterSpec, name string) *clusterv1.MachineDeployment {
	return builder.MachineDeployment(demo.Namespace, name).WithClusterName(demo.Name).WithReplicas(0).
		WithSelector(map[string]string{clusterv1.ClusterNameLabel: demo.Name, "pool": name}).
		WithVersion(demo.KubernetesVersion).WithBootstrapDataSecret(name).
		WithInfrastructureTemplate(demo.MachineDeploymentName()).Build()
}
