package rollout

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// devMachineTemplate is an infrastructure machine template in demo.
func devMachineTemplate(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{}}}}}
	u.SetAPIVersion("infrastructure.cluster.x-k8s.io/v1beta2")
	u.SetKind("DevMachineTemplate")
	u.SetNamespace(topoNS)
	u.SetName(name)
	return u
}

// TestSwitch: rollout KIND/NAME --template/--version writes the template
// reference and the version where the kind has them, with the
// change-cause; a change to what is live already sends nothing; a client
// dry run prints the difference; a paused object takes the change, with a
// warning.
func TestSwitch(t *testing.T) {
	cl := withServedKinds(t, gitOpsWorld(t, nil), devMachineTemplate("md-v2"), devMachineTemplate("cp-v2"))
	out, errOut, code := runFake(t, cl, gitOpsNow, "md/c1-md-0", "--template", "devmachinetemplate/md-v2", "--dry-run=client")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, `MachineDeployment demo/c1-md-0: would roll out (dry run: nothing sent)
FIELD               LIVE     AFTER
infrastructureRef   <none>   DevMachineTemplate/md-v2   (rolls out)
machinedeployment.cluster.x-k8s.io/c1-md-0 rolling out (dry run): infrastructureRef (none) → DevMachineTemplate/md-v2
`, out)

	md := gitOpsMD()
	getObj(t, cl, md)
	md.Spec.Paused = ptr.To(true)
	require.NoError(t, cl.Update(context.Background(), md))
	out, errOut, code = runFake(t, cl, gitOpsNow, "md/c1-md-0", "--template", "devmachinetemplate/md-v2")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 rolling out: infrastructureRef (none) → DevMachineTemplate/md-v2\n", out)
	assert.Equal(t, "Warning: MachineDeployment demo/c1-md-0 is paused (spec.paused is true): the change is stored now and rolls out when it is resumed\n", errOut)
	getObj(t, cl, md)
	assert.Equal(t, clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: "md-v2"}, md.Spec.Template.Spec.InfrastructureRef)
	assert.Equal(t, "rollout md/c1-md-0 --template devmachinetemplate/md-v2", md.Annotations["rollout-guard.io/change-cause"])

	out, errOut, code = runFake(t, cl, gitOpsNow, "md/c1-md-0", "--template", "devmachinetemplate/md-v2", "--version", "v1.34.2")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 unchanged: it already uses these templates and version\n", out)

	out, errOut, code = runFake(t, cl, gitOpsNow, "kcp/c1-control-plane", "--template", "devmachinetemplate/cp-v2", "--version", "v1.34.3", "-o", "name")
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/c1-control-plane\n", out)
	kcp := &controlplanev1.KubeadmControlPlane{}
	kcp.Namespace, kcp.Name = topoNS, "c1-control-plane"
	getObj(t, cl, kcp)
	assert.Equal(t, "v1.34.3", kcp.Spec.Version)
	assert.Equal(t, "cp-v2", kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name)
}

// TestSwitchRefused: a template that does not exist or is of the wrong
// kind, a version the guard's policy refuses, and an object a Cluster's
// topology manages are refused, naming the way out, and nothing is sent.
func TestSwitchRefused(t *testing.T) {
	cl := withServedKinds(t, gitOpsWorld(t, nil), devMachineTemplate("md-v2"))
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{args: []string{"md/c1-md-0", "--template", "devmachinetemplate/nope"}, code: core.ExitError, want: `error: --template devmachinetemplate/nope: DevMachineTemplate "nope" not found in namespace "demo": create it first (an object references templates in its own namespace)` + "\n"},
		{args: []string{"md/c1-md-0", "--template", "kcp/c1-control-plane"}, code: core.ExitError, want: "error: --template kcp/c1-control-plane: the API server knows no kind \"kcp\""},
		{args: []string{"md/c1-md-0", "--template", "kubeadmcontrolplane/c1-control-plane"}, code: core.ExitError, want: "error: --template kubeadmcontrolplane/c1-control-plane: KubeadmControlPlane.controlplane.cluster.x-k8s.io is not an infrastructure machine template"},
		{args: []string{"md/c1-md-0", "--version", "v1.35.0"}, code: core.ExitRefused, want: "[rule WorkerNewerThanControlPlane]"},
	} {
		_, errOut, code := runFake(t, cl, gitOpsNow, tc.args...)
		assert.Equal(t, tc.code, code, "%v", tc.args)
		assert.Contains(t, errOut, tc.want, "%v", tc.args)
	}
	md := gitOpsMD()
	getObj(t, cl, md)
	assert.Equal(t, "v1.34.2", md.Spec.Template.Spec.Version, "nothing sent")

	topo := newFakeClient(objectsOf(chainDone)...)
	for args, want := range map[string]string{
		"md/c1-md-0": "error: cannot switch the templates of MachineDeployment demo/c1-md-0: it is managed by the topology of Cluster c1 (label topology.cluster.x-k8s.io/owned), and the topology controller would revert a direct edit; " +
			"change the templates of its worker class in the ClusterClass of Cluster c1, or the class and version in the Cluster's topology (spec.topology.workers.machineDeployments[name=md-0], spec.topology.version)\n",
		"kcp/c1-control-plane": "error: cannot switch the template of KubeadmControlPlane demo/c1-control-plane: it is managed by the topology of Cluster c1 (label topology.cluster.x-k8s.io/owned), and the topology controller would revert a direct edit; " +
			"change the control plane's machine infrastructure template in the ClusterClass of Cluster c1 (spec.controlPlane.machineInfrastructure), or spec.topology.version of the Cluster\n",
	} {
		_, errOut, code := runFake(t, topo, gitOpsNow, args, "--version", "v1.35.1")
		assert.Equal(t, core.ExitError, code, args)
		assert.Equal(t, want, errOut, args)
	}
}
