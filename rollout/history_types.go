package rollout

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// What `rollout history -o json|yaml` prints, and how it is built from a
// revisionSet.

// newRolloutHistory is the data output of one object's history.
func newRolloutHistory(set *revisionSet) *v1alpha1.RolloutHistory {
	return &v1alpha1.RolloutHistory{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.HistoryAPIVersion, Kind: "RolloutHistory"},
		Object: v1alpha1.HistoryObject{Kind: set.kind.GVK.Kind, Namespace: set.obj.GetNamespace(), Name: set.obj.GetName(),
			UID: string(set.obj.GetUID())},
		Recorded:     set.recorded(),
		LiveRevision: set.liveNumber(),
	}
}

// entryOf converts a revision for data output.
func entryOf(set *revisionSet, r revisions.Revision, withContent bool) (v1alpha1.HistoryRevision, error) {
	sum, err := r.Snapshot.Summary()
	if err != nil {
		return v1alpha1.HistoryRevision{}, fmt.Errorf("reading revision %d: %w", r.Record.Revision, err)
	}
	e := v1alpha1.HistoryRevision{
		Revision:           r.Record.Revision,
		History:            r.Record.History,
		Live:               r.Snapshot.Hash == set.live.Hash,
		ControllerRevision: r.Name,
		Hash:               r.Snapshot.Hash,
		Version:            sum.Version,
		Infrastructure:     sum.Infrastructure,
		Bootstrap:          sum.Bootstrap,
		EtcdImageTag:       sum.EtcdImageTag,
		ChangedBy:          r.Record.ChangedBy,
		AuthorUnknown:      authorUnknownOf(r.Record),
		FieldManager:       r.Record.FieldManager,
		GitOps:             gitOpsController(r.Record),
		ChangeType:         r.Record.ChangeType,
		ChangeCause:        r.Record.ChangeCause,
		Restarts:           r.Record.Restarts,
	}
	if o := r.Record.Override; o != nil {
		e.Override = &v1alpha1.HistoryOverride{By: o.By, Reason: o.Reason, Rules: o.Rules}
	}
	if !r.Record.ChangedAt.IsZero() {
		e.ChangedAt = r.Record.ChangedAt.UTC().Format(time.RFC3339)
	}
	if withContent {
		e.Content = json.RawMessage(r.Snapshot.Data)
	}
	return e, nil
}
