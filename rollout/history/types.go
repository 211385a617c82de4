package history

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// What `rollout history -o json|yaml` prints, and how it is built from a
// RevisionSet.

// newRolloutHistory is the data output of one object's history.
func newRolloutHistory(set *core.RevisionSet) *v1alpha1.RolloutHistory {
	return &v1alpha1.RolloutHistory{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.HistoryAPIVersion, Kind: "RolloutHistory"},
		Object: v1alpha1.HistoryObject{Kind: set.Kind.GVK.Kind, Namespace: set.Obj.GetNamespace(), Name: set.Obj.GetName(),
			UID: string(set.Obj.GetUID())},
		Recorded:     set.Recorded(),
		LiveRevision: set.LiveNumber(),
	}
}

// entryOf converts a revision for data output.
func entryOf(set *core.RevisionSet, r revisions.Revision, withContent bool) (v1alpha1.HistoryRevision, error) {
	sum, err := r.Snapshot.Summary()
	if err != nil {
		return v1alpha1.HistoryRevision{}, fmt.Errorf("reading revision %d: %w", r.Record.Revision, err)
	}
	e := v1alpha1.HistoryRevision{
		Revision:        r.Record.Revision,
		History:         r.Record.History,
		Live:            r.Snapshot.Same(set.Live),
		RolloutRevision: r.Name,
		Hash:            revisions.ShortHash(r.Snapshot.Hash),
		Version:         sum.Version,
		Infrastructure:  sum.Infrastructure,
		Bootstrap:       sum.Bootstrap,
		EtcdImageTag:    sum.EtcdImageTag,
		Class:           sum.Class,
		ChangedBy:       r.Record.ChangedBy,
		AuthorUnknown:   core.AuthorUnknownOf(r.Record),
		FieldManager:    r.Record.FieldManager,
		GitOps:          core.GitOpsController(r.Record),
		ChangeType:      r.Record.ChangeType,
		ChangeCause:     r.Record.ChangeCause,
		Restarts:        r.Record.Restarts,
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
