package history

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// TestPending: content is taken once, only under the hash it was kept
// with; at most capacity objects' content is held, the oldest dropped
// first; content the Index knows is recorded is not kept.
func TestPending(t *testing.T) {
	md := func(uid, version string) (*clusterv1.MachineDeployment, revisions.Snapshot) {
		m := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md-" + uid, UID: types.UID(uid)}}
		m.Spec.Template.Spec.Version = version
		snap, err := revisions.ForMachineDeployment(m)
		require.NoError(t, err)
		return m, snap
	}
	a1, snapA1 := md("a", "v1.35.1")
	_, snapA2 := md("a", "v1.35.2")
	b, snapB := md("b", "v1.35.1")
	c, snapC := md("c", "v1.35.1")
	d, snapD := md("d", "v1.35.1")

	type take struct {
		uid  string
		hash string
		want bool
	}
	for _, tc := range []struct {
		name     string
		capacity int
		steps    func(p *Pending)
		takes    []take
		wantLen  int
	}{
		{"taken once, under its hash", 4, func(p *Pending) { p.Keep(a1, snapA1) },
			[]take{{"a", snapA2.Hash, false}, {"a", snapA1.Hash, true}, {"a", snapA1.Hash, false}}, 0},
		{"a later change replaces it", 4, func(p *Pending) { p.Keep(a1, snapA1); p.Keep(a1, snapA2) },
			[]take{{"a", snapA1.Hash, false}, {"a", snapA2.Hash, true}}, 0},
		{"the oldest dropped at capacity", 2, func(p *Pending) { p.Keep(a1, snapA1); p.Keep(b, snapB); p.Keep(c, snapC) },
			[]take{{"a", snapA1.Hash, false}, {"b", snapB.Hash, true}, {"c", snapC.Hash, true}}, 0},
		{"kept again keeps its place", 2, func(p *Pending) { p.Keep(a1, snapA1); p.Keep(b, snapB); p.Keep(a1, snapA2); p.Keep(c, snapC) },
			[]take{{"a", snapA2.Hash, false}, {"b", snapB.Hash, true}, {"c", snapC.Hash, true}}, 0},
		{"a taken object's place drops nothing", 2, func(p *Pending) {
			p.Keep(a1, snapA1)
			p.Keep(b, snapB)
			p.Take("a", snapA1.Hash)
			p.Keep(c, snapC) // a's old place: b stays
		}, []take{{"a", snapA1.Hash, false}, {"b", snapB.Hash, true}, {"c", snapC.Hash, true}}, 0},
		{"taken and kept again: in a new place", 2, func(p *Pending) {
			p.Keep(a1, snapA1)
			p.Keep(b, snapB)
			p.Take("a", snapA1.Hash)
			p.Keep(a1, snapA2) // a's old place, now the newest
			p.Keep(c, snapC)   // drops b, the oldest
		}, []take{{"b", snapB.Hash, false}, {"a", snapA2.Hash, true}, {"c", snapC.Hash, true}}, 0},
		{"never more than capacity", 3, func(p *Pending) {
			for range 5 {
				for _, o := range []struct {
					obj  *clusterv1.MachineDeployment
					snap revisions.Snapshot
				}{{a1, snapA1}, {b, snapB}, {c, snapC}, {d, snapD}} {
					p.Keep(o.obj, o.snap)
				}
			}
		}, nil, 3},
		{"an object without a UID is not kept", 4, func(p *Pending) {
			noUID := a1.DeepCopy()
			noUID.UID = ""
			p.Keep(noUID, snapA1)
		}, []take{{"", snapA1.Hash, false}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPending(tc.capacity)
			tc.steps(p)
			for _, tk := range tc.takes {
				snap, ok := p.Take(types.UID(tk.uid), tk.hash)
				assert.Equal(t, tk.want, ok, "take %s %s", tk.uid, tk.hash)
				if ok {
					assert.Equal(t, tk.hash, snap.Hash)
					assert.NotEmpty(t, snap.Data)
				}
			}
			assert.Equal(t, tc.wantLen, p.Len())
		})
	}

	t.Run("nil keeps nothing", func(t *testing.T) {
		var p *Pending
		p.Keep(a1, snapA1)
		_, ok := p.Take("a", snapA1.Hash)
		assert.False(t, ok)
		assert.Zero(t, p.Len())
	})
}
