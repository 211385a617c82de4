package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/status"
)

// refusal is the TopologyReconciled message Cluster API writes when the
// guard refuses the topology controller's patch of a control plane.
const refusal = `failed to reconcile KubeadmControlPlane demo/NAME-control-plane: failed to patch KubeadmControlPlane demo/NAME-control-plane: admission webhook "validate.kubeadmcontrolplane.rollout-guard.io" denied the request: etcd 3.6 -> 3.5 is a downgrade [rule EtcdDowngrade]`

// member is cluster name of the fleet tests: the topo t's objects (all
// named after c1) renamed after name, with edit applied to its Cluster.
type member struct {
	name string
	t    topo
	edit func(*clusterv1.Cluster)
}

// objects are the member's objects, renamed.
func (m member) objects(t *testing.T) []client.Object {
	var out []client.Object
	for _, obj := range objectsOf(m.t) {
		data, err := json.Marshal(obj)
		require.NoError(t, err)
		data = []byte(strings.NewReplacer(`"c1"`, `"`+m.name+`"`, `"c1-`, `"`+m.name+`-`, `"uid-`, `"uid-`+m.name+`-`).Replace(string(data)))
		renamed := obj.DeepCopyObject().(client.Object)
		require.NoError(t, json.Unmarshal(data, renamed))
		if c, ok := renamed.(*clusterv1.Cluster); ok && m.edit != nil {
			m.edit(c)
		}
		out = append(out, renamed)
	}
	return out
}

// evaluate is the member's Cluster and report.
func (m member) evaluate(t *testing.T) (*clusterv1.Cluster, status.ClusterReport) {
	c, objs := m.t.objects()
	if m.edit != nil {
		m.edit(c)
	}
	return c, status.EvaluateTopologyAt(c, objs, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
}

// refused sets the TopologyReconciled condition of a refused write.
func refused(c *clusterv1.Cluster) {
	c.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterTopologyReconciledCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.ClusterTopologyReconciledFailedReason, Message: strings.ReplaceAll(refusal, "NAME", c.Name)}}
}

// reconciledAt sets the TopologyReconciled condition True for generation
// observed of a Cluster at generation 5 (observed 4: the topology
// controller has not seen the last edit yet).
func reconciledAt(observed int64) func(*clusterv1.Cluster) {
	return func(c *clusterv1.Cluster) {
		c.Generation = 5
		c.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterTopologyReconciledCondition, Status: metav1.ConditionTrue,
			Reason: clusterv1.ClusterTopologyReconcileSucceededReason, ObservedGeneration: observed}}
	}
}

// TestFleetStateOf: the state of one cluster in a fleet, from its report,
// its Cluster and its tracker's verdict.
func TestFleetStateOf(t *testing.T) {
	workerRolling := chainDone
	workerRolling.pools = []topoPool{{name: "md-0", version: "v1.35.0", machines: []string{"v1.34.2", "v1.35.0"}}}
	for _, tc := range []struct {
		name    string
		m       member
		verdict string
		state   string
		reason  string
		final   bool
	}{
		{name: "up to date", m: member{name: "a", t: chainDone}, verdict: status.PhaseRolledOut, state: v1alpha1.ClusterUpToDate, final: true},
		{name: "complete, confirming the grace period", m: member{name: "a", t: chainDone}, verdict: status.PhaseConfirming,
			state: v1alpha1.ClusterRolling, reason: "complete, confirming"},
		{name: "the topology controller has not seen the edit", m: member{name: "a", t: chainDone, edit: reconciledAt(4)}, verdict: status.PhaseProgressing,
			state: v1alpha1.ClusterRolling, reason: "waiting for the topology controller to reconcile generation 5"},
		{name: "it has", m: member{name: "a", t: chainDone, edit: reconciledAt(5)}, verdict: status.PhaseRolledOut, state: v1alpha1.ClusterUpToDate, final: true},
		{name: "workers rolling", m: member{name: "a", t: workerRolling}, verdict: status.PhaseProgressing,
			state: v1alpha1.ClusterRolling, reason: "upgrading to v1.35.0: workers v1.35.0 rolling out, 0 of 1 pool done; workers c1-md-0: 1/2 machines up to date, 1 old"},
		{name: "control plane upgrading", m: member{name: "a", t: chainStep2Rolling}, verdict: status.PhaseProgressing,
			state: v1alpha1.ClusterRolling, reason: "upgrading to v1.35.0: control plane v1.35.0 rolling out; then workers v1.35.0; control plane: 2/3 machines up to date, 1 old"},
		{name: "stalled", m: member{name: "a", t: workerRolling}, verdict: status.PhaseStalled,
			state: v1alpha1.ClusterStalled, reason: "no progress for 10m0s: upgrading to v1.35.0: workers v1.35.0 rolling out, 0 of 1 pool done; workers c1-md-0: 1/2 machines up to date, 1 old", final: true},
		{name: "paused", m: member{name: "a", t: chainStep2Rolling, edit: func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) }}, verdict: status.PhasePaused,
			state: v1alpha1.ClusterPaused, reason: "spec.paused is true", final: true},
		{name: "refused by a webhook", m: member{name: "a", t: chainStep1Done, edit: refused}, verdict: status.PhaseProgressing,
			state: v1alpha1.ClusterRefused, reason: strings.ReplaceAll(refusal, "NAME", "c1"), final: true},
		{name: "refused by an admission policy", m: member{name: "a", t: chainStep1Done, edit: func(c *clusterv1.Cluster) {
			c.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterTopologyReconciledCondition, Status: metav1.ConditionFalse, Reason: clusterv1.ClusterTopologyReconciledFailedReason,
				Message: `failed to patch MachineDeployment demo/c1-md-0: machinedeployments.cluster.x-k8s.io "c1-md-0" is forbidden: ValidatingAdmissionPolicy 'freeze' with binding 'freeze' denied request: frozen`}}
		}}, verdict: status.PhaseProgressing, state: v1alpha1.ClusterRefused,
			reason: `failed to patch MachineDeployment demo/c1-md-0: machinedeployments.cluster.x-k8s.io "c1-md-0" is forbidden: ValidatingAdmissionPolicy 'freeze' with binding 'freeze' denied request: frozen`, final: true},
		{name: "a webhook that could not be called is not a refusal", m: member{name: "a", t: chainStep1Done, edit: func(c *clusterv1.Cluster) {
			c.Status.Conditions = []metav1.Condition{{Type: clusterv1.ClusterTopologyReconciledCondition, Status: metav1.ConditionFalse, Reason: clusterv1.ClusterTopologyReconciledFailedReason,
				Message: `failed to patch KubeadmControlPlane demo/c1-control-plane: Internal error occurred: failed calling webhook "validate.kubeadmcontrolplane.rollout-guard.io": connection refused`}}
		}}, verdict: status.PhaseProgressing, state: v1alpha1.ClusterRolling,
			reason: "upgrading to v1.35.0: waiting for the topology controller to start control plane v1.35.0; then workers v1.35.0"},
		{name: "an upgrade in progress is not a refusal", m: member{name: "a", t: chainStep1Rolling}, verdict: status.PhaseProgressing, state: v1alpha1.ClusterRolling,
			reason: "upgrading to v1.35.0: control plane v1.34.2 rolling out; then control plane v1.35.0, workers v1.35.0; control plane: 2/3 machines up to date, 1 old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, r := tc.m.evaluate(t)
			fc := status.FleetStateOf(c, r, status.StatusVerdict{Phase: tc.verdict}, 10*time.Minute)
			assert.Equal(t, tc.state, fc.State)
			assert.Equal(t, tc.reason, fc.Reason)
			assert.Equal(t, tc.final, fc.Final)
			assert.Equal(t, "demo/quick-start", fc.Class)
		})
	}
}

// fleetOf is a fleet of n clusters named prefix-1..n in state, reason.
func fleetOf(prefix string, n int, state, reason string) []status.FleetCluster {
	var out []status.FleetCluster
	for i := 1; i <= n; i++ {
		out = append(out, status.FleetCluster{Namespace: topoNS, Name: fmt.Sprintf("%s-%d", prefix, i), State: state, Reason: reason,
			Final: state != v1alpha1.ClusterRolling})
	}
	return out
}

// TestGroupFleet: worst first, by name within a state; the totals; the
// fleet is final when every cluster is.
func TestGroupFleet(t *testing.T) {
	in := append(append(append(fleetOf("ok", 2, v1alpha1.ClusterUpToDate, ""), fleetOf("roll", 1, v1alpha1.ClusterRolling, "r")...),
		fleetOf("stuck", 1, v1alpha1.ClusterStalled, "s")...), fleetOf("no", 1, v1alpha1.ClusterRefused, "n")...)
	in = append(in, status.FleetCluster{Namespace: "a-first", Name: "zz", State: v1alpha1.ClusterUpToDate, Final: true},
		status.FleetCluster{Namespace: topoNS, Name: "hold", State: v1alpha1.ClusterPaused, Final: true})
	r := status.GroupFleet("clusterclass/quick-start", true, in)
	var order []string
	for _, c := range r.Clusters {
		order = append(order, r.DisplayName(c))
	}
	assert.Equal(t, []string{"demo/no-1", "demo/stuck-1", "demo/hold", "demo/roll-1", "a-first/zz", "demo/ok-1", "demo/ok-2"}, order)
	assert.Equal(t, status.FleetTotals{Clusters: 7, Refused: 1, Stalled: 1, Paused: 1, Rolling: 1, UpToDate: 3}, r.Totals)
	assert.Equal(t, "7 clusters: 1 refused, 1 stalled, 1 paused, 1 rolling, 3 up to date", r.Totals.String())
	assert.Equal(t, v1alpha1.ClusterRefused, r.Worst())
	assert.False(t, r.Final(), "a cluster is still rolling")

	done := status.GroupFleet("cluster -l env=prod", false, fleetOf("ok", 3, v1alpha1.ClusterUpToDate, ""))
	assert.True(t, done.Final())
	assert.Equal(t, v1alpha1.ClusterUpToDate, done.Worst())
	assert.Equal(t, "3 clusters: 3 up to date", done.Totals.String())
	assert.Equal(t, "ok-1", done.DisplayName(done.Clusters[0]))
	assert.Equal(t, "0 clusters", status.GroupFleet("cluster -A", true, nil).Totals.String())
}

// hundred is a fleet of 100 clusters: 2 refused, 1 stalled, 1 paused, 4
// rolling and 92 up to date.
func hundred() status.FleetReport {
	var in []status.FleetCluster
	in = append(in, fleetOf("eu", 92, v1alpha1.ClusterUpToDate, "")...)
	in = append(in, fleetOf("us", 4, v1alpha1.ClusterRolling, "workers us-md-0: 1/3 machines up to date, 2 old")...)
	in = append(in, fleetOf("ap", 2, v1alpha1.ClusterRefused, `failed to patch KubeadmControlPlane demo/ap-control-plane: admission webhook "validate.kubeadmcontrolplane.rollout-guard.io" denied the request: etcd 3.6 -> 3.5 is a downgrade [rule EtcdDowngrade]`)...)
	in = append(in, fleetOf("sa", 1, v1alpha1.ClusterStalled, "no progress for 10m0s: control plane: 2/3 machines up to date, 1 old")...)
	in = append(in, fleetOf("me", 1, v1alpha1.ClusterPaused, "spec.paused is true")...)
	return status.GroupFleet("clusterclass/quick-start", false, in)
}

// TestRenderFleet pins the grouped view: at 100 clusters the 92 up to
// date are one line; a small fleet lists each; a short terminal cuts the
// view and counts what it left out; no line exceeds the width.
func TestRenderFleet(t *testing.T) {
	golden(t, "status-fleet-100.txt", strings.Join(status.RenderFleet(hundred(), "", 0, 0), "\n")+"\n")
	small := status.GroupFleet("clusterclass/demo-class", false, append(fleetOf("demo-cc", 2, v1alpha1.ClusterUpToDate, ""),
		fleetOf("demo-cc-x", 1, v1alpha1.ClusterRolling, "workers demo-cc-x-1-md-0: 0/1 machines up to date, 1 old")...))
	golden(t, "status-fleet-small.txt", strings.Join(status.RenderFleet(small, "clusterclass/demo-class  elapsed 12s", 0, 0), "\n")+"\n")

	cut := status.RenderFleet(hundred(), "", 60, 8)
	assert.Len(t, cut, 7)
	assert.Equal(t, "  ... 9 more lines", cut[6])
	for _, l := range cut {
		assert.LessOrEqual(t, len([]rune(l)), 60, l)
	}
}

// TestFleetJSON: each cluster's ClusterRolloutStatus and the fleet's
// FleetRolloutStatus, versioned.
func TestFleetJSON(t *testing.T) {
	workerRolling := chainDone
	workerRolling.pools = []topoPool{{name: "md-0", version: "v1.35.0", machines: []string{"v1.34.2", "v1.35.0"}}}
	c, r := member{name: "a", t: workerRolling}.evaluate(t)
	fc := status.FleetStateOf(c, r, status.StatusVerdict{Phase: status.PhaseProgressing}, time.Minute)
	data, err := json.Marshal(status.ClusterStatusOf(fc, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)))
	require.NoError(t, err)
	assert.JSONEq(t, `{"apiVersion":"rollout.rollout-guard.io/v1alpha1","kind":"ClusterRolloutStatus","time":"2026-12-01T12:00:00Z",
		"cluster":{"namespace":"demo","name":"c1"},"clusterClass":"demo/quick-start","state":"Rolling","final":false,
		"reason":"upgrading to v1.35.0: workers v1.35.0 rolling out, 0 of 1 pool done; workers c1-md-0: 1/2 machines up to date, 1 old","version":"v1.35.0",
		"machines":{"desired":5,"upToDate":4,"available":5,"old":1},
		"rolling":[{"object":"machinedeployment/c1-md-0","part":"workers","machines":{"desired":2,"upToDate":1,"available":2,"old":1}}]}`, string(data))

	data, err = json.Marshal(status.FleetStatusOf(hundred(), time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)))
	require.NoError(t, err)
	assert.JSONEq(t, `{"apiVersion":"rollout.rollout-guard.io/v1alpha1","kind":"FleetRolloutStatus","time":"2026-12-01T12:00:00Z",
		"fleet":"clusterclass/quick-start","clusters":100,"refused":2,"stalled":1,"paused":1,"rolling":4,"upToDate":92,"done":false}`, string(data))
}

// classObject is ClusterClass quick-start in the tests' namespace.
func classObject() *clusterv1.ClusterClass {
	cc := &clusterv1.ClusterClass{}
	cc.Namespace, cc.Name = topoNS, "quick-start"
	return cc
}

// fleetClient holds the ClusterClass and the members' objects.
func fleetClient(t *testing.T, members ...member) client.WithWatch {
	objs := []client.Object{classObject()}
	for _, m := range members {
		objs = append(objs, m.objects(t)...)
	}
	return newFakeClient(objs...)
}

// TestStatusFleetOnce: --watch=false prints the grouped view; exit 0 only
// when every cluster of the class is rolled out, 9 otherwise; -l narrows
// the fleet; a Cluster of another class is not in it.
func TestStatusFleetOnce(t *testing.T) {
	now := time.Now()
	other := func(c *clusterv1.Cluster) { c.Spec.Topology.ClassRef.Name = "other-class" }
	labelled := func(c *clusterv1.Cluster) { c.Labels = map[string]string{"env": "prod"} }
	cl := fleetClient(t, member{name: "a", t: chainDone}, member{name: "b", t: chainStep2Rolling, edit: labelled},
		member{name: "c", t: chainDone, edit: refused}, member{name: "d", t: chainStep1Rolling, edit: other})

	out, errOut, code := runFake(t, cl, now, "status", "clusterclass/quick-start", "--watch=false")
	assert.Equal(t, ExitNotRolledOut, code)
	golden(t, "status-fleet-once.txt", out)
	assert.Equal(t, "clusterclass/quick-start is not rolled out: 3 clusters: 1 refused, 1 rolling, 1 up to date\n", errOut)

	out, errOut, code = runFake(t, cl, now, "status", "cc/quick-start", "-l", "env!=prod", "--watch=false")
	assert.Equal(t, ExitNotRolledOut, code, errOut)
	assert.Equal(t, `clusterclass/quick-start: 2 clusters: 1 refused, 1 up to date
refused (1)
  c  `+strings.ReplaceAll(refusal, "NAME", "c")+`
up to date (1)
  a
`, out)

	out, errOut, code = runFake(t, cl, now, "status", "cluster", "-l", "env=prod", "--watch=false", "-o", "json")
	assert.Equal(t, ExitNotRolledOut, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	assert.Contains(t, lines[0], `"kind":"ClusterRolloutStatus"`)
	assert.Contains(t, lines[0], `"cluster":{"namespace":"demo","name":"b"},"clusterClass":"demo/quick-start","state":"Rolling"`)
	assert.Contains(t, lines[1], `"kind":"FleetRolloutStatus"`)
	assert.Contains(t, lines[1], `"fleet":"cluster -l env=prod","clusters":1,"refused":0,"stalled":0,"paused":0,"rolling":1,"upToDate":0,"done":false`)

	out, errOut, code = runFake(t, fleetClient(t, member{name: "a", t: chainDone}, member{name: "b", t: chainDone}), now, "status", "clusterclass/quick-start", "--watch=false")
	assert.Equal(t, core.ExitOK, code, errOut)
	assert.Equal(t, "clusterclass/quick-start: 2 clusters: 2 up to date\nup to date (2)\n  a\n  b\n", out)
}

// TestStatusFleetWatch: watching, status ends when every cluster has its
// verdict, with the worst: 0 once all are rolled out, 6 when one was
// refused, 4 when one is paused, 3 when one stalled.
func TestStatusFleetWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The last cluster of a class rolls out: exit 0 then, not before.
	cl := fleetClient(t, member{name: "a", t: chainDone}, member{name: "b", t: chainWorkersRolling})
	r := startFake(ctx, cl, topoNS, time.Now(), "status", "clusterclass/quick-start", "--timeout", "25s")
	waitFor(t, r, "clusterclass/quick-start: 2 clusters: 1 rolling, 1 up to date")
	select {
	case code := <-r.done:
		t.Fatalf("status ended (exit %d) with a cluster rolling:\n%s%s", code, r.out, r.errOut)
	case <-time.After(300 * time.Millisecond):
	}
	moveMember(ctx, t, cl, member{name: "b", t: chainDone})
	assert.Equal(t, core.ExitOK, exitOf(t, ctx, r), "stderr: %s", r.errOut)
	assert.Contains(t, r.out.String(), "b: up to date\nclusterclass/quick-start: 2 clusters: 2 up to date\n")
	assert.True(t, strings.HasSuffix(r.out.String(), "clusterclass/quick-start: 2 clusters successfully rolled out\n"), r.out.String())

	for _, tc := range []struct {
		name   string
		m      member
		args   []string
		code   int
		stderr string
	}{
		{name: "refused", m: member{name: "b", t: chainStep1Done, edit: refused}, code: core.ExitRefused,
			stderr: "clusterclass/quick-start: 1 of 2 clusters refused: the topology controller's write was refused by admission (b)"},
		{name: "paused", m: member{name: "b", t: chainStep1Done, edit: func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) }}, code: status.ExitPaused,
			stderr: "clusterclass/quick-start: 1 of 2 clusters paused (b): they will not roll out until resumed"},
		{name: "stalled", m: member{name: "b", t: chainWorkersRolling}, args: []string{"--progress-deadline", "200ms"}, code: status.ExitStalled,
			stderr: "clusterclass/quick-start: 1 of 2 clusters made no progress for 200ms (--progress-deadline): b"},
		{name: "timeout", m: member{name: "b", t: chainWorkersRolling}, args: []string{"--timeout", "300ms"}, code: status.ExitTimeout,
			stderr: "timed out waiting for clusterclass/quick-start to roll out (--timeout 300ms); last state: 2 clusters: 1 rolling, 1 up to date"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := fleetClient(t, member{name: "a", t: chainDone}, tc.m)
			_, errOut, code := runFake(t, cl, time.Now(), append([]string{"status", "clusterclass/quick-start"}, tc.args...)...)
			assert.Equal(t, tc.code, code, errOut)
			assert.Contains(t, errOut, tc.stderr)
		})
	}
}

// moveMember brings the objects of m's cluster in cl to their state in m:
// updates, creates the new machines, deletes its machines gone.
func moveMember(ctx context.Context, t *testing.T, cl client.Client, m member) {
	t.Helper()
	keep := map[string]bool{}
	for _, obj := range m.objects(t) {
		keep[obj.GetName()] = true
		cur := obj.DeepCopyObject().(client.Object)
		if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
			require.NoError(t, client.IgnoreNotFound(err))
			require.NoError(t, cl.Create(ctx, obj))
			continue
		}
		obj.SetResourceVersion(cur.GetResourceVersion())
		require.NoError(t, cl.Update(ctx, obj))
	}
	machines := &clusterv1.MachineList{}
	require.NoError(t, cl.List(ctx, machines, client.InNamespace(topoNS), client.MatchingLabels{clusterv1.ClusterNameLabel: m.name}))
	for i := range machines.Items {
		if !keep[machines.Items[i].Name] {
			require.NoError(t, cl.Delete(ctx, &machines.Items[i]))
		}
	}
}

// TestStatusFleetErrors: what cannot be a fleet is refused with the way
// out; a class without clusters is an error, not a success.
func TestStatusFleetErrors(t *testing.T) {
	now := time.Now()
	cl := fleetClient(t, member{name: "a", t: chainDone})
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"status", "clusterclass/missing"}, `ClusterClass "missing" not found in namespace "demo": check the name and the namespace (-n), e.g. with kubectl get clusterclasses.cluster.x-k8s.io -n demo`},
		{[]string{"status", "clusterclass/quick-start", "-l", "env=prod"}, "no Cluster in namespace demo uses ClusterClass demo/quick-start (spec.topology.classRef) matching -l env=prod: nothing to watch; check -n and -l, or look in every namespace with -A"},
		{[]string{"status", "cluster", "-l", "env=prod", "-A"}, "no Cluster in any namespace matching -l env=prod: nothing to watch; check -l and the clusters' labels (kubectl get clusters -A --show-labels)"},
		{[]string{"status", "cluster", "-l", "env in (a"}, `-l "env in (a" is not a label selector`},
		{[]string{"status", "md", "-l", "env=prod"}, "status md -l/-A: status selects Clusters only; write status cluster -l SELECTOR (or -A), or status clusterclass/NAME for a class's clusters"},
		{[]string{"status", "cluster/a", "-A"}, "-l/--selector and -A/--all-namespaces select a fleet of Clusters, not cluster/a"},
		{[]string{"status", "clusterclass/quick-start", "--revision", "2"}, "--revision applies to one machinedeployment/NAME or kubeadmcontrolplane/NAME, not to a fleet of clusters"},
		{[]string{"restart", "clusterclass/quick-start"}, "restart does not take clusterclass objects: clusterclass works with status, history, undo"},
		{[]string{"pause", "clusterclass", "-l", "a=b"}, "pause does not take clusterclass objects"},
		{[]string{"clusterclass/quick-start", "--version", "v1.35.0"}, "rollout does not take clusterclass objects"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, code := runFake(t, cl, now, tc.args...)
			assert.Equal(t, core.ExitError, code, errOut)
			assert.Contains(t, errOut, tc.stderr)
		})
	}
}
