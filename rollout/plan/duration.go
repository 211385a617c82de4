package plan

import (
	"fmt"
	"sort"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// estimateDuration learns how long one machine takes from the object's last
// recorded rollout and multiplies it by the machines the change replaces.
//
// The guard records when each revision was made live (and when each
// restart was asked), not when its rollout finished, and Cluster API keeps
// no old machines; so the last rollout is measured on the machines it
// created, the ones running now: it started at the latest changed-at of a
// revision that replaced machines (change type rollout) or at the latest
// restart, whichever is later (a later in-place change, such as a label,
// replaced none); machine k took from its creation to the creation of
// machine k+1 (the next one is created when it is available), and the last
// one until its Ready condition turned True. The median of these is the
// time per machine. Unknown when no recorded revision rolled out and
// nothing was restarted, or when no running machine was created by that
// rollout.
func estimateDuration(object string, records []revisions.Record, machines []clusterv1.Machine, replaced int) v1alpha1.PlanDuration {
	start, what := time.Time{}, ""
	for _, rec := range records {
		if rec.ChangeType == revisions.ChangeRollout && rec.ChangedAt.After(start) {
			start, what = rec.ChangedAt, fmt.Sprintf("the rollout of revision %d", rec.Revision)
		}
		for _, r := range rec.Restarts {
			if r.At.After(start) {
				start, what = r.At, fmt.Sprintf("the restart of revision %d at %s", rec.Revision, r.At.UTC().Format(time.RFC3339))
			}
		}
	}
	if start.IsZero() {
		return v1alpha1.PlanDuration{Basis: fmt.Sprintf("unknown: the history of %s records no rollout or restart to learn from", object)}
	}
	var created []clusterv1.Machine
	for _, m := range machines {
		if m.DeletionTimestamp.IsZero() && !m.CreationTimestamp.Time.Before(start.Add(-time.Second)) {
			created = append(created, m)
		}
	}
	if len(created) == 0 {
		return v1alpha1.PlanDuration{Basis: fmt.Sprintf("unknown: no running machine of %s was created by %s", object, what)}
	}
	sort.SliceStable(created, func(i, j int) bool {
		return created[i].CreationTimestamp.Time.Before(created[j].CreationTimestamp.Time)
	})
	var per []time.Duration
	for i := 0; i+1 < len(created); i++ {
		per = append(per, created[i+1].CreationTimestamp.Sub(created[i].CreationTimestamp.Time))
	}
	last := created[len(created)-1]
	if c := apimeta.FindStatusCondition(last.Status.Conditions, clusterv1.MachineReadyCondition); c != nil && c.Status == metav1.ConditionTrue && c.LastTransitionTime.After(last.CreationTimestamp.Time) {
		per = append(per, c.LastTransitionTime.Sub(last.CreationTimestamp.Time))
	}
	if len(per) == 0 {
		return v1alpha1.PlanDuration{Basis: fmt.Sprintf("unknown: the one machine %s created is not ready yet", what)}
	}
	sort.Slice(per, func(i, j int) bool { return per[i] < per[j] })
	median := per[len(per)/2]
	if len(per)%2 == 0 {
		median = (per[len(per)/2-1] + per[len(per)/2]) / 2
	}
	median = median.Round(time.Second)
	d := v1alpha1.PlanDuration{Known: true, PerMachine: median.String(),
		Basis: fmt.Sprintf("median per machine over %d %s of %s (%s)", len(per), core.Plural(len(per), "machine", "machines"), what, start.UTC().Format(time.RFC3339))}
	d.Estimate = (median * time.Duration(replaced)).String()
	return d
}
