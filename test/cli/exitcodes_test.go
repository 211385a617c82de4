package cli

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// exitCodeLine is a line of a help's exit-status block: "  6   refused ...".
var exitCodeLine = regexp.MustCompile(`^  (\d+)\s+\S`)

// documentedExitCodes reads the exit codes a command's --help lists.
func documentedExitCodes(t *testing.T, verb string) []int {
	t.Helper()
	help := rolloutCmd(t, strings.Fields(verb+" --help")...).ok(t)
	_, block, ok := strings.Cut(help, "\nExit status:\n")
	require.True(t, ok, "%s --help has no exit status:\n%s", verb, help)
	var codes []int
	for _, line := range strings.Split(block, "\n") {
		if line == "" {
			break
		}
		if m := exitCodeLine.FindStringSubmatch(line); m != nil {
			code, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			codes = append(codes, code)
		}
	}
	require.NotEmpty(t, codes, "%s --help lists no exit code", verb)
	return codes
}

// exitCase is one outcome of one command: what it runs (in the verb's
// world, after the cases before it) and the exit code it must end with.
type exitCase struct {
	name string
	args []string
	code int
	// before, when set, prepares the case in namespace ns.
	before func(t *testing.T, ns string)
}

// TestExitCodesAsDocumented runs every command to each of its outcomes and
// checks its exit code: the one its --help documents for that outcome, and
// every code a --help documents is reached. A refusal by the policy or a
// webhook is 6 in every command that changes or plans a change, dry runs
// and --emit included, and never the 1 of an error.
func TestExitCodesAsDocumented(t *testing.T) {
	kcp, md := "kcp/"+kcpName, "md/"+mdName
	for _, verb := range []struct {
		verb string
		// setup builds the world of the verb's cases in namespace ns.
		setup func(t *testing.T, ns string)
		cases []exitCase
	}{
		{verb: "", // the template switch, and rollout KIND/NAME alone
			setup: func(t *testing.T, ns string) {
				newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
				refusedFleet(t, ns)
			},
			cases: []exitCase{
				{name: "a rollout of clusters halted: its cluster refused", args: []string{"cluster/fleet-1", "--version", "v1.34.2"}, code: rollout.ExitStalled},
				{name: "a rollout of a cluster without a topology", args: []string{"cluster/" + framework.WorldClusterName, "--version", "v1.35.2"}, code: rollout.ExitError},
				{name: "switched", args: []string{md, "--template", "devmachinetemplate/c1-md-1"}, code: rollout.ExitOK},
				{name: "unchanged", args: []string{md, "--template", "devmachinetemplate/c1-md-1"}, code: rollout.ExitOK},
				{name: "template not found", args: []string{md, "--template", "devmachinetemplate/missing"}, code: rollout.ExitError},
				{name: "refused by the policy", args: []string{md, "--version", "v1.35.2"}, code: rollout.ExitRefused},
				{name: "refused, client dry run", args: []string{md, "--version", "v1.35.2", "--dry-run=client"}, code: rollout.ExitRefused},
				{name: "refused by the guard, server dry run", args: []string{md, "--version", "v1.35.2", "--dry-run=server"}, code: rollout.ExitRefused},
				{name: "refused, --emit", args: []string{md, "--version", "v1.35.2", "--emit", "yaml"}, code: rollout.ExitRefused},
				{name: "restart not confirmed", args: []string{kcp}, code: rollout.ExitNotConfirmed},
				{name: "restart confirmed", args: []string{kcp, "--yes"}, code: rollout.ExitOK},
			}},
		{verb: "restart",
			setup: func(t *testing.T, ns string) {
				newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
			},
			cases: []exitCase{
				{name: "restarted", args: []string{"restart", md}, code: rollout.ExitOK},
				{name: "not found", args: []string{"restart", "md/nope"}, code: rollout.ExitError},
				{name: "control plane not confirmed", args: []string{"restart", kcp}, code: rollout.ExitNotConfirmed},
				{name: "control plane confirmed", args: []string{"restart", kcp, "--yes"}, code: rollout.ExitOK},
				{name: "refused by an admission policy", args: []string{"restart", md}, code: rollout.ExitRefused, before: freezeRestarts},
			}},
		{verb: "pause",
			setup: func(t *testing.T, ns string) {
				newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
			},
			cases: []exitCase{
				{name: "paused", args: []string{"pause", md}, code: rollout.ExitOK},
				{name: "already paused", args: []string{"pause", md}, code: rollout.ExitOK},
				{name: "not found", args: []string{"pause", "md/nope"}, code: rollout.ExitError},
			}},
		{verb: "resume",
			setup: func(t *testing.T, ns string) {
				newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
			},
			cases: []exitCase{
				{name: "not paused", args: []string{"resume", md}, code: rollout.ExitOK},
				{name: "not found", args: []string{"resume", "md/nope"}, code: rollout.ExitError},
			}},
		{verb: "history",
			setup: func(t *testing.T, ns string) {
				newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
			},
			cases: []exitCase{
				{name: "shown", args: []string{"history", md}, code: rollout.ExitOK},
				{name: "not found", args: []string{"history", "md/nope"}, code: rollout.ExitError},
			}},
		{verb: "undo",
			setup: func(t *testing.T, ns string) {
				w := newWorld(t, ns, framework.WorldSpec{Version: "v1.33.5", WorkerVersion: "v1.33.5"})
				rolloutCmd(t, md, "--template", "devmachinetemplate/c1-md-1", "-n", ns).ok(t)
				rolloutCmd(t, kcp, "--version", "v1.34.2", "-n", ns).ok(t)
				waitRecorded(t, w.MD)
				waitRecorded(t, w.KCP)
			},
			cases: []exitCase{
				{name: "rolled back", args: []string{"undo", md}, code: rollout.ExitOK},
				{name: "already at that revision", args: []string{"undo", md, "--to-revision", "1"}, code: rollout.ExitOK},
				{name: "no such revision", args: []string{"undo", md, "--to-revision", "9"}, code: rollout.ExitError},
				{name: "refused by the policy", args: []string{"undo", kcp}, code: rollout.ExitRefused},
				{name: "refused, client dry run", args: []string{"undo", kcp, "--dry-run=client"}, code: rollout.ExitRefused},
				{name: "refused by the guard, server dry run", args: []string{"undo", kcp, "--dry-run=server"}, code: rollout.ExitRefused},
				{name: "refused, --emit", args: []string{"undo", kcp, "--emit", "yaml"}, code: rollout.ExitRefused},
			}},
		{verb: "plan",
			setup: func(t *testing.T, ns string) {
				w := newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
				w.AddPoolMachines(t, w.MD, 1, "v1.34.2")
			},
			cases: []exitCase{
				{name: "admitted", args: []string{"plan", md, "--template", "devmachinetemplate/c1-md-1"}, code: rollout.ExitOK},
				{name: "not found", args: []string{"plan", "md/nope", "--restart"}, code: rollout.ExitError},
				{name: "refused", args: []string{"plan", md, "--version", "v1.35.2"}, code: rollout.ExitRefused},
				{name: "would replace machines", args: []string{"plan", md, "--template", "devmachinetemplate/c1-md-1", "--fail-on-replace"}, code: rollout.ExitWouldReplace},
			}},
		{verb: "status",
			setup: func(t *testing.T, ns string) {
				w := newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
				// A MachinePool whose provider runs its instances without
				// Machines, as most do, rolled out: its status counts alone.
				require.NoError(t, env.Client.Create(context.Background(), builder.DevMachinePool(ns, "c1-mp-0").Unstructured()))
				mp := w.MachinePool("c1-mp-0", "v1.34.2").WithBootstrapDataSecret("c1-mp-0-bootstrap").Build()
				require.NoError(t, env.Client.Create(context.Background(), mp))
				mp.Status.ObservedGeneration = mp.Generation
				mp.Status.Replicas, mp.Status.ReadyReplicas, mp.Status.AvailableReplicas, mp.Status.UpToDateReplicas = ptr.To[int32](2), ptr.To[int32](2), ptr.To[int32](2), ptr.To[int32](2)
				require.NoError(t, env.Client.Status().Update(context.Background(), mp))
				rolloutCmd(t, md, "--template", "devmachinetemplate/c1-md-1", "-n", ns).ok(t)
				require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(w.MD), w.MD))
				onDeleteWaitingForDeletion(t, w)
				refusedFleet(t, ns)
			},
			cases: []exitCase{
				{name: "rolled out", args: []string{"status", "mp/c1-mp-0"}, code: rollout.ExitOK},
				{name: "rolled out, one read", args: []string{"status", "mp/c1-mp-0", "--watch=false"}, code: rollout.ExitOK},
				{name: "not found", args: []string{"status", "md/nope"}, code: rollout.ExitError},
				{name: "timeout", args: []string{"status", kcp, "--timeout", "2s"}, code: rollout.ExitTimeout},
				{name: "stalled", args: []string{"status", kcp, "--progress-deadline", "1s", "--timeout", "10m"}, code: rollout.ExitStalled},
				{name: "superseded", args: []string{"status", md, "--revision", "1"}, code: rollout.ExitSuperseded},
				{name: "not rolled out yet, one read", args: []string{"status", kcp, "--watch=false"}, code: rollout.ExitNotRolledOut},
				{name: "waiting for deletion (OnDelete)", args: []string{"status", "md/" + onDeletePool}, code: rollout.ExitWaitingForDeletion},
				{name: "a fleet's cluster refused", args: []string{"status", "clusterclass/" + refusedClass}, code: rollout.ExitRefused},
				{name: "paused", args: []string{"status", md, "--paused-by-the-case-before"}, code: rollout.ExitPaused},
			}},
	} {
		name := verb.verb
		if name == "" {
			name = "rollout"
		}
		t.Run(name, func(t *testing.T) {
			documented := documentedExitCodes(t, verb.verb)
			ns := "cli-exit-" + name
			verb.setup(t, ns)
			reached := map[int]bool{}
			for _, tc := range verb.cases {
				if tc.before != nil {
					tc.before(t, ns)
				}
				args := tc.args
				if slices.Contains(args, "--paused-by-the-case-before") {
					rolloutCmd(t, "pause", md, "-n", ns).ok(t)
					args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--paused-by-the-case-before" })
				}
				r := rolloutCmd(t, append(args, "-n", ns)...)
				assert.Equal(t, tc.code, r.code, "%s: exit code; stderr:\n%s", tc.name, r.stderr)
				assert.Contains(t, documented, tc.code, "%s: exit %d is not in %s --help", tc.name, tc.code, name)
				if tc.code == rollout.ExitRefused {
					assert.NotContains(t, r.stderr, "rollout-guard is unavailable", "%s: a refusal, not the guard down", tc.name)
				}
				reached[tc.code] = true
			}
			for _, code := range documented {
				assert.True(t, reached[code], "exit %d of %s --help is reached by no case", code, name)
			}
		})
	}
}

// refusedClass is the ClusterClass of refusedFleet.
const refusedClass = "fleet-class"

// refusedFleet makes ClusterClass refusedClass in namespace ns, with one
// Cluster whose TopologyReconciled condition is what Cluster API writes
// when an admission webhook refuses the topology controller's patch.
func refusedFleet(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	class := builder.ClusterClass(ns, refusedClass).
		WithInfrastructureClusterTemplate(builder.TemplateRef("infrastructure.cluster.x-k8s.io/v1beta2", "DevClusterTemplate", "fleet"), "").
		WithControlPlaneTemplate(builder.TemplateRef("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlaneTemplate", "fleet"),
			builder.TemplateRef("infrastructure.cluster.x-k8s.io/v1beta2", "DevMachineTemplate", "fleet"), "").Build()
	require.NoError(t, env.Client.Create(ctx, class))
	cluster := builder.Cluster(ns, "fleet-1").WithTopology(refusedClass, "v1.34.2").Build()
	require.NoError(t, env.Client.Create(ctx, cluster))
	cluster.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterTopologyReconciledCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.ClusterTopologyReconciledFailedReason, ObservedGeneration: cluster.Generation, LastTransitionTime: metav1.Now(),
		Message: `failed to patch KubeadmControlPlane ` + ns + `/fleet-1-control-plane: admission webhook "validate.kubeadmcontrolplane.rollout-guard.io" denied the request: etcd 3.6 -> 3.5 is a downgrade [rule EtcdDowngrade]`}}
	require.NoError(t, env.Client.Status().Update(ctx, cluster))
}

// freezeRestarts makes the API server refuse every restart of a
// MachineDeployment in namespace ns (a change of spec.rollout.after), as
// a cluster's own admission policy would during a change freeze: a
// ValidatingAdmissionPolicy, no webhook. It moves the CLI's clock an hour
// on, so that the next restart is a change.
func freezeRestarts(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "freeze-restarts-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"cluster.x-k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"machinedeployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.spec.rollout) || !has(object.spec.rollout.after) || " +
					"(has(oldObject.spec.rollout) && has(oldObject.spec.rollout.after) && object.spec.rollout.after == oldObject.spec.rollout.after)",
				Message: "restarts are frozen",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources:    &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	require.NoError(t, env.Client.Create(ctx, policy))
	require.NoError(t, env.Client.Create(ctx, binding))
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, binding)
		_ = env.Client.Delete(ctx, policy)
	})
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	setNow(later)
	t.Cleanup(func() { setNow(time.Time{}) })
	// The API server learns of policies through its own informer: wait
	// until it refuses a restart sent as a dry run.
	md := &clusterv1.MachineDeployment{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: mdName}, md))
	patch := []byte(`{"spec":{"rollout":{"after":"` + later.Format(time.RFC3339) + `"}}}`)
	require.Eventually(t, func() bool {
		err := env.Client.Patch(ctx, md.DeepCopy(), client.RawPatch(types.MergePatchType, patch), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "restarts are frozen")
	}, 30*time.Second, 100*time.Millisecond, "the admission policy never took effect")
}

// onDeletePool is the MachineDeployment of onDeleteWaitingForDeletion.
const onDeletePool = "c1-md-ondelete"

// onDeleteWaitingForDeletion creates MachineDeployment onDeletePool with the
// OnDelete strategy as Cluster API leaves it after a template switch: its
// controller observed the change and made the new MachineSet (revision 2,
// no replicas), and the one Machine, of the old MachineSet, waits for
// someone to delete it. The environment runs no Cluster API controller:
// the statuses are written as the controllers write them.
func onDeleteWaitingForDeletion(t *testing.T, w *framework.World) {
	t.Helper()
	ctx := context.Background()
	md := w.Pool(onDeletePool, "v1.34.2").WithReplicas(1).
		WithAnnotations(map[string]string{clusterv1.RevisionAnnotation: "2"}).Build()
	md.Spec.Rollout.Strategy.Type = clusterv1.OnDeleteMachineDeploymentStrategyType
	require.NoError(t, env.Client.Create(ctx, md))
	one, none := ptr.To[int32](1), ptr.To[int32](0)
	md.Status.ObservedGeneration = md.Generation
	md.Status.Replicas, md.Status.ReadyReplicas, md.Status.AvailableReplicas, md.Status.UpToDateReplicas = one, one, one, none
	md.Status.Conditions = []metav1.Condition{{Type: clusterv1.RollingOutCondition, Status: metav1.ConditionFalse, Reason: "NotRollingOut", LastTransitionTime: metav1.Now()}}
	require.NoError(t, env.Client.Status().Update(ctx, md))

	var old *clusterv1.MachineSet
	for _, set := range []struct {
		name, revision string
		replicas       *int32
	}{{onDeletePool + "-old", "1", one}, {onDeletePool + "-new", "2", none}} {
		ms := builder.MachineSet(w.Namespace, set.name).WithClusterName(framework.WorldClusterName).WithReplicas(*set.replicas).
			WithVersion("v1.34.2").WithBootstrapTemplate(onDeletePool).WithInfrastructureTemplate(onDeletePool).
			WithSelector(map[string]string{clusterv1.MachineSetNameLabel: set.name}).OwnedBy(md, set.revision).Build()
		require.NoError(t, env.Client.Create(ctx, ms))
		ms.Status.ObservedGeneration = ms.Generation
		ms.Status.Replicas, ms.Status.ReadyReplicas, ms.Status.AvailableReplicas, ms.Status.UpToDateReplicas = set.replicas, set.replicas, set.replicas, set.replicas
		require.NoError(t, env.Client.Status().Update(ctx, ms))
		if set.revision == "1" {
			old = ms
		}
	}

	m := builder.Machine(w.Namespace, onDeletePool+"-old-0").
		WithLabels(map[string]string{clusterv1.MachineDeploymentNameLabel: md.Name, clusterv1.MachineSetNameLabel: old.Name}).
		WithClusterName(framework.WorldClusterName).WithVersion("v1.34.2").WithBootstrapDataSecret("bootstrap").
		WithInfrastructureRef("DevMachine", onDeletePool+"-old-0").WithNodeVersion("v1.34.2").Build()
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet", Name: old.Name, UID: old.UID, Controller: ptr.To(true)}}
	status := m.Status
	require.NoError(t, env.Client.Create(ctx, m))
	m.Status = status
	m.Status.Phase = "Running"
	m.Status.Conditions = []metav1.Condition{
		{Type: clusterv1.MachineReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()},
		{Type: clusterv1.MachineUpToDateCondition, Status: metav1.ConditionFalse, Reason: "NotUpToDate", LastTransitionTime: metav1.Now()},
	}
	require.NoError(t, env.Client.Status().Update(ctx, m))
}
