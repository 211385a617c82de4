package status

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// The pure half of rollout status: what one read of an object, its
// Machines and MachineSets says (EvaluateStatus: the done rule), and what
// successive reads say (StatusTracker: the grace period, the progress
// deadline, paused). Nothing here reads the API server, and the time is
// an argument (EvaluateStatus, the package's entry, passes the clock's).

// Phases of a status report.
const (
	// PhaseProgressing: the rollout is not complete.
	PhaseProgressing = "Progressing"
	// PhaseConfirming: the rollout looks complete and must stay so for the
	// grace period.
	PhaseConfirming = "Confirming"
	// PhaseRolledOut: the rollout is complete and stayed so for the grace
	// period (or, with --watch=false, is complete on the one read).
	PhaseRolledOut = "RolledOut"
	// PhasePaused: the object is paused.
	PhasePaused = "Paused"
	// PhaseStalled: nothing moved for the progress deadline.
	PhaseStalled = "Stalled"
	// PhaseTimedOut: --timeout elapsed.
	PhaseTimedOut = "TimedOut"
)

// MachineStatus is what `rollout status` reports about one Machine.
type MachineStatus struct {
	// Name is the Machine's name.
	Name string `json:"name"`
	// Phase is status.phase.
	Phase string `json:"phase"`
	// UpToDate reports the UpToDate condition is True.
	UpToDate bool `json:"upToDate"`
	// Ready reports the Ready condition is True.
	Ready bool `json:"ready"`
	// Deleting reports the Machine is being deleted.
	Deleting bool `json:"deleting"`
	// Updating reports the Machine is being updated in place (Cluster
	// API's InPlaceUpdates): it is kept, and not done yet.
	Updating bool `json:"updating,omitempty"`
	// Cause says why the Machine is replaced when no edit caused it: a
	// MachineHealthCheck's remediation, or certificates that expire soon
	// (see causeOf); "" otherwise.
	Cause string `json:"cause,omitempty"`
	// Reason and Message say why the Machine is not ready (its Ready
	// condition), or else not up to date (its UpToDate condition).
	Reason  string `json:"reason"`
	Message string `json:"message"`

	// Old: the Machine is being deleted, or belongs to a MachineSet other
	// than its MachineDeployment's current one, or (control plane, or
	// MachineSets not known) its UpToDate condition is False (a new
	// Machine has no UpToDate condition for a while).
	Old bool `json:"-"`
	// machineSet is the MachineSet that owns a worker Machine.
	machineSet string
}

// StatusReport is the state of one rollout at one moment; -o json prints it.
type StatusReport struct {
	// Time is when the state was read.
	Time time.Time `json:"time"`
	// Object is "machinedeployment/NAME" or "kubeadmcontrolplane/NAME".
	Object string `json:"object"`
	// Phase is one of the Phase constants.
	Phase string `json:"phase"`
	// Replicas is spec.replicas; UpToDate, Available and Ready are the
	// status counts.
	Replicas  int32 `json:"replicas"`
	UpToDate  int32 `json:"upToDate"`
	Available int32 `json:"available"`
	Ready     int32 `json:"ready"`
	// Machines are the object's Machines, by name.
	Machines []MachineStatus `json:"machines"`
	// Done is true once the rollout is declared done.
	Done bool `json:"done"`
	// OldToDelete are, for a MachineDeployment with the OnDelete strategy
	// whose controller has done all it does by itself, the old Machines
	// that wait to be deleted by hand (see waitingForDeletion).
	OldToDelete []string `json:"oldMachinesToDelete,omitempty"`
	// Upgrade is, on the report of a ClusterClass cluster (object
	// "cluster/NAME"), where it stands against its spec.topology.version;
	// nil on every other report.
	Upgrade *UpgradeStatus `json:"upgrade,omitempty"`

	// Current is status.replicas.
	Current int32 `json:"-"`
	// Observed reports that observedGeneration caught up with generation.
	Observed bool `json:"-"`
	// Generation is metadata.generation.
	Generation int64 `json:"-"`
	// RollingOut reports the RollingOut condition is True.
	RollingOut bool `json:"-"`
	// Paused says how the object is paused, "" when it is not.
	Paused string `json:"-"`
	// Complete reports that every condition of a finished rollout holds on
	// this read (see Complete in the command's help).
	Complete bool `json:"-"`
	// Revision is the object's revision: rollout-guard's, else Cluster
	// API's MachineDeployment revision; "" when it has none.
	Revision string `json:"-"`
	// MachineSets are a MachineDeployment's MachineSets, the current one
	// first.
	MachineSets []MachineSetStatus `json:"-"`
	// WaitRevision is the --revision not live yet, 0 when none is awaited.
	WaitRevision int64 `json:"-"`
	// progress is what else must change for the rollout to count as
	// progressing: a cluster's objects and upgrade steps.
	progress string
	// deleting: the object is being deleted (a MachineDeployment of a
	// ClusterClass cluster that its topology no longer has).
	deleting bool
	// namespace is the object's namespace.
	namespace string
	// countsOnly: a kind whose Machines are optional (a MachinePool) has
	// none, so its status counts are of instances, not Machines.
	countsOnly bool
}

// EvaluateStatus computes the state of the rollout of obj (a
// MachineDeployment, MachinePool, KubeadmControlPlane or another provider's
// control plane) from it, its Machines and, for
// a MachineDeployment, its MachineSets.
func EvaluateStatus(obj client.Object, machines []clusterv1.Machine, machineSets []clusterv1.MachineSet) StatusReport {
	return EvaluateStatusAt(obj, machines, machineSets, time.Now())
}

// scheduledRestartSkew is how far ahead of the local clock spec.rollout.after
// may be and still count as a restart asked now: `rollout restart` sets it
// to the local time, which the controllers' clock may not have reached yet.
// Further ahead, it is a restart scheduled for later, not part of this
// rollout.
const scheduledRestartSkew = time.Minute

// EvaluateStatusAt is EvaluateStatus at the local time now.
func EvaluateStatusAt(obj client.Object, machines []clusterv1.Machine, machineSets []clusterv1.MachineSet, now time.Time) StatusReport {
	kind := core.KindOf(obj)
	s := StatusReport{Object: kind.Singular() + "/" + obj.GetName(), Generation: obj.GetGeneration(), Paused: kind.PausedBy(obj), Revision: revisionOf(obj)}
	c := kind.Counts(obj)
	s.Replicas = ptr.Deref(c.Desired, 1)
	s.Current, s.UpToDate, s.Available, s.Ready = ptr.Deref(c.Current, 0), ptr.Deref(c.UpToDate, 0), ptr.Deref(c.Available, 0), ptr.Deref(c.Ready, 0)
	s.Observed = c.Observed >= s.Generation
	s.RollingOut = apimeta.IsStatusConditionTrue(c.Conditions, clusterv1.RollingOutCondition)
	// A MachineDeployment's status counts come from its MachineSets', which
	// come from the Machines' UpToDate conditions, written by another
	// controller: just after an edit they can all still describe the old
	// template. Which MachineSet is current, and which MachineSet owns each
	// Machine, are facts that cannot be stale that way.
	var sets *machineSetFacts
	if kind.MachineSets != nil {
		f := evaluateMachineSets(obj.GetAnnotations()[clusterv1.RevisionAnnotation], s.Replicas, machineSets)
		sets, s.MachineSets = &f, f.sets
	}
	var rolloutAfter metav1.Time
	if t := kind.RolloutAfter(obj); !t.IsZero() {
		rolloutAfter = metav1.NewTime(t)
	}

	sorted := append([]clusterv1.Machine(nil), machines...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	allGood := true
	for i := range sorted {
		m := &sorted[i]
		readyC := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineReadyCondition)
		upC := apimeta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineUpToDateCondition)
		ms := MachineStatus{
			Name:     m.Name,
			Phase:    m.Status.Phase,
			Ready:    readyC != nil && readyC.Status == metav1.ConditionTrue,
			UpToDate: upC != nil && upC.Status == metav1.ConditionTrue,
			Deleting: !m.DeletionTimestamp.IsZero(),
		}
		ms.Old = ms.Deleting || (upC != nil && upC.Status == metav1.ConditionFalse)
		if sets != nil && sets.newName != "" {
			ms.machineSet = ownerMachineSet(m)
			ms.Old = ms.Deleting || ms.machineSet != sets.newName
		}
		// A machine created before spec.rollout.after (a restart) is to be
		// replaced, whatever its conditions say yet, and even while
		// rollout.after is still ahead of the controllers' clock (then no
		// controller has acted on it yet). Cluster API compares with
		// Before, so a machine of that very second is up to date.
		if !rolloutAfter.IsZero() && !rolloutAfter.After(now.Add(scheduledRestartSkew)) && m.CreationTimestamp.Before(&rolloutAfter) {
			ms.Old = true
		}
		if ms.Phase == "" {
			ms.Phase = "Pending"
		}
		switch {
		case !ms.Ready && readyC != nil:
			ms.Reason, ms.Message = readyC.Reason, core.ConditionLine(readyC.Message)
		case !ms.Ready:
			ms.Reason = "NoReadyCondition"
		case !ms.UpToDate && upC != nil:
			ms.Reason, ms.Message = upC.Reason, core.ConditionLine(upC.Message)
		}
		applyInPlace(m, &ms)
		ms.Cause = causeOf(m)
		if !ms.Ready || !ms.UpToDate || ms.Deleting || ms.Old || ms.Updating {
			allGood = false
		}
		s.Machines = append(s.Machines, ms)
	}
	if s.Machines == nil {
		s.Machines = []MachineStatus{}
	}
	// Most infrastructure providers run a MachinePool's instances without
	// Machines (MachinePool Machines are optional in Cluster API's
	// contract): then its status counts are all there is to go by.
	s.countsOnly = kind.MachinesOptional && len(s.Machines) == 0
	machinesCounted := int32(len(s.Machines)) == s.Replicas || s.countsOnly
	s.Complete = s.Observed && s.Current == s.Replicas && s.UpToDate == s.Replicas && s.Available == s.Replicas &&
		!s.RollingOut && allGood && machinesCounted && (sets == nil || sets.settled)
	s.namespace = obj.GetNamespace()
	s.OldToDelete = waitingForDeletion(obj, s, sets)
	return s
}

// Summary is the state on one line, without the object's name, e.g. "1 of
// 3 machines up to date, 2 available (2 old machines pending deletion)".
func (s StatusReport) Summary() string {
	if s.Paused != "" {
		return "paused (" + s.Paused + ")"
	}
	if s.Upgrade != nil {
		if !s.Observed {
			return fmt.Sprintf("waiting for the topology controller to reconcile generation %d; %s", s.Generation, s.Upgrade.Summary())
		}
		return s.Upgrade.Summary()
	}
	if s.WaitRevision > 0 {
		return fmt.Sprintf("waiting for revision %d (revision %s is live)", s.WaitRevision, s.Revision)
	}
	if !s.Observed {
		return fmt.Sprintf("waiting for generation %d to be observed", s.Generation)
	}
	if n := len(s.OldToDelete); n > 0 {
		// The counts of the status lag the machines' UpToDate conditions;
		// which machines are old is known from their MachineSets.
		return fmt.Sprintf("%s; %d of %d machines replaced", onDeleteSummary(n), len(s.Machines)-n, s.Replicas)
	}
	unit := "machines"
	if s.countsOnly {
		unit = "instances"
	}
	line := fmt.Sprintf("%d of %d %s up to date, %d available", s.UpToDate, s.Replicas, unit, s.Available)
	old, updating := 0, 0
	for _, m := range s.Machines {
		if m.Old {
			old++
		}
		if m.Updating {
			updating++
		}
	}
	var extra []string
	switch {
	case old > 0 && updating > 0:
		// The controller updates machines in place: an old one waits
		// for its turn, and is replaced only if the update is refused.
		extra = append(extra, fmt.Sprintf("%d old %s waiting to be updated in place or replaced", old, core.Plural(old, "machine", "machines")))
	case old > 0:
		extra = append(extra, fmt.Sprintf("%d old %s pending deletion", old, core.Plural(old, "machine", "machines")))
	}
	if updating > 0 {
		extra = append(extra, fmt.Sprintf("%d %s updating in place", updating, core.Plural(updating, "machine", "machines")))
	}
	if n := len(s.Machines); n != int(s.Replicas) && !s.countsOnly {
		extra = append(extra, fmt.Sprintf("%d %s", n, core.Plural(n, "machine exists", "machines exist")))
	}
	if s.deleting {
		extra = append(extra, "being deleted")
	}
	if s.Complete && s.Phase == PhaseConfirming {
		extra = append(extra, "complete, confirming")
	} else if !s.Complete && s.RollingOut {
		extra = append(extra, "rolling out")
	}
	if len(extra) > 0 {
		line += " (" + strings.Join(extra, ", ") + ")"
	}
	return line
}

// StatusVerdict is what a StatusTracker concludes from a state.
type StatusVerdict struct {
	// Phase is Progressing, Confirming, RolledOut, Paused, Stalled or
	// WaitingForDeletion.
	Phase string
	// Wake is when the verdict may change without a new event (the end
	// of the grace period or of the progress deadline); zero for a final
	// verdict.
	Wake time.Time
}

// StatusTracker turns successive states of one rollout into a verdict: done
// only when a complete state held for Grace; stalled when the state did not
// change for ProgressDeadline; paused at once.
type StatusTracker struct {
	// Grace is how long a complete state must hold.
	Grace time.Duration
	// ProgressDeadline is how long the state may stay the same.
	ProgressDeadline time.Duration

	completeSince time.Time
	lastProgress  time.Time
	lastKey       string
}

// Observe records the state s read at now and returns the verdict.
func (t *StatusTracker) Observe(s StatusReport, now time.Time) StatusVerdict {
	if s.Paused != "" {
		return StatusVerdict{Phase: PhasePaused}
	}
	if len(s.OldToDelete) > 0 {
		return StatusVerdict{Phase: PhaseWaitingForDeletion}
	}
	if key := progressKey(s); key != t.lastKey || t.lastProgress.IsZero() {
		t.lastKey, t.lastProgress = key, now
	}
	if !s.Complete {
		t.completeSince = time.Time{}
		stall := t.lastProgress.Add(t.ProgressDeadline)
		if !now.Before(stall) {
			return StatusVerdict{Phase: PhaseStalled}
		}
		return StatusVerdict{Phase: PhaseProgressing, Wake: stall}
	}
	if t.completeSince.IsZero() {
		t.completeSince = now
	}
	if end := t.completeSince.Add(t.Grace); now.Before(end) {
		return StatusVerdict{Phase: PhaseConfirming, Wake: end}
	}
	return StatusVerdict{Phase: PhaseRolledOut}
}

// progressKey is what must change for a rollout to count as progressing:
// the counts and each machine's phase and conditions.
func progressKey(s StatusReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%t %d %d %d %d %d %d %s %t|", s.Observed, s.Generation, s.Current, s.UpToDate, s.Available, s.Ready, len(s.Machines), s.Revision, s.deleting)
	for _, ms := range s.MachineSets {
		fmt.Fprintf(&b, "%s %t %d %d %d %d;", ms.Name, ms.New, ms.Replicas, ms.Current, ms.UpToDate, ms.Available)
	}
	for _, m := range s.Machines {
		fmt.Fprintf(&b, "%s %s %t %t %t %t %s;", m.Name, m.Phase, m.Ready, m.UpToDate, m.Deleting, m.Updating, m.Reason)
	}
	b.WriteString(s.progress)
	return b.String()
}

// revisionOf is the guard's revision annotation of obj, else Cluster API's,
// else "".
func revisionOf(obj client.Object) string {
	ann := obj.GetAnnotations()
	for _, k := range []string{revisions.AnnotationRevision, clusterv1.RevisionAnnotation} {
		if r := ann[k]; r != "" {
			return r
		}
	}
	return ""
}

// revisionWait is where an object stands against --revision N.
type revisionWait struct {
	// live is the object's revision (rollout-guard's stamp).
	live int64
	// Waiting reports that revision N is not live yet.
	Waiting bool
}

// CheckRevision compares the guard's revision stamp on obj with want
// (--revision; 0 means any). The object must carry the stamp. A live
// revision past want is final: revision numbers only grow, so want will
// never be rolled out and waiting would last until --timeout; it is the
// superseded verdict (exit 5), where kubectl answers "desired revision (N)
// is different from the running revision (M)".
func CheckRevision(obj client.Object, want int64) (revisionWait, error) {
	if want <= 0 {
		return revisionWait{}, nil
	}
	what := core.KindOf(obj).Singular() + "/" + obj.GetName()
	raw, ok := obj.GetAnnotations()[revisions.AnnotationRevision]
	if !ok || raw == "" {
		return revisionWait{}, fmt.Errorf("cannot wait for revision %d of %s: it has no annotation %s; the guard stamps every MachineDeployment and KubeadmControlPlane, so check that rollout-guard is installed (rollout history %s), or drop --revision", want, what, revisions.AnnotationRevision, what)
	}
	live, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return revisionWait{}, fmt.Errorf("cannot wait for revision %d of %s: its annotation %s is %q, not a number; drop --revision", want, what, revisions.AnnotationRevision, raw)
	}
	if live > want {
		return revisionWait{live: live}, core.StatusError{Code: ExitSuperseded, Msg: fmt.Sprintf(
			"%s is at revision %d, past the desired revision %d: a later change superseded it, so revision %d will not be rolled out; see rollout history %s, and wait for --revision %d (or without --revision) instead",
			what, live, want, want, what, live)}
	}
	return revisionWait{live: live, Waiting: live < want}, nil
}
