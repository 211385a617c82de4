package rollout

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/status"
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
			s := status.EvaluateStatus(tc.md, tc.machines, settled())
			assert.Equal(t, tc.complete, s.Complete)
		})
	}

	// A missing RollingOut condition counts as not rolling out; nil counts as 0.
	md := statusMD(2, 3, 3, 3, false)
	md.Status.Conditions = nil
	assert.True(t, status.EvaluateStatus(md, goodMachines(3), settled()).Complete, "no RollingOut condition")
	md.Status.AvailableReplicas = nil
	assert.False(t, status.EvaluateStatus(md, goodMachines(3), settled()).Complete, "availableReplicas unset")
}

func TestEvaluateStatusKubeadmControlPlane(t *testing.T) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	kcp.Name, kcp.Generation = "cp", 1
	kcp.Spec.Replicas = ptr.To[int32](1)
	kcp.Status.ObservedGeneration = 1
	kcp.Status.Replicas, kcp.Status.UpToDateReplicas, kcp.Status.AvailableReplicas = ptr.To[int32](1), ptr.To[int32](1), ptr.To[int32](1)
	s := status.EvaluateStatus(kcp, goodMachines(1), nil)
	assert.True(t, s.Complete)
	assert.Equal(t, "kubeadmcontrolplane/cp", s.Object)

	// A restart: machines created before spec.rollout.after are old even
	// while every count and condition still says complete (the
	// controller has not acted on it yet); one created in that second is
	// not (Cluster API compares with Before).
	ms := goodMachines(1)
	created := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ms[0].CreationTimestamp = metav1.NewTime(created)
	for _, tc := range []struct {
		name       string
		after, now time.Time
		complete   bool
	}{
		{"restarted after the machine was created", created.Add(time.Second), created.Add(time.Second), false},
		{"restart ahead of this clock by less than the skew", created.Add(time.Second), created.Add(-30 * time.Second), false},
		{"machine created in the second of rollout.after", created, created.Add(time.Minute), true},
		{"restart scheduled for later", created.Add(time.Hour), created.Add(time.Second), true},
	} {
		kcp.Spec.Rollout.After = metav1.NewTime(tc.after)
		s = status.EvaluateStatusAt(kcp, ms, nil, tc.now)
		assert.Equal(t, tc.complete, s.Complete, tc.name)
		if !tc.complete {
			assert.Equal(t, "1 of 1 machines up to date, 1 available (1 old machine pending deletion)", s.Summary(), tc.name)
		}
	}
	kcp.Spec.Rollout.After = metav1.Time{}

	kcp.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	assert.Equal(t, "annotation cluster.x-k8s.io/paused", status.EvaluateStatus(kcp, nil, nil).Paused)
}

func TestStatusSummaryAndMachineLines(t *testing.T) {
	md := statusMD(2, 4, 1, 2, true)
	ms := []clusterv1.Machine{
		statusMachine("a-old", true, false, false, "", ""),
		statusMachine("b-old", true, false, true, "", ""),
		statusMachine("c-new", true, true, false, "", ""),
		statusMachine("d-new", false, true, false, "NotReady", "* InfrastructureReady: waiting\n* NodeReady: no node yet"),
	}
	s := status.EvaluateStatus(md, ms, nil)
	assert.Equal(t, "1 of 3 machines up to date, 2 available (2 old machines pending deletion, 4 machines exist, rolling out)", s.Summary())
	assert.Equal(t, "machine d-new: Provisioning, not ready: NotReady: * InfrastructureReady: waiting; * NodeReady: no node yet", s.Machines[3].Line())
	assert.Equal(t, "machine b-old: Running, being deleted", s.Machines[1].Line())
	assert.Equal(t, "machine d-new: Provisioning, not ready: NotReady: * InfrastructureReady: * VMProvisioned: waiting", status.EvaluateStatus(md, []clusterv1.Machine{statusMachine("d-new", false, true, false, "NotReady", "* InfrastructureReady:\n  * VMProvisioned: waiting")}, nil).Machines[0].Line())

	// A new machine without an UpToDate condition yet is not old.
	fresh := clusterv1.Machine{}
	fresh.Name = "e-new"
	assert.Equal(t, "2 of 3 machines up to date, 2 available (1 machine exists, rolling out)", status.EvaluateStatus(statusMD(2, 1, 2, 2, true), []clusterv1.Machine{fresh}, nil).Summary())

	assert.Equal(t, "waiting for generation 2 to be observed", status.EvaluateStatus(statusMD(1, 3, 3, 3, false), goodMachines(3), settled()).Summary())
	md = statusMD(2, 3, 3, 3, false)
	md.Spec.Paused = ptr.To(true)
	assert.Equal(t, "paused (spec.paused is true)", status.EvaluateStatus(md, goodMachines(3), settled()).Summary())
}

func TestStatusTracker(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	complete := status.EvaluateStatus(statusMD(2, 3, 3, 3, false), goodMachines(3), settled())
	rolling := status.EvaluateStatus(statusMD(2, 3, 1, 3, true), goodMachines(3), settled())
	rolling2 := status.EvaluateStatus(statusMD(2, 3, 2, 3, true), goodMachines(3), settled())
	paused := complete
	paused.Paused = "spec.paused is true"

	type step struct {
		at    time.Duration
		s     status.StatusReport
		phase string
		wake  time.Duration // -1: no wake
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"one early complete read is not done", []step{
			{0, complete, status.PhaseConfirming, 15 * time.Second},
		}},
		{"done after the grace period", []step{
			{0, rolling, status.PhaseProgressing, 10 * time.Minute},
			{5 * time.Second, complete, status.PhaseConfirming, 20 * time.Second},
			{19 * time.Second, complete, status.PhaseConfirming, 20 * time.Second},
			{20 * time.Second, complete, status.PhaseRolledOut, -1},
		}},
		{"a relapse restarts the grace period", []step{
			{0, complete, status.PhaseConfirming, 15 * time.Second},
			{10 * time.Second, rolling, status.PhaseProgressing, 10*time.Minute + 10*time.Second},
			{12 * time.Second, complete, status.PhaseConfirming, 27 * time.Second},
			{20 * time.Second, complete, status.PhaseConfirming, 27 * time.Second},
			{27 * time.Second, complete, status.PhaseRolledOut, -1},
		}},
		{"paused at once", []step{
			{0, paused, status.PhasePaused, -1},
		}},
		{"stalled when nothing moves", []step{
			{0, rolling, status.PhaseProgressing, 10 * time.Minute},
			{9 * time.Minute, rolling, status.PhaseProgressing, 10 * time.Minute},
			{10 * time.Minute, rolling, status.PhaseStalled, -1},
		}},
		{"progress pushes the deadline", []step{
			{0, rolling, status.PhaseProgressing, 10 * time.Minute},
			{9 * time.Minute, rolling2, status.PhaseProgressing, 19 * time.Minute},
			{18 * time.Minute, rolling2, status.PhaseProgressing, 19 * time.Minute},
			{19 * time.Minute, rolling2, status.PhaseStalled, -1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &status.StatusTracker{Grace: 15 * time.Second, ProgressDeadline: 10 * time.Minute}
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
	p := &status.StatusPrinter{Out: &out, Last: map[string]string{}}
	now := time.Unix(0, 0)
	notReady := status.EvaluateStatus(statusMD(2, 3, 2, 2, true), append(goodMachines(2), statusMachine("x", false, true, false, "Boot", "booting")), settled())
	require.NoError(t, p.Print(notReady, now))
	require.NoError(t, p.Print(notReady, now))
	// A new message alone does not print the machine again.
	notReady.Machines[2].Message = "still booting"
	require.NoError(t, p.Print(notReady, now))
	done := status.EvaluateStatus(statusMD(2, 3, 3, 3, false), goodMachines(3), settled())
	done.Phase = status.PhaseConfirming
	require.NoError(t, p.Print(done, now))
	require.NoError(t, p.Print(done, now))
	assert.Equal(t, `machinedeployment/md-0: 2 of 3 machines up to date, 2 available (rolling out)
  machine x: Provisioning, not ready: Boot: booting
machinedeployment/md-0: 3 of 3 machines up to date, 3 available (complete, confirming)
`, out.String())

	out.Reset()
	p = &status.StatusPrinter{Out: &out, JSON: true, Last: map[string]string{}}
	done.Phase, done.Done = status.PhaseRolledOut, true
	require.NoError(t, p.Print(done, now))
	require.NoError(t, p.Print(done, now.Add(time.Second)))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 1)
	assert.Equal(t, `{"time":"1970-01-01T00:00:00Z","object":"machinedeployment/md-0","phase":"RolledOut","replicas":3,"upToDate":3,"available":3,"ready":3,"machines":[{"name":"m-0","phase":"Running","upToDate":true,"ready":true,"deleting":false,"reason":"","message":""},{"name":"m-1","phase":"Running","upToDate":true,"ready":true,"deleting":false,"reason":"","message":""},{"name":"m-2","phase":"Running","upToDate":true,"ready":true,"deleting":false,"reason":"","message":""}],"done":true}`, lines[0])
}

// TestEvaluateStatusMachineSets: a MachineDeployment is complete only when
// its current MachineSet (the one with the revision the controller copied
// on the MachineDeployment) holds every machine and every other MachineSet
// is empty, whatever the Machines' UpToDate conditions say.
func TestEvaluateStatusMachineSets(t *testing.T) {
	oldMachines := func(n int) []clusterv1.Machine {
		ms := goodMachines(n)
		for i := range ms {
			ms[i].OwnerReferences[0].Name = "md-0-old"
		}
		return ms
	}
	notObserved := machineSet(newSetName, "2", 3, 3)
	notObserved.Generation = 2
	for _, tc := range []struct {
		name     string
		machines []clusterv1.Machine
		sets     []clusterv1.MachineSet
		complete bool
		newSet   string
		old      int
	}{
		{"settled", goodMachines(3), settled(), true, newSetName, 0},
		{"old MachineSet deleted", goodMachines(3), []clusterv1.MachineSet{machineSet(newSetName, "2", 3, 3)}, true, newSetName, 0},
		// Just after an edit: the MachineDeployment observed it and created
		// the new MachineSet, but the old Machines' UpToDate conditions and
		// every count still describe the old template.
		{"early read: new MachineSet just created", oldMachines(3), []clusterv1.MachineSet{machineSet(newSetName, "2", 1, 0), machineSet("md-0-old", "1", 3, 3)}, false, newSetName, 3},
		{"early read: new MachineSet not seen yet", oldMachines(3), []clusterv1.MachineSet{machineSet("md-0-old", "1", 3, 3)}, false, "", 0},
		{"old MachineSet scaled down, its machine not gone", append(goodMachines(3)[:2], oldMachines(1)...), []clusterv1.MachineSet{machineSet(newSetName, "2", 3, 2), machineSet("md-0-old", "1", 0, 1)}, false, newSetName, 1},
		{"new MachineSet spec not observed", goodMachines(3), []clusterv1.MachineSet{notObserved}, false, newSetName, 0},
		{"new MachineSet wants fewer", goodMachines(3), []clusterv1.MachineSet{machineSet(newSetName, "2", 2, 3)}, false, newSetName, 0},
		{"no MachineSets", goodMachines(3), nil, false, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := status.EvaluateStatus(statusMD(2, 3, 3, 3, false), tc.machines, tc.sets)
			assert.Equal(t, tc.complete, s.Complete, "complete")
			newSet, old := "", 0
			for _, ms := range s.MachineSets {
				if ms.New {
					newSet = ms.Name
				}
			}
			for _, m := range s.Machines {
				if m.Old {
					old++
				}
			}
			assert.Equal(t, tc.newSet, newSet, "current MachineSet")
			assert.Equal(t, tc.old, old, "old machines")
		})
	}

	// Without Cluster API's revision annotation on the MachineDeployment,
	// the current MachineSet is the only one that wants replicas.
	md := statusMD(2, 3, 3, 3, false)
	md.Annotations = nil
	assert.True(t, status.EvaluateStatus(md, goodMachines(3), settled()).Complete, "one MachineSet wants replicas")
	assert.False(t, status.EvaluateStatus(md, goodMachines(3), []clusterv1.MachineSet{machineSet(newSetName, "2", 3, 3), machineSet("md-0-old", "1", 1, 1)}).Complete, "two MachineSets want replicas")
}

func TestCheckRevision(t *testing.T) {
	withRevision := func(rev string) *clusterv1.MachineDeployment {
		md := statusMD(2, 3, 3, 3, false)
		if rev != "" {
			md.Annotations[revisions.AnnotationRevision] = rev
		}
		return md
	}
	for _, tc := range []struct {
		name    string
		rev     string
		want    int64
		waiting bool
		code    int
		err     string
	}{
		{"no --revision", "", 0, false, core.ExitOK, ""},
		{"live", "4", 4, false, core.ExitOK, ""},
		{"not live yet", "3", 4, true, core.ExitOK, ""},
		{"past it", "5", 4, false, status.ExitSuperseded, "machinedeployment/md-0 is at revision 5, past the desired revision 4: a later change superseded it, so revision 4 will not be rolled out; see rollout history machinedeployment/md-0, and wait for --revision 5 (or without --revision) instead"},
		{"no stamp", "", 4, false, core.ExitError, "cannot wait for revision 4 of machinedeployment/md-0: it has no annotation rollout-guard.io/revision; the guard stamps every MachineDeployment and KubeadmControlPlane, so check that rollout-guard is installed (rollout history machinedeployment/md-0), or drop --revision"},
		{"bad stamp", "x", 4, false, core.ExitError, `cannot wait for revision 4 of machinedeployment/md-0: its annotation rollout-guard.io/revision is "x", not a number; drop --revision`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw, err := status.CheckRevision(withRevision(tc.rev), tc.want)
			assert.Equal(t, tc.code, core.ExitCode(err), "exit code")
			if tc.err == "" {
				require.NoError(t, err)
			} else {
				require.EqualError(t, err, tc.err)
			}
			assert.Equal(t, tc.waiting, rw.Waiting, "waiting")
		})
	}

	// While waiting, the state is not complete and says so.
	o := &status.StatusOptions{Revision: 4}
	s, err := o.Evaluate(withRevision("3"), goodMachines(3), settled(), time.Now())
	require.NoError(t, err)
	assert.False(t, s.Complete)
	assert.Equal(t, "waiting for revision 4 (revision 3 is live)", s.Summary())
}

// TestStatusTrackerWithoutGrace: the default --grace 0 declares done on the
// first complete state (complete includes the MachineSet facts).
func TestStatusTrackerWithoutGrace(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := &status.StatusTracker{ProgressDeadline: time.Minute}
	rolling := status.EvaluateStatus(statusMD(2, 3, 3, 3, false), goodMachines(3), []clusterv1.MachineSet{machineSet(newSetName, "2", 3, 3), machineSet("md-0-old", "1", 0, 1)})
	assert.Equal(t, status.PhaseProgressing, tr.Observe(rolling, t0).Phase)
	assert.Equal(t, status.PhaseRolledOut, tr.Observe(status.EvaluateStatus(statusMD(2, 3, 3, 3, false), goodMachines(3), settled()), t0.Add(time.Second)).Phase)
}

func TestRenderLive(t *testing.T) {
	rolling := status.EvaluateStatus(statusMD(2, 3, 1, 2, true), []clusterv1.Machine{
		withOwner(statusMachine("md-0-new-a", true, true, false, "", ""), newSetName),
		withOwner(statusMachine("md-0-new-b", false, true, false, "NotReady", "* InfrastructureReady: DevMachine status.initialization.provisioned is false"), newSetName),
		withOwner(statusMachine("md-0-old-c", true, false, false, "NotUpToDate", "* Version v1.34.1, v1.35.1 required"), "md-0-old"),
		withOwner(statusMachine("md-0-old-d", true, false, true, "", ""), "md-0-old"),
	}, []clusterv1.MachineSet{machineSet("md-0-old", "1", 1, 2), machineSet(newSetName, "2", 3, 2)})
	rolling.Phase = status.PhaseProgressing
	rolling.Revision = "7"
	done := status.EvaluateStatus(statusMD(2, 3, 3, 3, false), goodMachines(3), settled())
	done.Phase = status.PhaseRolledOut

	kcp := &controlplanev1.KubeadmControlPlane{}
	kcp.Name, kcp.Generation = "cp", 1
	kcp.Spec.Replicas = ptr.To[int32](1)
	kcp.Status.ObservedGeneration = 1
	kcp.Status.Replicas, kcp.Status.UpToDateReplicas, kcp.Status.AvailableReplicas = ptr.To[int32](2), ptr.To[int32](0), ptr.To[int32](1)
	cp := status.EvaluateStatus(kcp, []clusterv1.Machine{statusMachine("cp-old", true, false, false, "NotUpToDate", "* Version v1.34.1, v1.35.1 required"), statusMachine("cp-new", false, true, false, "NotReady", "* EtcdMemberHealthy: waiting")}, nil)
	cp.Phase = status.PhaseStalled

	for _, tc := range []struct {
		name          string
		s             status.StatusReport
		elapsed       time.Duration
		width, height int
		want          string
	}{
		{"worker pool rolling", rolling, 75*time.Second + 300*time.Millisecond, 0, 0, `machinedeployment/md-0  revision 7  Progressing  elapsed 1m15s
  1 of 3 machines up to date, 2 available (2 old machines pending deletion, 4 machines exist, rolling out)
  up to date [######..................] 1/3
  available  [############............] 2/3
  machines   [########################] 4/3
  machineset md-0-new  new  wants 3, has 2, 2 up to date, 2 available
  machineset md-0-old  old  wants 1, has 2, 2 up to date, 2 available
  new  md-0-new-a  Running       ready
  new  md-0-new-b  Provisioning  not ready: NotReady: * InfrastructureReady: DevMachine status.initialization.provisioned is false
  old  md-0-old-c  Running       ready, not up to date: NotUpToDate: * Version v1.34.1, v1.35.1 required
  old  md-0-old-d  Running       being deleted
`},
		{"narrow and short terminal", rolling, time.Second, 40, 10, `machinedeployment/md-0  revision 7  Pro…
  1 of 3 machines up to date, 2 availab…
  up to date [######..................]…
  available  [############............]…
  machines   [########################]…
  machineset md-0-new  new  wants 3, ha…
  machineset md-0-old  old  wants 1, ha…
  new  md-0-new-a  Running       ready
  ... 3 more machines
`},
		{"rolled out", done, 2 * time.Minute, 0, 0, `machinedeployment/md-0  revision 2  RolledOut  elapsed 2m0s
  3 of 3 machines up to date, 3 available
  up to date [########################] 3/3
  available  [########################] 3/3
  machines   [########################] 3/3
  machineset md-0-new  new  wants 3, has 3, 3 up to date, 3 available
  machineset md-0-old  old  wants 0, has 0, 0 up to date, 0 available
  new  m-0  Running  ready
  new  m-1  Running  ready
  new  m-2  Running  ready
`},
		{"control plane stalled", cp, 10 * time.Minute, 0, 0, `kubeadmcontrolplane/cp  Stalled  elapsed 10m0s
  0 of 1 machines up to date, 1 available (1 old machine pending deletion, 2 machines exist)
  up to date [........................] 0/1
  available  [############............] 1/1
  machines   [########################] 2/1
  new  cp-new  Provisioning  not ready: NotReady: * EtcdMemberHealthy: waiting
  old  cp-old  Running       ready, not up to date: NotUpToDate: * Version v1.34.1, v1.35.1 required
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := status.RenderLive(tc.s, tc.elapsed, tc.width, tc.height)
			assert.Equal(t, tc.want, strings.Join(got, "\n")+"\n")
			for i, l := range got {
				if tc.width > 0 {
					assert.LessOrEqual(t, utf8.RuneCountInString(l), tc.width, "line %d too wide", i)
				}
			}
			if tc.height > 0 {
				assert.Less(t, len(got), tc.height, "lines")
			}
		})
	}
}

// withOwner makes set the MachineSet that controls m.
func withOwner(m clusterv1.Machine, set string) clusterv1.Machine {
	m.OwnerReferences[0].Name = set
	return m
}

// TestLiveTerminalRedrawsInPlace: each frame moves the cursor up over the
// previous one and clears below; the next object starts below the last
// frame. A writer that is not a terminal gets no live view.
func TestLiveTerminalRedrawsInPlace(t *testing.T) {
	assert.Nil(t, status.NewLiveTerminal(&bytes.Buffer{}, time.Now()), "a buffer is not a terminal")
	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	assert.Nil(t, status.NewLiveTerminal(f, time.Now()), "a file is not a terminal")

	var out bytes.Buffer
	t0 := time.Unix(0, 0)
	// fd -1: the size is unknown, the view assumes 80x24.
	l := &status.LiveTerminal{Out: &out, FD: -1, Start: t0}
	md := status.EvaluateStatus(statusMD(2, 3, 3, 3, false), goodMachines(3), settled())
	require.NoError(t, l.Show(md, t0))
	first := out.String()
	assert.True(t, strings.HasPrefix(first, "\x1b[J"+"machinedeployment/md-0"), "first frame: clear below, no move: %q", first)
	frame := strings.Count(first, "\n")
	out.Reset()
	require.NoError(t, l.Tick(t0.Add(3*time.Second)))
	assert.True(t, strings.HasPrefix(out.String(), fmt.Sprintf("\x1b[%dA\r\x1b[J", frame)), "redraw moves up %d lines: %q", frame, out.String())
	assert.Contains(t, out.String(), "elapsed 3s")
	out.Reset()
	kcp := &controlplanev1.KubeadmControlPlane{}
	kcp.Name = "cp"
	require.NoError(t, l.Show(status.EvaluateStatus(kcp, nil, nil), t0))
	assert.True(t, strings.HasPrefix(out.String(), "\x1b[J"+"kubeadmcontrolplane/cp"), "a new object starts below: %q", out.String())
}
