package topology

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// sideCluster is the paused cluster TestUndoIsAdmittedByClusterAPI builds
// beside the demo clusters: no controller acts on it, so its objects keep
// what the test writes, and its control plane never has a Machine.
const sideCluster = "undo-side"

// cloudConfigOnly is a kubeadmConfigSpec that holds nothing but defaults
// written out (the canonical form of a revision drops every one of them):
// format cloud-config and kubeadm's image pull policy, as a control plane
// with nothing else to configure may be written.
func cloudConfigOnly() bootstrapv1.KubeadmConfigSpec {
	return bootstrapv1.KubeadmConfigSpec{
		Format:            bootstrapv1.CloudConfig,
		InitConfiguration: bootstrapv1.InitConfiguration{NodeRegistration: bootstrapv1.NodeRegistrationOptions{ImagePullPolicy: corev1.PullIfNotPresent}},
		JoinConfiguration: bootstrapv1.JoinConfiguration{NodeRegistration: bootstrapv1.NodeRegistrationOptions{ImagePullPolicy: corev1.PullIfNotPresent}},
	}
}

// TestUndoIsAdmittedByClusterAPI: every `rollout undo` the guard admits is
// admitted by the API server, Cluster API's webhooks included, for each kind
// with revisions: a KubeadmControlPlane whose kubeadmConfigSpec is only
// defaults written out (format: cloud-config, imagePullPolicy:
// IfNotPresent) taken back a template switch and a version bump (a paused
// control plane that never had a Machine), keeping those defaults; a
// MachineDeployment's and a MachinePool's template switch; an in-place
// change of the ClusterClass and of a Cluster's topology. Before, the
// rollback patch took away the fields the canonical form drops, and Cluster
// API refused the control plane's: "spec.kubeadmConfigSpec: Forbidden:
// cannot be modified".
func TestUndoIsAdmittedByClusterAPI(t *testing.T) {
	ctx := context.Background()
	ns := cc.Namespace
	side := sandbox.ClusterSpec{Namespace: ns, Name: sideCluster, ControlPlaneMachines: 1, WorkerMachines: 1,
		KubernetesVersion: demo.KubernetesVersion, MachineStartup: demo.MachineStartup, Port: demo.Port}
	cp := side.ControlPlaneName()
	mpName := sideCluster + "-mp-0"
	var created []client.Object
	for _, obj := range sandbox.ClusterObjects(side) {
		switch o := obj.(type) {
		case *controlplanev1.KubeadmControlPlane:
			o.Spec.KubeadmConfigSpec = cloudConfigOnly()
		case *clusterv1.Cluster:
			// Paused before anything acts on it: the DevCluster, the control
			// plane and the pools wait for their Cluster.
			o.Spec.Paused = ptr.To(true)
		}
		require.NoError(t, sb.Client.Create(ctx, obj), "%T %s", obj, obj.GetName())
		created = append(created, obj)
	}
	// The pool is never reconciled (its Cluster is paused): its references
	// only need to exist, as undo checks the ones it goes back to.
	for _, name := range []string{mpName, mpName + "-v2"} {
		pool := builder.DevMachinePool(ns, name).Build()
		require.NoError(t, sb.Client.Create(ctx, pool))
		created = append(created, pool)
	}
	mp := builder.MachinePool(ns, mpName).WithClusterName(sideCluster).WithReplicas(1).WithVersion(side.KubernetesVersion).
		WithBootstrapTemplate(side.MachineDeploymentName()).WithInfrastructureRef("DevMachinePool", mpName).Build()
	require.NoError(t, sb.Client.Create(ctx, mp))
	created = append(created, mp)
	t.Cleanup(func() {
		// The Cluster is paused: nothing of it runs, nothing waits on it.
		for i := len(created) - 1; i >= 0; i-- {
			if err := sb.Client.Delete(context.Background(), created[i]); err != nil && !apierrors.IsNotFound(err) {
				t.Logf("deleting %T %s: %v", created[i], created[i].GetName(), err)
			}
		}
	})

	// undo runs `rollout undo RESOURCE` and requires it to succeed: the
	// guard and Cluster API's webhooks both admitted the rollback.
	undo := func(t *testing.T, resource string) string {
		t.Helper()
		run := sb.RunCLI(t.TempDir(), ns, "undo", resource)
		require.Equal(t, 0, run.Code, "rollout undo %s\nstdout: %s\nstderr: %s", resource, run.Stdout, run.Stderr)
		assert.NotContains(t, run.Stderr, "Forbidden")
		return run.Stderr
	}
	getKCP := func(t *testing.T) *controlplanev1.KubeadmControlPlane {
		t.Helper()
		k := &controlplanev1.KubeadmControlPlane{}
		require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cp}, k))
		return k
	}
	requireDefaultsKept := func(t *testing.T, k *controlplanev1.KubeadmControlPlane) {
		t.Helper()
		assert.Equal(t, cloudConfigOnly(), k.Spec.KubeadmConfigSpec, "the defaults written out are kept")
	}

	t.Run("KubeadmControlPlane template-only", func(t *testing.T) {
		mustKubectl(t, "patch", "kcp", cp, "--type", "merge", "-p",
			fmt.Sprintf(`{"spec":{"machineTemplate":{"spec":{"infrastructureRef":{"name":%q}}}}}`, side.SpareControlPlaneTemplate()))
		undo(t, "kcp/"+cp)
		k := getKCP(t)
		assert.Equal(t, cp, k.Spec.MachineTemplate.Spec.InfrastructureRef.Name, "back to the previous template")
		assert.Equal(t, side.KubernetesVersion, k.Spec.Version)
		requireDefaultsKept(t, k)
	})

	t.Run("KubeadmControlPlane version-only", func(t *testing.T) {
		bumped := nextMinor(t, side.KubernetesVersion)
		mustKubectl(t, "patch", "kcp", cp, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"version":%q}}`, bumped))
		stderr := undo(t, "kcp/"+cp)
		assert.Contains(t, stderr, fmt.Sprintf("spec.version goes back from %s to %s", bumped, side.KubernetesVersion), "the guard admitted a revert")
		k := getKCP(t)
		assert.Equal(t, side.KubernetesVersion, k.Spec.Version)
		assert.Equal(t, cp, k.Spec.MachineTemplate.Spec.InfrastructureRef.Name)
		requireDefaultsKept(t, k)
	})

	t.Run("MachineDeployment template", func(t *testing.T) {
		md := side.MachineDeploymentName()
		mustKubectl(t, "patch", "md", md, "--type", "merge", "-p",
			fmt.Sprintf(`{"spec":{"template":{"spec":{"infrastructureRef":{"name":%q}}}}}`, side.SpareWorkerTemplate()))
		undo(t, "md/"+md)
		got := &clusterv1.MachineDeployment{}
		require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: md}, got))
		assert.Equal(t, md, got.Spec.Template.Spec.InfrastructureRef.Name)
	})

	t.Run("MachinePool template", func(t *testing.T) {
		mustKubectl(t, "patch", "machinepool", mpName, "--type", "merge", "-p",
			fmt.Sprintf(`{"spec":{"template":{"spec":{"infrastructureRef":{"name":%q}}}}}`, mpName+"-v2"))
		undo(t, "machinepool/"+mpName)
		got := &clusterv1.MachinePool{}
		require.NoError(t, sb.Client.Get(ctx, client.ObjectKeyFromObject(mp), got))
		assert.Equal(t, mpName, got.Spec.Template.Spec.InfrastructureRef.Name)
	})

	// The class and the topology: changes carried out in place (metadata
	// the topology controller passes on), so no machine is replaced.
	t.Run("ClusterClass", func(t *testing.T) {
		mustKubectl(t, "patch", "clusterclass", sandbox.DefaultClassName, "--type", "merge", "-p",
			`{"spec":{"controlPlane":{"metadata":{"labels":{"rollback-test.example.com/class":"x"}}}}}`)
		undo(t, "clusterclass/"+sandbox.DefaultClassName)
		got := &clusterv1.ClusterClass{}
		require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sandbox.DefaultClassName}, got))
		assert.NotContains(t, got.Spec.ControlPlane.Metadata.Labels, "rollback-test.example.com/class")
	})

	t.Run("Cluster topology", func(t *testing.T) {
		mustKubectl(t, "patch", "cluster", cc.Name, "--type", "merge", "-p",
			`{"spec":{"topology":{"controlPlane":{"metadata":{"labels":{"rollback-test.example.com/topology":"x"}}}}}}`)
		undo(t, "cluster/"+cc.Name)
		got := &clusterv1.Cluster{}
		require.NoError(t, sb.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cc.Name}, got))
		assert.NotContains(t, got.Spec.Topology.ControlPlane.Metadata.Labels, "rollback-test.example.com/topology")
	})

	requireAllAt(t, cc.Name, startVersion)
}

// TestRevertOfATopologyBumpAcrossAnEtcdMinor: a topology version bump that
// never reached the control plane — the Cluster paused, so its
// KubeadmControlPlane's spec and Machines keep the old version — is judged
// by what the control plane holds, not by the topology's old value: taken
// back with Cluster API's bypass annotation, though the bump went two minors
// up through the class's list and across etcd's minor (3.5 to 3.6), and
// nothing rolls once the Cluster is resumed. (TestRevertOfATopologyBump
// then shows the revert refused once a control-plane Machine has the bump.)
func TestRevertOfATopologyBumpAcrossAnEtcdMinor(t *testing.T) {
	requireAllAt(t, cc.Name, startVersion)
	machines := allMachines(t, cc.Name)
	bumped := nextMinor(t, nextMinor(t, startVersion))
	setBypass(t, cc.Name, true)
	defer setBypass(t, cc.Name, false)
	setPaused(t, cc.Name, true)
	resumed := false
	defer func() {
		if !resumed {
			setPaused(t, cc.Name, false)
		}
	}()

	mustKubectl(t, "patch", "cluster", cc.Name, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"topology":{"version":%q}}}`, bumped))
	assert.Equal(t, startVersion, kcp(t, cc.ControlPlaneName()).Spec.Version, "paused, the topology controller did not pass the bump on")
	stdout, stderr, err := patchTopologyVersion(cc.Name, startVersion)
	require.NoError(t, err, "the revert of a bump the control plane never had is allowed\nstdout: %s\nstderr: %s", stdout, stderr)
	assert.Contains(t, stderr, fmt.Sprintf("Warning: Cluster %s: spec.topology.version goes back from %s to %s; allowed as a revert only because no control-plane machine was created with %s or runs it",
		cc.Name, bumped, startVersion, bumped))

	setPaused(t, cc.Name, false)
	resumed = true
	requireAllAt(t, cc.Name, startVersion)
	assert.Equal(t, machines, allMachines(t, cc.Name), "nothing rolled")
}

// nextMinor returns the release of ClassKubernetesVersions after version.
func nextMinor(t *testing.T, version string) string {
	t.Helper()
	i := slices.Index(sandbox.ClassKubernetesVersions, version)
	require.True(t, i >= 0 && i+1 < len(sandbox.ClassKubernetesVersions), "no release after %s in %v", version, sandbox.ClassKubernetesVersions)
	return sandbox.ClassKubernetesVersions[i+1]
}
