package waves

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// Label is the label that puts a Cluster in a wave: a non-negative
// integer; wave 0 goes first. A Cluster without it is in no wave: it is
// never held, and never holds another.
const Label = "rollout-guard.io/wave"

// Of returns the wave of a Cluster with the given labels: ok false when it
// has no Label, an error naming the label and the way out when the label
// is not a non-negative integer.
func Of(labels map[string]string) (wave int, ok bool, err error) {
	v, has := labels[Label]
	if !has {
		return 0, false, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("label %s=%q is not a wave: set it to 0, 1, 2… (0 goes first)", Label, v)
	}
	return n, true, nil
}

// Compare orders two values of a label that orders clusters, such as
// Label: numbers in numeric order, then words in lexical order, then no
// value (has false) last. It returns -1, 0 or +1.
func Compare(a string, aHas bool, b string, bHas bool) int {
	switch {
	case !aHas && !bHas:
		return 0
	case !aHas:
		return 1
	case !bHas:
		return -1
	}
	an, aerr := strconv.Atoi(a)
	bn, berr := strconv.Atoi(b)
	switch {
	case aerr == nil && berr == nil:
		return cmp.Compare(an, bn)
	case aerr == nil:
		return -1
	case berr == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// Progress is how far a Cluster's rollout to a version has come, read
// from the Cluster alone.
type Progress struct {
	// Done reports that the Cluster's topology is at the version and
	// every condition below says its machines are rolled out, ready and
	// not being remediated.
	Done bool
	// Since is when the last of those conditions turned so: the start of
	// the soak. Zero when not Done.
	Since time.Time
	// Waiting says what is not done yet when not Done: "its topology is
	// at v1.35.2", "ControlPlaneMachinesUpToDate is False: ...".
	Waiting string
}

// doneWhen are the Cluster's conditions that tell a finished rollout, each
// with the status it has once done.
var doneWhen = []struct {
	condition string
	status    metav1.ConditionStatus
}{
	{clusterv1.ClusterTopologyReconciledCondition, metav1.ConditionTrue},
	{clusterv1.ClusterRollingOutCondition, metav1.ConditionFalse},
	{clusterv1.ClusterControlPlaneMachinesUpToDateCondition, metav1.ConditionTrue},
	{clusterv1.ClusterWorkerMachinesUpToDateCondition, metav1.ConditionTrue},
	{clusterv1.ClusterControlPlaneMachinesReadyCondition, metav1.ConditionTrue},
	{clusterv1.ClusterWorkerMachinesReadyCondition, metav1.ConditionTrue},
	{clusterv1.ClusterRemediatingCondition, metav1.ConditionFalse},
}

// At judges the rollout of cluster to version (spec.topology.version) from
// its conditions, as Cluster API's controllers wrote them: done when its
// topology is at version, the topology controller has reconciled its
// latest generation, and its machines are up to date, ready and not
// being remediated. Of the conditions Cluster API has not written yet, only
// RollingOut and Remediating count as done: their absence means nothing is
// in progress.
func At(cluster *clusterv1.Cluster, version string) Progress {
	if got := cluster.Spec.Topology.Version; got != version {
		return Progress{Waiting: fmt.Sprintf("its topology is at %s, not %s", got, version)}
	}
	var since time.Time
	for _, want := range doneWhen {
		c := apimeta.FindStatusCondition(cluster.Status.Conditions, want.condition)
		if c == nil {
			if want.status == metav1.ConditionFalse {
				continue
			}
			return Progress{Waiting: fmt.Sprintf("Cluster API has not reported %s yet", want.condition)}
		}
		if c.Status != want.status {
			return Progress{Waiting: fmt.Sprintf("%s is %s%s", c.Type, c.Status, reason(c))}
		}
		if c.ObservedGeneration != 0 && c.ObservedGeneration < cluster.Generation {
			return Progress{Waiting: fmt.Sprintf("Cluster API has not observed generation %d yet (%s is of %d)", cluster.Generation, c.Type, c.ObservedGeneration)}
		}
		if c.LastTransitionTime.After(since) {
			since = c.LastTransitionTime.Time
		}
	}
	return Progress{Done: true, Since: since}
}

// DoneConditions are the conditions of a Cluster at generation whose
// rollout At reads as done since at, each with reason "Done": what Cluster
// API's controllers write once a rollout is over, in the shape At reads.
func DoneConditions(generation int64, at time.Time) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(doneWhen))
	for _, want := range doneWhen {
		out = append(out, metav1.Condition{Type: want.condition, Status: want.status, Reason: "Done", ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(at)})
	}
	return out
}

// Soaked reports whether p is done and has stayed so for soak at now.
func (p Progress) Soaked(soak time.Duration, now time.Time) bool {
	return p.Done && !now.Before(p.Since.Add(soak))
}

func reason(c *metav1.Condition) string {
	s := ""
	if c.Reason != "" {
		s = " (" + c.Reason + ")"
	}
	if msg := strings.TrimSpace(strings.SplitN(c.Message, "\n", 2)[0]); msg != "" {
		s += ": " + msg
	}
	return s
}
