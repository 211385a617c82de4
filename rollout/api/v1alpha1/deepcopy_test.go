package v1alpha1

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// TestDeepCopyIsDeep: a copy shares nothing with its original, down to
// the restarts of a revision of a cluster's history (the hand-written copy
// it replaces shared them).
func TestDeepCopyIsDeep(t *testing.T) {
	restart := revisions.Restart{At: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), By: "alice", After: "2026-12-01T10:00:00Z"}
	h := &ClusterRolloutHistory{Revisions: []ClusterHistoryRevision{{HistoryRevision: HistoryRevision{Revision: 1, Restarts: []revisions.Restart{restart}}}}}
	c := h.DeepCopyObject().(*ClusterRolloutHistory)
	c.Revisions[0].Restarts[0].By = "mallory"
	c.Revisions[0].Revision = 2
	assert.Equal(t, "alice", h.Revisions[0].Restarts[0].By)
	assert.EqualValues(t, 1, h.Revisions[0].Revision)

	p := &RolloutPlan{Objects: []ObjectPlan{{}}}
	pc := p.DeepCopyObject().(*RolloutPlan)
	pc.Objects[0] = ObjectPlan{Object: PlanObjectRef{Name: "changed"}}
	assert.Empty(t, p.Objects[0].Object.Name)

	s := &ClusterRolloutStatus{Rolling: []FleetObjectStatus{{Object: "machinedeployment/md-0"}}}
	sc := s.DeepCopyObject().(*ClusterRolloutStatus)
	sc.Rolling[0].Object = "changed"
	assert.Equal(t, "machinedeployment/md-0", s.Rolling[0].Object)
}
