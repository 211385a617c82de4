package sandbox_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"slices"
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
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
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
// this package, with a fleet of three ClusterClass-based demo clusters, and
// checks what a management cluster installed by clusterctl does: the demo
// clusters become ready, the ClusterClass is reconciled and names the
// topology's objects, Cluster API's own defaulting and validating webhooks
// answer, and a class variable changed on one cluster of the fleet rolls
// that cluster's workers only.
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
		// A fleet on one class; each class cluster has one control-plane
		// and one worker machine, so the two extra ones add little to the
		// start.
		ClassClusters: 3,
	})
	require.NoError(t, err, "starting the sandbox")
	children := framework.ChildProcesses()
	t.Cleanup(func() {
		assert.NoError(t, sb.Stop())
		assert.Empty(t, framework.Survivors(children, 10*time.Second), "processes left running after Stop")
	})
	t.Logf("sandbox with demo and demo-cc, demo-cc-2, demo-cc-3 ready after %s (environment after %s)",
		sb.ReadyAfter.Round(100*time.Millisecond), sb.EnvironmentReadyAfter.Round(100*time.Millisecond))

	require.Len(t, sb.Clusters, 1)
	require.Len(t, sb.ClassClusters, 3)
	demo, cc := sb.Clusters[0], sb.ClassClusters[0]
	// The fleet Start made; subtests add class clusters of their own.
	fleet := slices.Clone(sb.ClassClusters)
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
		assert.Equal(t, []string{sandbox.PortVariable, sandbox.WorkerImageVariable}, variables)
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

	t.Run("a fleet of three class clusters on one class", func(t *testing.T) {
		ports := map[int32]string{}
		for i, spec := range fleet {
			assert.Equal(t, sandbox.ClassClusterName(i), spec.Name)
			state := sb.RequireClusterReady(t, ns, spec.Name, time.Minute)
			require.NotNil(t, state.Topology)
			assert.Equal(t, sandbox.DefaultClassName, state.Topology.Class)
			assert.Equal(t, 2, state.ReadyMachines)
			// Each workload cluster listens on a port of its own.
			assert.NotContains(t, ports, spec.Port, "%s shares its port with %s", spec.Name, ports[spec.Port])
			ports[spec.Port] = spec.Name
			// A Cluster that leaves the worker image out gets the default.
			assert.Equal(t, `"`+sandbox.DefaultWorkerImage+`"`, topologyVariable(t, sb, ns, spec.Name, sandbox.WorkerImageVariable))
		}
		assert.Equal(t, []string{"demo-cc", "demo-cc-2", "demo-cc-3"},
			[]string{fleet[0].Name, fleet[1].Name, fleet[2].Name})
		assert.Len(t, fleet, 3)
	})

	t.Run("a new worker image rolls one class cluster's workers only", func(t *testing.T) {
		target := fleet[1]
		before := map[string]fleetMember{}
		for _, spec := range fleet {
			before[spec.Name] = readFleetMember(t, sb, spec)
			require.Len(t, before[spec.Name].workers, int(spec.WorkerMachines), spec.Name)
		}

		cluster := &clusterv1.Cluster{}
		require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: target.Name}, cluster))
		edited := cluster.DeepCopy()
		for i, v := range edited.Spec.Topology.Variables {
			if v.Name == sandbox.WorkerImageVariable {
				edited.Spec.Topology.Variables[i].Value.Raw = []byte(`"sandbox-worker:v2"`)
			}
		}
		require.NoError(t, sb.Client.Patch(ctx, edited, client.MergeFrom(cluster)))

		// The topology controller rotates the worker template, and the
		// MachineDeployment replaces every worker machine with one of the
		// new template.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			now := readFleetMemberC(c, sb, target)
			if !assert.NotEqual(c, before[target.Name].workerTemplate, now.workerTemplate, "worker template not rotated yet") {
				return
			}
			assert.Len(c, now.workers, int(target.WorkerMachines))
			for _, name := range now.workers {
				assert.NotContains(c, before[target.Name].workers, name, "old worker machine still there")
			}
			assert.Equal(c, "sandbox-worker:v2", now.workerImages[now.workerTemplate], "new template's worker image")
		}, 3*time.Minute, time.Second)
		sb.RequireClusterReady(t, ns, target.Name, 3*time.Minute)

		after := readFleetMember(t, sb, target)
		assert.Equal(t, before[target.Name].controlPlane, after.controlPlane, "the control plane's machines stay")
		for _, name := range after.workers {
			assert.Equal(t, "sandbox-worker:v2", after.devMachineImages[name], "DevMachine of Machine %s", name)
		}
		// The other clusters of the fleet keep their machines and templates.
		for _, spec := range fleet {
			if spec.Name == target.Name {
				continue
			}
			now := readFleetMember(t, sb, spec)
			assert.Equal(t, before[spec.Name].workerTemplate, now.workerTemplate, spec.Name)
			assert.Equal(t, before[spec.Name].workers, now.workers, spec.Name)
			assert.Equal(t, before[spec.Name].controlPlane, now.controlPlane, spec.Name)
		}
	})

	t.Run("rollout status clusterclass/demo-class follows the fleet's rollout", func(t *testing.T) {
		// One rollout of the whole fleet: a new workerImage on every
		// cluster of the class replaces each one's worker machines.
		before := map[string]fleetMember{}
		for _, spec := range fleet {
			before[spec.Name] = readFleetMember(t, sb, spec)
			require.Len(t, before[spec.Name].workers, int(spec.WorkerMachines), spec.Name)
		}
		canary := fleet[len(fleet)-1]
		labelled := &clusterv1.Cluster{}
		require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: canary.Name}, labelled))
		patch := client.MergeFrom(labelled.DeepCopy())
		labelled.Labels = map[string]string{"wave": "canary"}
		require.NoError(t, sb.Client.Patch(ctx, labelled, patch))

		const image = "sandbox-worker:v3"
		edited := time.Now()
		for _, spec := range fleet {
			cluster := &clusterv1.Cluster{}
			require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: spec.Name}, cluster))
			next := cluster.DeepCopy()
			for i, v := range next.Spec.Topology.Variables {
				if v.Name == sandbox.WorkerImageVariable {
					next.Spec.Topology.Variables[i].Value.Raw = []byte(`"` + image + `"`)
				}
			}
			require.NoError(t, sb.Client.Patch(ctx, next, client.MergeFrom(cluster)))
		}

		// Right after the edit, one read: not rolled out yet.
		once := sb.RunCLI(t.TempDir(), ns, "status", "clusterclass/"+sandbox.DefaultClassName, "--watch=false")
		t.Logf("status --watch=false right after the edit (exit %d):\n%s%s", once.Code, once.Stdout, once.Stderr)
		assert.Equal(t, 9, once.Code, "stderr: %s", once.Stderr)
		assert.Contains(t, once.Stderr, "clusterclass/"+sandbox.DefaultClassName+" is not rolled out: 3 clusters:")

		// The class's fleet, and the canary alone by its label, watched
		// to the end.
		class := sb.StartCLI(t.TempDir(), ns, "status", "clusterclass/"+sandbox.DefaultClassName, "--timeout", "4m")
		wave := sb.StartCLI(t.TempDir(), ns, "status", "cluster", "-l", "wave=canary", "--timeout", "4m")
		var classRun, waveRun sandbox.CLIRun
		for _, r := range []struct {
			cli *sandbox.CLI
			out *sandbox.CLIRun
		}{{class, &classRun}, {wave, &waveRun}} {
			select {
			case *r.out = <-r.cli.Done():
			case <-time.After(5 * time.Minute):
				t.Fatalf("status did not end:\n%s%s", r.cli.Stdout.String(), r.cli.Stderr.String())
			}
		}
		// What the fleet is when status ends: each cluster's workers were
		// replaced by machines of the new image, its control plane kept.
		after := map[string]fleetMember{}
		for _, spec := range fleet {
			after[spec.Name] = readFleetMember(t, sb, spec)
		}
		t.Logf("status clusterclass/%s (exit %d, %s after the edit, ran %s):\n%s%s", sandbox.DefaultClassName, classRun.Code,
			time.Since(edited).Round(100*time.Millisecond), classRun.Took.Round(100*time.Millisecond), classRun.Stdout, classRun.Stderr)
		t.Logf("status cluster -l wave=canary (exit %d, ran %s):\n%s%s", waveRun.Code, waveRun.Took.Round(100*time.Millisecond), waveRun.Stdout, waveRun.Stderr)
		require.Equal(t, 0, classRun.Code, "stderr: %s", classRun.Stderr)
		for _, spec := range fleet {
			b, a := before[spec.Name], after[spec.Name]
			assert.Len(t, a.workers, int(spec.WorkerMachines), spec.Name)
			for _, name := range a.workers {
				assert.NotContains(t, b.workers, name, "%s: worker machine %s was there before the edit", spec.Name, name)
				assert.Equal(t, image, a.devMachineImages[name], "%s: DevMachine of Machine %s", spec.Name, name)
			}
			assert.Equal(t, b.controlPlane, a.controlPlane, "%s: the control plane's machines stay", spec.Name)
			assert.Contains(t, classRun.Stdout, spec.Name+": up to date\n")
		}
		assert.Contains(t, classRun.Stdout, "clusterclass/"+sandbox.DefaultClassName+": 3 clusters: 3 up to date\nup to date (3)\n  demo-cc\n  demo-cc-2\n  demo-cc-3\n"+
			"clusterclass/"+sandbox.DefaultClassName+": 3 clusters successfully rolled out\n")

		// The selector's fleet is the canary alone.
		require.Equal(t, 0, waveRun.Code, "stderr: %s", waveRun.Stderr)
		assert.Contains(t, waveRun.Stdout, "cluster -l wave=canary: 1 cluster: 1 up to date\nup to date (1)\n  "+canary.Name+"\n")
		for _, spec := range fleet[:len(fleet)-1] {
			assert.NotContains(t, waveRun.Stdout, spec.Name+":", "a cluster without the label")
		}

		// The class's fleet as JSON, once: one object per cluster, then the totals.
		js := sb.RunCLI(t.TempDir(), ns, "status", "cc/"+sandbox.DefaultClassName, "--watch=false", "-o", "json")
		require.Equal(t, 0, js.Code, "stderr: %s", js.Stderr)
		lines := strings.Split(strings.TrimSpace(js.Stdout), "\n")
		require.Len(t, lines, 4, js.Stdout)
		for i, spec := range fleet {
			assert.Contains(t, lines[i], `"cluster":{"namespace":"`+ns+`","name":"`+spec.Name+`"},"clusterClass":"`+ns+`/`+sandbox.DefaultClassName+`","state":"UpToDate","final":true`)
		}
		assert.Contains(t, lines[3], `"kind":"FleetRolloutStatus"`)
		assert.Contains(t, lines[3], `"clusters":3,"refused":0,"stalled":0,"paused":0,"rolling":0,"upToDate":3,"done":true`)
		t.Logf("status cc/%s --watch=false -o json (exit %d):\n%s", sandbox.DefaultClassName, js.Code, js.Stdout)
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

// fleetMember is what the worker-image rollout changes, or must not, of one
// ClusterClass-based cluster.
type fleetMember struct {
	// controlPlane and workers are the names of its Machines, sorted.
	controlPlane, workers []string
	// workerTemplate is its MachineDeployment's DevMachineTemplate.
	workerTemplate string
	// workerImages is the worker image annotation of workerTemplate's
	// machine metadata, by template name.
	workerImages map[string]string
	// devMachineImages is the worker image annotation of each worker
	// Machine's DevMachine, by Machine name.
	devMachineImages map[string]string
}

// readFleetMember reads spec's machines and worker template, failing t on
// an error.
func readFleetMember(t *testing.T, sb *sandbox.Sandbox, spec sandbox.ClassClusterSpec) fleetMember {
	t.Helper()
	member, err := fleetMemberOf(sb, spec)
	require.NoError(t, err)
	return member
}

// readFleetMemberC is readFleetMember inside EventuallyWithT.
func readFleetMemberC(c *assert.CollectT, sb *sandbox.Sandbox, spec sandbox.ClassClusterSpec) fleetMember {
	member, err := fleetMemberOf(sb, spec)
	assert.NoError(c, err)
	return member
}

// fleetMemberOf reads what fleetMember holds of spec from the API server.
func fleetMemberOf(sb *sandbox.Sandbox, spec sandbox.ClassClusterSpec) (fleetMember, error) {
	ctx := context.Background()
	member := fleetMember{workerImages: map[string]string{}, devMachineImages: map[string]string{}}
	md := &clusterv1.MachineDeployment{}
	if err := sb.Client.Get(ctx, client.ObjectKey{Namespace: spec.Namespace, Name: spec.MachineDeploymentName()}, md); err != nil {
		return member, err
	}
	member.workerTemplate = md.Spec.Template.Spec.InfrastructureRef.Name
	tmpl := &infrav1.DevMachineTemplate{}
	if err := sb.Client.Get(ctx, client.ObjectKey{Namespace: spec.Namespace, Name: member.workerTemplate}, tmpl); err != nil {
		return member, err
	}
	member.workerImages[tmpl.Name] = tmpl.Spec.Template.ObjectMeta.Annotations[sandbox.WorkerImageAnnotation]
	machines := &clusterv1.MachineList{}
	if err := sb.Client.List(ctx, machines, client.InNamespace(spec.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: spec.Name}); err != nil {
		return member, err
	}
	for _, m := range machines.Items {
		if _, ok := m.Labels[clusterv1.MachineControlPlaneLabel]; ok {
			member.controlPlane = append(member.controlPlane, m.Name)
			continue
		}
		member.workers = append(member.workers, m.Name)
		dev := &infrav1.DevMachine{}
		if err := sb.Client.Get(ctx, client.ObjectKey{Namespace: spec.Namespace, Name: m.Spec.InfrastructureRef.Name}, dev); err == nil {
			member.devMachineImages[m.Name] = dev.Annotations[sandbox.WorkerImageAnnotation]
		}
	}
	slices.Sort(member.controlPlane)
	slices.Sort(member.workers)
	return member, nil
}

// topologyVariable returns the raw value of variable name of Cluster
// namespace/name's topology, "" if it is not set.
func topologyVariable(t *testing.T, sb *sandbox.Sandbox, namespace, name, variable string) string {
	t.Helper()
	cluster := &clusterv1.Cluster{}
	require.NoError(t, sb.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, cluster))
	for _, v := range cluster.Spec.Topology.Variables {
		if v.Name == variable {
			return string(v.Value.Raw)
		}
	}
	return ""
}
