package plan

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// planner is the user of restrictedUser: it may read what a plan reads and
// patch the kinds it plans (a server-side dry run is authorized as the
// write it previews), nothing more.
const planner = "planner"

// plannerRules are its rights in the clusters' namespace. RolloutRevisions
// (the recorded history) it may only get and list; it may not update
// MachineDeployments or KubeadmControlPlanes, only patch them.
var plannerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"clusters", "machinesets", "machines"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"machinedeployments"}, Verbs: []string{"get", "list", "watch", "patch"}},
	{APIGroups: []string{controlplanev1.GroupVersion.Group}, Resources: []string{"kubeadmcontrolplanes"}, Verbs: []string{"get", "list", "watch", "patch"}},
	{APIGroups: []string{"infrastructure.cluster.x-k8s.io"}, Resources: []string{"devmachinetemplates"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"bootstrap.cluster.x-k8s.io"}, Resources: []string{"kubeadmconfigtemplates"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{rgv1alpha1.GroupVersion.Group}, Resources: []string{"rolloutrevisions"}, Verbs: []string{"get", "list"}},
}

// restrictedUser runs plans as planner, through a kubeconfig that
// impersonates it: a template switch, a bootstrap template switch, a
// version, and the undo the guard refuses. Each exits as the admin's does
// with the same plan, and nothing is written: the objects' resourceVersions
// and every RolloutRevision of the namespace are unchanged.
func restrictedUser(t *testing.T) {
	kubeconfig := grantPlanner(t)
	md := builder.MachineDeployment(demo.Namespace, demo.MachineDeploymentName()).Build()
	kcp := builder.KubeadmControlPlane(demo.Namespace, demo.ControlPlaneName()).Build()
	beforeMD, beforeKCP := storedOf(t, md), storedOf(t, kcp)
	beforeRevisions := revisionsIn(t, demo.Namespace)
	workersBefore := machines(t, workers())
	res := "md/" + demo.MachineDeploymentName()

	var refused *v1alpha1.RolloutPlan
	for _, c := range []struct {
		want int
		args []string
	}{
		{0, []string{res, "--template", "devmachinetemplate/" + demo.MachineDeploymentName()}},
		{0, []string{res, "--bootstrap-template", "kubeadmconfigtemplate/" + spareBootstrapName()}},
		{0, []string{res, "--version", "v1.34.3"}},
		{rollout.ExitRefused, refusedUndoArgs(t)},
	} {
		change := strings.Join(c.args, " ")
		admin, adminRun := plan(t, c.want, c.args...)
		mine, run := planAs(t, kubeconfig, c.want, c.args...)
		assert.Equal(t, admin, mine, "%s: the planner's plan is the admin's", change)
		assert.Equal(t, adminRun.Stderr, run.Stderr, "%s: the same verdict on stderr", change)
		require.Len(t, mine.Objects, 1)
		assert.Equal(t, c.want == 0, mine.Objects[0].Verdict.Admitted, "%s: %+v", change, mine.Objects[0].Verdict)
		if c.want == 0 {
			assert.Equal(t, workerMachines, mine.Objects[0].Counts.Replace, "%s: every worker replaced", change)
		} else {
			refused = mine
		}
	}
	require.NotNil(t, refused)
	v := refused.Objects[0].Verdict
	assert.Equal(t, "rollout-guard", v.RefusedBy)
	assert.Equal(t, []string{"ControlPlaneDowngrade", "EtcdDowngrade"}, v.Rules)
	assert.Equal(t, cpMachines, refused.Objects[0].Counts.Replace)

	assert.Equal(t, beforeMD, storedOf(t, md), "the planner's plans stored nothing")
	assert.Equal(t, beforeKCP, storedOf(t, kcp))
	assert.Equal(t, beforeRevisions, revisionsIn(t, demo.Namespace), "no RolloutRevision created, changed or deleted")
	assert.Equal(t, workersBefore, machines(t, workers()))

	// The rights were those of the Role: the API server denies the planner
	// any write of the history, and an update of what it plans.
	as, err := sb.ClientAs(planner)
	require.NoError(t, err)
	for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection", "watch"} {
		assert.False(t, allowed(t, as, verb, rgv1alpha1.GroupVersion.Group, "rolloutrevisions"), "the planner may not %s rolloutrevisions", verb)
	}
	assert.False(t, allowed(t, as, "update", clusterv1.GroupVersion.Group, "machinedeployments"))
	assert.False(t, allowed(t, as, "update", controlplanev1.GroupVersion.Group, "kubeadmcontrolplanes"))
	assert.False(t, allowed(t, as, "patch", clusterv1.GroupVersion.Group, "clusters"))
	assert.False(t, allowed(t, as, "patch", clusterv1.GroupVersion.Group, "machines"))
}

// grantPlanner creates the planner's Role and RoleBinding in the clusters'
// namespace, waits until the API server authorizes by them, and returns a
// kubeconfig that impersonates the planner.
func grantPlanner(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, sb.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: demo.Namespace, Name: planner},
		Rules:      plannerRules,
	}))
	require.NoError(t, sb.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: demo.Namespace, Name: planner},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: planner},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: planner}},
	}))
	as, err := sb.ClientAs(planner)
	require.NoError(t, err)
	framework.WaitFor(t, rolloutTimeout, pollInterval, "the planner's RoleBinding in effect", func() (bool, string) {
		ok := allowed(t, as, "patch", controlplanev1.GroupVersion.Group, "kubeadmcontrolplanes") &&
			allowed(t, as, "list", rgv1alpha1.GroupVersion.Group, "rolloutrevisions")
		return ok, fmt.Sprintf("patch kubeadmcontrolplanes and list rolloutrevisions allowed: %t", ok)
	})

	kc, err := clientcmd.LoadFromFile(sb.Kubeconfig)
	require.NoError(t, err)
	require.NotEmpty(t, kc.AuthInfos)
	for _, ai := range kc.AuthInfos {
		ai.Impersonate, ai.ImpersonateGroups = planner, nil
	}
	path := filepath.Join(t.TempDir(), "planner.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

// allowed asks the API server whether the user of c may verb resource in the
// clusters' namespace.
func allowed(t *testing.T, c client.Client, verb, group, resource string) bool {
	t.Helper()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: demo.Namespace, Verb: verb, Group: group, Resource: resource},
	}}
	require.NoError(t, c.Create(context.Background(), review))
	return review.Status.Allowed
}

// planAs runs `rollout plan ARGS -o json` with kubeconfig in the clusters'
// namespace and checks it as plan does.
func planAs(t *testing.T, kubeconfig string, want int, args ...string) (*v1alpha1.RolloutPlan, sandbox.CLIRun) {
	t.Helper()
	var stdout, stderr sandbox.SyncBuffer
	full := append(append([]string{"plan"}, args...), "-o", "json", "-n", demo.Namespace)
	begin := time.Now()
	code := framework.RunRollout(context.Background(), kubeconfig, t.TempDir(), &stdout, &stderr, full...)
	run := sandbox.CLIRun{Code: code, Stdout: stdout.String(), Stderr: stderr.String(), Took: time.Since(begin)}
	t.Logf("as %s: rollout %s → exit %d (%s)", planner, strings.Join(full, " "), run.Code, run.Took.Round(time.Millisecond))
	return decodePlan(t, want, args, run)
}

// revisionsIn returns every RolloutRevision of namespace: name →
// resourceVersion.
func revisionsIn(t *testing.T, namespace string) map[string]string {
	t.Helper()
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, sb.Client.List(context.Background(), list, client.InNamespace(namespace)))
	out := map[string]string{}
	for _, cr := range list.Items {
		out[cr.Name] = cr.ResourceVersion
	}
	return out
}
