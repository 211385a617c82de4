package history

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// TestWakesOn: the history reconciler wakes on what may change what it
// records, and on nothing else.
func TestWakesOn(t *testing.T) {
	noted := func(hash string) map[string]string {
		return map[string]string{
			revisions.AnnotationRevision: "3",
			AnnotationCachedHash:         CachedHashValue(hash),
		}
	}
	md := func(generation int64, ann, labels map[string]string, replicas int32) *clusterv1.MachineDeployment {
		return &clusterv1.MachineDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: "ns", Generation: generation, Annotations: ann, Labels: labels},
			Spec:       clusterv1.MachineDeploymentSpec{Replicas: &replicas},
		}
	}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for key, val := range m {
			if key != k {
				out[key] = val
			}
		}
		return out
	}
	withStatus := func(m *clusterv1.MachineDeployment) *clusterv1.MachineDeployment {
		m.Status.Replicas = new(int32(5))
		return m
	}
	tests := []struct {
		name     string
		old, new *clusterv1.MachineDeployment
		want     bool
	}{
		{"status update", md(4, noted("aaa"), nil, 3), withStatus(md(4, noted("aaa"), nil, 3)), false},
		{"label edit", md(4, noted("aaa"), nil, 3), md(4, noted("aaa"), map[string]string{"team": "b"}, 3), false},
		{"another's annotation", md(4, noted("aaa"), nil, 3), md(4, with(noted("aaa"), "example.com/x", "y"), nil, 3), false},
		{"replicas scaled: generation moves, content hash does not", md(4, noted("aaa"), nil, 3), md(5, noted("aaa"), nil, 5), false},
		{"template edit: a new content hash", md(4, noted("aaa"), nil, 3), md(5, noted("bbb"), nil, 3), true},
		{"new revision stamped", md(4, noted("aaa"), nil, 3), md(5, with(noted("bbb"), revisions.AnnotationRevision, "4"), nil, 3), true},
		{"restart stamped", md(4, noted("aaa"), nil, 3), md(5, with(noted("aaa"), revisions.AnnotationRestart, "{}"), nil, 3), true},
		{"stamp removed", md(4, with(noted("aaa"), revisions.AnnotationChangeCause, "x"), nil, 3), md(4, noted("aaa"), nil, 3), true},
		{"no hash noted (content cached whole): generation moves", md(4, nil, nil, 3), md(5, nil, nil, 5), true},
		{"no hash noted: status only", md(4, nil, nil, 3), withStatus(md(4, nil, nil, 3)), false},
		{"hash noted on one side only: generation decides", md(4, noted("aaa"), nil, 3), md(5, map[string]string{revisions.AnnotationRevision: "3"}, nil, 3), true},
	}
	p := wakesOn()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, p.Update(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new}))
		})
	}
	assert.True(t, p.Create(event.CreateEvent{Object: md(1, nil, nil, 1)}), "a create wakes it")
	assert.True(t, p.Delete(event.DeleteEvent{Object: md(1, nil, nil, 1)}), "a delete wakes it")
}
