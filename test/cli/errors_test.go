package cli

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestArgumentErrors checks what is refused before any request, with the
// exact message and exit code 1.
func TestArgumentErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"restart", "foo/bar"}, `unknown resource kind "foo": use machinedeployment (md), machinepool (mp), kubeadmcontrolplane (kcp), cluster, or another provider's control plane as RESOURCE.controlplane.cluster.x-k8s.io`},
		{[]string{"undo", "deployment/bar"}, `unknown resource kind "deployment": use machinedeployment (md), machinepool (mp), kubeadmcontrolplane (kcp), cluster, or another provider's control plane as RESOURCE.controlplane.cluster.x-k8s.io`},
		{[]string{"restart"}, "restart needs a resource: write restart KIND/NAME (use machinedeployment (md), machinepool (mp), kubeadmcontrolplane (kcp), cluster, or another provider's control plane as RESOURCE.controlplane.cluster.x-k8s.io)"},
		{[]string{"pause", "md"}, "md needs a name: write pause machinedeployment/NAME, or select by label with -l KEY=VALUE"},
		{[]string{"pause", "md/a", "b"}, `mixed resource forms "md/a" and "b": write every resource as KIND/NAME`},
		{[]string{"pause", "md/a", "-l", "x=y"}, "-l/--selector selects by label: name a kind alone, e.g. pause machinedeployment -l KEY=VALUE, not md/a"},
		{[]string{"restart", "md/a", "-A"}, "-A/--all-namespaces works with -l/--selector only"},
		{[]string{"restart", "md/a", "--at", "tomorrow"}, `--at "tomorrow" is not an RFC 3339 time such as 2030-01-02T03:00:00Z: parsing time "tomorrow" as "2006-01-02T15:04:05Z07:00": cannot parse "tomorrow" as "2006"`},
		{[]string{"history", "md/a", "md/b"}, "history works on one object at a time; got 2"},
		{[]string{"md/a", "--version", "v1.34.2", "--force", "--emit", "yaml"}, "--force changes the live object; --emit changes nothing: use one of them"},
		{[]string{"undo", "md/a", "--force", "--reason", "x", "--emit", "yaml"}, "--reason is sent with a live change, as the override annotation; --emit changes nothing: give the reason in the Git commit message"},
		{[]string{"undo", "md/a", "--reason", "x"}, "--reason goes with --force: it is the reason of an override"},
		{[]string{"undo", "md/a", "--dry-run=maybe"}, `--dry-run must be "none", "client" or "server", not "maybe"`},
		{[]string{"undo", "md/a", "-o", "wide"}, `unknown output format "wide": use -o json, -o yaml or -o name`},
		{[]string{"undo", "md/a", "--to-revision", "x"}, "invalid argument \"x\" for \"--to-revision\" flag: strconv.ParseInt: parsing \"x\": invalid syntax\nSee 'rollout undo --help' for usage."},
		{[]string{"restat", "md/a"}, `unknown command "restat" for "rollout"; did you mean "restart"?`},
		{[]string{"kcp/a", "--bootstrap-template", "kubeadmconfigtemplate/x"}, "--bootstrap-template works on machinedeployments only: a KubeadmControlPlane's bootstrap config is inline, in spec.kubeadmConfigSpec"},
		{[]string{"cluster/c1", "--template", "devmachinetemplate/x"}, "--template and --bootstrap-template work on machinedeployment and kubeadmcontrolplane objects; a ClusterClass cluster takes its templates from its class: roll it to another class with --class, or its version with --version"},
		{[]string{"cluster", "-l", "env=prod"}, "a rollout of clusters needs what to roll out: --version V (their spec.topology.version) or --class NAME (their spec.topology.classRef); to restart them instead: rollout restart cluster -l SELECTOR"},
		{[]string{"cluster", "-l", "env=prod", "--version", "v1.35.0", "--waves", "50%,25%"}, `--waves "50%,25%": each wave ends after the one before it, and "25%" does not come after "50%": the entries are cumulative (1,25%,100% is one cluster, then up to a quarter of them, then all)`},
		{[]string{"cluster", "-l", "env=prod", "--version", "v1.35.0", "--class", "gold"}, "a rollout of clusters takes --version V or --class NAME, not both: roll out one, then the other"},
		{[]string{"md/a", "--waves", "1,100%"}, "--waves: for a rollout of clusters only (rollout cluster -l SELECTOR --version V), not of md/a"},
		{[]string{"cluster", "-l", "env=prod", "--version", "v1.35.0", "-o", "json"}, "-o/--output does not work with a staged rollout of clusters: it prints its waves and their progress as lines; rollout status cluster -l SELECTOR -o json reports the clusters as data"},
	}
	for _, tc := range cases {
		t.Run(tc.args[0], func(t *testing.T) {
			r := rolloutCmd(t, tc.args...)
			r.fails(t, tc.want)
			assert.Empty(t, r.stdout)
		})
	}
}

// TestObjectErrors checks the errors about objects and templates: not
// found, the wrong kind of template, a change the policy refuses.
func TestObjectErrors(t *testing.T) {
	w := newWorld(t, "cli-errors", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	md := "md/" + mdName

	rolloutCmd(t, "restart", "md/nope", "-n", w.Namespace).fails(t,
		`MachineDeployment "nope" not found in namespace "cli-errors": check the name and the namespace (-n), e.g. with kubectl get machinedeployments.cluster.x-k8s.io -n cli-errors`)
	rolloutCmd(t, "history", "kcp/nope", "-n", w.Namespace).fails(t,
		`KubeadmControlPlane "nope" not found in namespace "cli-errors": check the name and the namespace (-n), e.g. with kubectl get kubeadmcontrolplanes.controlplane.cluster.x-k8s.io -n cli-errors`)

	// A Cluster without a topology has no revisions of its own to undo.
	rolloutCmd(t, "undo", "cluster/"+framework.WorldClusterName, "-n", w.Namespace).fails(t,
		"undo of a Cluster rolls back its spec.topology, and Cluster cli-errors/"+framework.WorldClusterName+" has none (it is not a ClusterClass cluster): undo its control plane or one of its worker pools")

	rolloutCmd(t, md, "--template", "devmachinetemplate/missing", "-n", w.Namespace).fails(t,
		`--template devmachinetemplate/missing: DevMachineTemplate "missing" not found in namespace "cli-errors": create it first (an object references templates in its own namespace)`)
	rolloutCmd(t, md, "--template", "kubeadmconfigtemplate/c1-md-1", "-n", w.Namespace).fails(t,
		"--template kubeadmconfigtemplate/c1-md-1: KubeadmConfigTemplate.bootstrap.cluster.x-k8s.io is not an infrastructure machine template: want a kind of an API group ending in infrastructure.cluster.x-k8s.io whose name ends in Template, e.g. DevMachineTemplate")
	rolloutCmd(t, md, "--template", "devmachine/c1-md-1", "-n", w.Namespace).fails(t,
		"--template devmachine/c1-md-1: DevMachine.infrastructure.cluster.x-k8s.io is not an infrastructure machine template: want a kind of an API group ending in infrastructure.cluster.x-k8s.io whose name ends in Template, e.g. DevMachineTemplate")
	rolloutCmd(t, md, "--bootstrap-template", "devmachinetemplate/c1-md-1", "-n", w.Namespace).fails(t,
		"--bootstrap-template devmachinetemplate/c1-md-1: DevMachineTemplate.infrastructure.cluster.x-k8s.io is not a bootstrap config template: want a kind of an API group ending in bootstrap.cluster.x-k8s.io whose name ends in Template, e.g. KubeadmConfigTemplate")
	r := rolloutCmd(t, md, "--template", "nosuchkind/x", "-n", w.Namespace)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `error: --template nosuchkind/x: the API server knows no kind "nosuchkind"`)
	rolloutCmd(t, md, "--template", "devmachinetemplate", "-n", w.Namespace).fails(t,
		`--template "devmachinetemplate" is not KIND/NAME: write e.g. --template devmachinetemplate/NAME`)

	// The policy refuses a worker pool newer than its control plane, before sending.
	rolloutCmd(t, md, "--version", "v1.35.0", "-n", w.Namespace).refused(t,
		"rollout-guard's policy refuses this change (checked before sending; nothing was changed): "+
			`MachineDeployment.cluster.x-k8s.io "c1-md-0" is invalid: spec.template.spec.version: Forbidden: MachineDeployment c1-md-0: v1.35.0 is newer than v1.34.2, the oldest version of control plane KubeadmControlPlane c1-control-plane (its spec.version); a kubelet must not be newer than the API server [rule WorkerNewerThanControlPlane]; keep spec.template.spec.version at v1.34.x or older until every machine of control plane KubeadmControlPlane c1-control-plane runs v1.35 or newer`+
			"\nTo ask the guard itself, add --dry-run=server.")
	rolloutCmd(t, md, "--version", "v1.35.x", "-n", w.Namespace).refused(t,
		"rollout-guard's policy refuses this change (checked before sending; nothing was changed): "+
			`MachineDeployment.cluster.x-k8s.io "c1-md-0" is invalid: spec.template.spec.version: Invalid value: "v1.35.x": MachineDeployment c1-md-0: spec.template.spec.version "v1.35.x" is not a valid Kubernetes version [rule InvalidVersion]; write a Kubernetes version such as v1.35.2`+
			"\nTo ask the guard itself, add --dry-run=server.")
	// The same change already in place: nothing to do.
	out := rolloutCmd(t, md, "--template", "devmachinetemplate/c1-md-0", "--version", "v1.34.2", "-n", w.Namespace).ok(t)
	assert.Equal(t, "machinedeployment.cluster.x-k8s.io/c1-md-0 unchanged: it already uses these templates and version\n", out)
	// A client dry run of a template switch.
	r = rolloutCmd(t, md, "--template", "DevMachineTemplate.infrastructure.cluster.x-k8s.io/c1-md-1", "-n", w.Namespace, "--dry-run=client")
	assert.Equal(t, "MachineDeployment cli-errors/c1-md-0: would roll out (dry run: nothing sent)\n"+
		"FIELD               LIVE                         AFTER\n"+
		"infrastructureRef   DevMachineTemplate/c1-md-0   DevMachineTemplate/c1-md-1   (rolls out)\n"+
		"machinedeployment.cluster.x-k8s.io/c1-md-0 rolling out (dry run): infrastructureRef c1-md-0 → c1-md-1\n", r.ok(t))
	assert.EqualValues(t, 1, env.Stamps(t, w.MD).Revision)
}

// TestForbidden runs the CLI as a user who may read but not change: the
// error names the verb and resource the user lacks; bound to the shipped
// rollout-guard-history-reader, the user reads history.
func TestForbidden(t *testing.T) {
	w := newWorld(t, "cli-rbac", framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	grantViewer(t, w.Namespace, []rbacv1.PolicyRule{
		{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machinedeployments", "clusters"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"controlplane.cluster.x-k8s.io"}, Resources: []string{"kubeadmcontrolplanes"}, Verbs: []string{"get", "list"}},
	}, w.MD, w.KCP)

	rolloutAs(t, "viewer", "restart", "md/"+mdName, "-n", w.Namespace).fails(t,
		`cannot restart MachineDeployment cli-rbac/c1-md-0: user "viewer" may not patch machinedeployments.cluster.x-k8s.io in namespace "cli-rbac" (Forbidden); ask your cluster administrator for a Role granting "patch" on "machinedeployments" in API group "cluster.x-k8s.io": machinedeployments.cluster.x-k8s.io "c1-md-0" is forbidden: User "viewer" cannot patch resource "machinedeployments" in API group "cluster.x-k8s.io" in the namespace "cli-rbac"`)
	rolloutAs(t, "viewer", "history", "kcp/"+kcpName, "-n", w.Namespace).fails(t,
		`cannot show the history of kubeadmcontrolplane/c1-control-plane: user "viewer" may not list rolloutrevisions.rollout-guard.io in namespace "cli-rbac" (Forbidden); ask your cluster administrator for a Role granting "list" on "rolloutrevisions" in API group "rollout-guard.io": rolloutrevisions.rollout-guard.io is forbidden: User "viewer" cannot list resource "rolloutrevisions" in API group "rollout-guard.io" in the namespace "cli-rbac"`)
	// The shipped history reader, bound in the namespace, is the right
	// that was missing.
	require.NoError(t, env.Client.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: "viewer-history"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rollout-guard-history-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "viewer"}},
	}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r := rolloutAs(t, "viewer", "history", "kcp/"+kcpName, "-n", w.Namespace)
		assert.Equal(c, 0, r.code, "rollout history as a viewer bound to rollout-guard-history-reader; stderr:\n%s", r.stderr)
		assert.Contains(c, r.stdout, "REVISION")
	}, 30*time.Second, 100*time.Millisecond)
	rolloutAs(t, "viewer", "pause", "md/"+mdName, "-n", "default").fails(t,
		`cannot pause machinedeployment/c1-md-0: user "viewer" may not get machinedeployments.cluster.x-k8s.io in namespace "default" (Forbidden); ask your cluster administrator for a Role granting "get" on "machinedeployments" in API group "cluster.x-k8s.io": machinedeployments.cluster.x-k8s.io "c1-md-0" is forbidden: User "viewer" cannot get resource "machinedeployments" in API group "cluster.x-k8s.io" in the namespace "default"`)
}
