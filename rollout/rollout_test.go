package rollout

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/webhooks"
)

func TestParseKind(t *testing.T) {
	for in, want := range map[string]core.Kind{
		"md":                                  core.MachineDeployment,
		"MachineDeployment":                   core.MachineDeployment,
		"machinedeployments":                  core.MachineDeployment,
		"machinedeployments.cluster.x-k8s.io": core.MachineDeployment,
		"mp":                                  core.MachinePool,
		"MachinePool":                         core.MachinePool,
		"machinepools.cluster.x-k8s.io":       core.MachinePool,
		"kcp":                                 core.KubeadmControlPlane,
		"KubeadmControlPlane":                 core.KubeadmControlPlane,
		"kubeadmcontrolplanes":                core.KubeadmControlPlane,
		"cluster":                             core.Cluster,
		"Clusters":                            core.Cluster,
	} {
		got, err := core.ParseKind(in)
		require.NoError(t, err, in)
		assert.Equal(t, want.GVK, got.GVK, in)
	}
	_, err := core.ParseKind("deploy")
	assert.EqualError(t, err, `unknown resource kind "deploy": use machinedeployment (md), machinepool (mp), kubeadmcontrolplane (kcp), cluster, or another provider's control plane as RESOURCE.controlplane.cluster.x-k8s.io`)
	_, err = core.ParseKind("md.apps")
	assert.Error(t, err, "a kind of another group")
	k3s, err := core.ParseKind("kthreescontrolplanes.controlplane.cluster.x-k8s.io")
	require.NoError(t, err, "another provider's control plane")
	assert.True(t, k3s.Contract)
	assert.Equal(t, "kthreescontrolplanes.controlplane.cluster.x-k8s.io", k3s.Singular(), "as typed until the API server names it")
}

func TestParseTargets(t *testing.T) {
	got, err := core.ParseTargets("pause", []string{"md/a", "KCP/b"}, false)
	require.NoError(t, err)
	assert.Equal(t, []string{"machinedeployment/a", "kubeadmcontrolplane/b"}, []string{got.Refs[0].String(), got.Refs[1].String()})
	got, err = core.ParseTargets("pause", []string{"md", "a", "b"}, false)
	require.NoError(t, err)
	assert.Len(t, got.Refs, 2)
	got, err = core.ParseTargets("pause", []string{"md"}, true)
	require.NoError(t, err)
	assert.Equal(t, core.MachineDeployment.GVK, got.Kind.GVK)
	_, err = core.ParseTargets("pause", []string{"md/"}, false)
	assert.EqualError(t, err, `resource "md/" has no valid name: write machinedeployment/NAME`)
}

func TestChangeCause(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"undo", "md/a", "--to-revision", "2", "-n", "prod", "--kubeconfig=/home/me/.kube/config"}, "rollout undo md/a --to-revision 2"},
		{[]string{"--token", "s3cret", "--as=admin", "--as-group", "g", "restart", "md/a", "-nprod", "--insecure-skip-tls-verify", "--context", "c"}, "rollout restart md/a"},
		{[]string{"md/a", "--template", "devmachinetemplate/x", "--change-cause-x"}, "rollout md/a --template devmachinetemplate/x --change-cause-x"},
		{[]string{"undo", "md/a", "--force", "--reason", "INC-1: it's down"}, `rollout undo md/a --force --reason 'INC-1: it'\''s down'`},
	}
	for _, tc := range cases {
		c := &core.Session{Options: core.Options{IOStreams: genericiooptions.NewTestIOStreamsDiscard()}, Args: tc.args}
		root := newRoot(c)
		undo, _, err := root.Find([]string{"undo"})
		require.NoError(t, err)
		assert.Equal(t, tc.want, c.ChangeCause(undo, ""), "%q", tc.args)
	}
	c := &core.Session{Options: core.Options{DisplayName: "kubectl capi rollout"}, Args: []string{"pause", "md/a"}}
	root := newRoot(c)
	require.NoError(t, root.ParseFlags(nil))
	assert.Equal(t, "kubectl capi rollout pause md/a", c.ChangeCause(root, ""))
	require.NoError(t, root.Flags().Set("change-cause", "why"))
	assert.Equal(t, "why", c.ChangeCause(root, "why"))
}

func TestPluginDisplayName(t *testing.T) {
	assert.Equal(t, "kubectl capi rollout", PluginDisplayName("/usr/local/bin/kubectl-capi-rollout"))
	assert.Equal(t, "kubectl capi-rollout", PluginDisplayName("kubectl-capi_rollout"))
	assert.Equal(t, "", PluginDisplayName("/work/bin/rollout"))
}

// TestRefusalTextIsTheGuards checks that a refusal found before sending
// reads exactly as the guard's validating webhook words it, workers grouped
// by pool as the guard groups them.
func TestRefusalTextIsTheGuards(t *testing.T) {
	machine := func(name string) client.Object {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{clusterv1.MachineDeploymentNameLabel: "md"}}}
		m.Spec.ClusterName = "c1"
		m.Spec.Version = "v1.34.2"
		return m
	}
	cases := []struct {
		name     string
		machines []client.Object
		wantLine string // one field error of the refusal
	}{
		{name: "a downgrade below a pool", wantLine: "spec.version: Forbidden: KubeadmControlPlane cp: MachineDeployment md runs v1.34.2, newer than v1.32.0;"},
		{name: "a downgrade below a pool of 5 Machines", machines: []client.Object{machine("md-a"), machine("md-b"), machine("md-c"), machine("md-d"), machine("md-e")},
			wantLine: "spec.version: Forbidden: KubeadmControlPlane cp: MachineDeployment md and 5 of its Machines (md-a, md-b, md-c and 2 more) run v1.34.2, newer than v1.32.0;"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := core.Scheme()
			live := &controlplanev1.KubeadmControlPlane{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
				Spec:       controlplanev1.KubeadmControlPlaneSpec{Version: "v1.34.2"},
			}
			md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md"}, Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c1"}}
			md.Spec.Template.Spec.Version = "v1.34.2"
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(append([]client.Object{live, md}, tc.machines...)...).Build()
			p := policy.Policy{Reader: c, Mapper: c.RESTMapper()}
			next := live.DeepCopy()
			next.Spec.Version = "v1.32.0"

			d, _, err := p.Decide(context.Background(), live, next)
			require.NoError(t, err)
			require.False(t, d.Allowed())
			_, kcpV, _ := webhooks.NewValidators(p, nil, nil)
			_, guardErr := kcpV.ValidateUpdate(context.Background(), live, next)
			require.Error(t, guardErr)
			assert.Contains(t, guardErr.Error(), tc.wantLine)
			assert.Equal(t, guardErr.Error(), core.RefusalText(core.KubeadmControlPlane, "cp", d))

			cl := &core.Clients{Client: c, Mapper: c.RESTMapper()}
			r := &core.Session{Options: core.Options{IOStreams: genericiooptions.NewTestIOStreamsDiscard()}}
			refusal := r.CheckPolicy(context.Background(), cl, live, next, "hint", false)
			require.Error(t, refusal)
			assert.Equal(t, "rollout-guard's policy refuses this change (checked before sending; nothing was changed): "+guardErr.Error()+"\nhint", refusal.Error())
			assert.NoError(t, r.CheckPolicy(context.Background(), cl, live, live.DeepCopyObject().(client.Object), "hint", false))
		})
	}
}

func TestQuote(t *testing.T) {
	assert.Equal(t, "md/a", core.Quote("md/a"))
	assert.Equal(t, "''", core.Quote(""))
	assert.Equal(t, "'a b'", core.Quote("a b"))
}
