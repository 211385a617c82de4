package rollout

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// statusMD is a MachineDeployment of 3 replicas whose status counts are
// given, at generation 2.
func statusMD(observed int64, current, upToDate, available int32, rollingOut bool) *clusterv1.MachineDeployment {
	md := &clusterv1.MachineDeployment{}
	md.Name, md.Namespace, md.Generation = "md-0", "default", 2
	md.Annotations = map[string]string{clusterv1.RevisionAnnotation: "2"}
	md.Spec.Replicas = ptr.To[int32](3)
	md.Status.ObservedGeneration = observed
	md.Status.Replicas, md.Status.UpToDateReplicas, md.Status.AvailableReplicas, md.Status.ReadyReplicas = &current, &upToDate, &available, &available
	status := metav1.ConditionFalse
	if rollingOut {
		status = metav1.ConditionTrue
	}
	md.Status.Conditions = []metav1.Condition{{Type: clusterv1.RollingOutCondition, Status: status, Reason: "x"}}
	return md
}

// statusMachine is a Machine; reason/message go to a false Ready condition.
func statusMachine(name string, ready, upToDate, deleting bool, reason, message string) clusterv1.Machine {
	m := clusterv1.Machine{}
	m.Name = name
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet", Name: newSetName, Controller: ptr.To(true)}}
	m.Status.Phase = "Running"
	cond := func(t string, ok bool) metav1.Condition {
		c := metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t}
		if !ok {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, reason, message
		}
		return c
	}
	m.Status.Conditions = []metav1.Condition{cond(clusterv1.MachineReadyCondition, ready), cond(clusterv1.MachineUpToDateCondition, upToDate)}
	if !ready {
		m.Status.Phase = "Provisioning"
	}
	if deleting {
		m.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	}
	return m
}

// newSetName is the current MachineSet of statusMD (revision 2).
const newSetName = "md-0-new"

// machineSet is a MachineSet of md-0 at revision rev that wants replicas
// and has current of them, all up to date and available.
func machineSet(name, rev string, replicas, current int32) clusterv1.MachineSet {
	ms := clusterv1.MachineSet{}
	ms.Name, ms.Generation = name, 1
	ms.Annotations = map[string]string{clusterv1.RevisionAnnotation: rev}
	ms.Spec.Replicas = &replicas
	ms.Status.ObservedGeneration = 1
	ms.Status.Replicas, ms.Status.UpToDateReplicas, ms.Status.ReadyReplicas, ms.Status.AvailableReplicas = &current, &current, &current, &current
	return ms
}

// settled is the MachineSets of a finished rollout of statusMD.
func settled() []clusterv1.MachineSet {
	return []clusterv1.MachineSet{machineSet(newSetName, "2", 3, 3), machineSet("md-0-old", "1", 0, 0)}
}

func goodMachines(n int) []clusterv1.Machine {
	var ms []clusterv1.Machine
	for i := range n {
		ms = append(ms, statusMachine(fmt.Sprintf("m-%d", i), true, true, false, "", ""))
	}
	return ms
}

func TestEvaluateStatusComplete(t *testing.T) {
	for _, tc := range []struct {
		name     string
		md       *clusterv1.MachineDeployment
		machines []clusterv1.Machine
		complete bool
	}{
		{"complete", statusMD(2, 3, 3, 3, false), goodMachines(3), true},
		{"generation not observed", statusMD(1, 3, 3, 3, false), goodMachines(3), false},
		{"not all up to date", statusMD(2, 3, 2, 3, false), goodMachines(3), false},
		{"not all available", statusMD(2, 3, 3, 2, false), goodMachines(3), false},
		{"extra replica", statusMD(2, 4, 3, 3, false), goodMachines(3), false},
		{"rolling out", statusMD(2, 3, 3, 3, true), goodMachines(3), false},
		{"too few machines", statusMD(2, 3, 3, 3, false), goodMachines(2), false},
		{"too many machines", statusMD(2, 3, 3, 3, false), goodMachines(4), false},
		{"machine not ready", statusMD(2, 3, 3, 3, false), append(goodMachines(2), statusMachine("x", false, true, false, "NodeNotReady", "")), false},
		{"machine not up to date", statusMD(2, 3, 3, 3, false), append(goodMachines(2), statusMachine("x", true, false, false, "", "")), false},
		{"machine deleting", statusMD(2, 3, 3, 3, false), append(goodMachines(2), statusMachine("x", true, true, true, "", "")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := EvaluateStatus(tc.md, tc.machines, settled())
			assert.Equal(t, tc.complete, s.Complete)
		})
	}

	// A missing RollingOut condition counts as not rolling out; nil counts as 0.
	md := statusMD(2, 3, 3, 3, false)
	md.Status.Conditions = nil
	assert.True(t, EvaluateStatus(md, goodMachines(3), settled()).Complete, "no RollingOut condition")
	md.Status.AvailableReplicas = nil
	assert.False(t, EvaluateStatus(md, goodMachines(3), settled()).Complete, "availableReplicas unset")
}

func TestEvaluateStatusKubeadmControlPlane(t *testing.T) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	kcp.Name, kcp.Generation = "cp", 1
	kcp.Spec.Replicas = ptr.To[int32](1)
	kcp.Status.ObservedGeneration = 1
	kcp.Status.Replicas, kcp.Status.UpToDateReplicas, kcp.Status.AvailableReplicas = ptr.To[int32](1), ptr.To[int32](1), ptr.To[int32](1)
	s := EvaluateStatus(kcp, goodMachines(1), nil)
	assert.True(t, s.Complete)
	assert.Equal(t, "kubeadmcontrolplane/cp", s.Object)

	kcp.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	assert.Equal(t, "annotation cluster.x-k8s.io/paused", EvaluateStatus(kcp, nil, nil).Paused)
}

func TestStatusSummaryAndMachineLines(t *testing.T) {
	md := statusMD(2, 4, 1, 2, true)
	ms := []clusterv1.Machine{
		statusMachine("a-old", true, false, false, "", ""),
		statusMachine("b-old", true, false, true, "", ""),
		statusMachine("c-new", true, true, false, "", ""),
		statusMachine("d-new", false, true, false, "NotReady", "* InfrastructureReady: waiting\n* NodeReady: no node yet"),
	}
	s := EvaluateStatus(md, ms, nil)
	assert.Equal(t, "1 of 3 machines up to date, 2 available (2 old machines pending deletion, 4 machines exist, rolling out)", s.Summary())
	assert.Equal(t, "machine d-new: Provisioning, not ready: NotReady: * InfrastructureReady: waiting; * NodeReady: no node yet", s.Machines[3].line())
	assert.Equal(t, "machine b-old: Running, being deleted", s.Machines[1].line())
	assert.Equal(t, "machine d-new: Provisioning, not ready: NotReady: * InfrastructureReady: * VMProvisioned: waiting", EvaluateStatus(md, []clusterv1.Machine{statusMachine("d-new", false, true, false, "NotReady", "* InfrastructureReady:\n  * VMProvisioned: waiting")}, nil).Machines[0].line())

	// A new machine without an UpToDate condition yet is not old.
	fresh := clusterv1.Machine{}
	fresh.Name = "e-new"
	assert.Equal(t, "2 of 3 machines up to date, 2 available (1 machine exists, rolling out)", EvaluateStatus(statusMD(2, 1, 2, 2, true), []clusterv1.Machine{fresh}, nil).Summary())

	assert.Equal(t, "waiting for generation 2 to be observed", EvaluateStatus(statusMD(1, 3, 3, 3, false), goodMachines(3), settled()).Summary())
	md = statusMD(2, 3, 3, 3, false)
	md.Spec.Paused = ptr.To(true)
	assert.Equal(t, "paused (spec.paused is true)", EvaluateStatus(md, goodMachines(3), settled()).Summary())
}

func TestStatusTracker(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	complete := EvaluateStatus(statusMD(2, 3, 3, 3, false), goodMachines(3), settled())
	rolling := EvaluateStatus(statusMD(2, 3, 1, 3, true), goodMachines(3), settled())
	rolling2 := EvaluateStatus(statusMD(2, 3, 2, 3, true), goodMachines(3), settled())
	paused := complete
	paused.Paused = "spec.paused is true"

	type step struct {
		at    time.Duration
		s     StatusReport
		phase string
		wake  time.Duration // -1: no wake
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"one early complete read is not done", []step{
			{0, complete, PhaseConfirming, 15 * time.Second},
		}},
		{"done after the grace period", []step{
			{0, rolling, PhaseProgressing, 10 * time.Minute},
			{5 * time.Second, complete, PhaseConfirming, 20 * time.Second},
			{19 * time.Second, complete, PhaseConfirming, 20 * time.Second},
			{20 * time.Second, complete, PhaseRolledOut, -1},
		}},
		{"a relapse restarts the grace period", []step{
			{0, complete, PhaseConfirming, 15 * time.Second},
			{10 * time.Second, rolling, PhaseProgressing, 10*time.Minute + 10*time.Second},
			{12 * time.Second, complete, PhaseConfirming, 27 * time.Second},
			{20 * time.Second, complete, PhaseConfirming, 27 * time.Second},
			{27 * time.Second, complete, PhaseRolledOut, -1},
		}},
		{"paused at once", []step{
			{0, paused, PhasePaused, -1},
		}},
		{"stalled when nothing moves", []step{
			{0, rolling, PhaseProgressing, 10 * time.Minute},
			{9 * time.Minute, rolling, PhaseProgressing, 10 * time.Minute},
			{10 * time.Minute, rolling, PhaseStalled, -1},
		}},
		{"progress pushes the deadline", []step{
			{0, rolling, PhaseProgressing, 10 * time.Minute},
			{9 * time.Minute, rolling2, PhaseProgressing, 19 * time.Minute},
			{18 * time.Minute, rolling2, PhaseProgressing, 19 * time.Minute},
			{19 * time.Minute, rolling2, PhaseStalled, -1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &StatusTracker{Grace: 15 * time.Second, ProgressDeadline: 10 * time.Minute}
			for i, st := range tc.steps {
				v := tr.Observe(st.s, t0.Add(st.at))
				require.Equal(t, st.phase, v.Phase, "step %d", i)
				if st.wake < 0 {
					assert.True(t, v.Wake.IsZero(), "step %d: wake %s", i, v.Wake)
				} else {
					assert.Equal(t, t0.Add(st.wake), v.Wake, "step %d", i)
				}
			}
		})
	}
}

func TestStatusPrinterPrintsChangesOnly(t *testing.T) {
	var out bytes.Buffer
	p := &statusPrinter{out: &out, last: map[string]string{}}
	now := time.Unix(0, 0)
	notReady := EvaluateStatus(statusMD(2, 3, 2, 2, true), append(goodMachines(2), statusMachine("x", false, true, false, "Boot", "booting")), settled())
	require.NoError(t, p.print(notReady, now))
	require.NoError(t, p.print(notReady, now))
	// A new message alone does not print the machine again.
	notReady.Machines[2].Message = "still booting"
	require.NoError(t, p.print(notReady, now))
	done := EvaluateStatus(statusMD(2, 3, 3, 3, false), goodMachines(3), settled())
	done.Phase = PhaseConfirming
	require.NoError(t, p.print(done, now))
	require.NoError(t, p.print(done, now))
	assert.Equal(t, `machinedeployment/md-0: 2 of 3 machines up to date, 2 available (rolling out)
  machine x: Provisioning, not ready: Boot: booting
machinedeployment/md-0: 3 of 3 machines up to date, 3 available (complete, confirming)
`, out.String())

	out.Reset()
	p = &statusPrinter{out: &out, json: true, last: map[string]string{}}
	done.Phase, done.Done = PhaseRolledOut, true
	require.NoError(t, p.print(done, now))
	require.NoError(t, p.print(done, now.Add(time.Second)))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 1)
	assert.Equal(t, `{"time":"1970-01-01T00:00:00Z","object":"machinedeployment/md-0","phase":"RolledOut","replicas":3,"upToDate":3,"available":3,"ready":3,"machines":[{"name":"m-0","phase":"Running","upToDate":true,"ready":true,"deleting":false,"reason":"","message":""},{"name":"m-1","phase":"Running","upToDate":true,"ready":true,"deleting":false,"reason":"","message":""},{"name":"m-2","phase":"Running","upToDate":true,"ready":true,"deleting":false,"reason":"","message":""}],"done":true}`, lines[0])
}
