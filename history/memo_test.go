package history

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

func TestMemoCovers(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	stored := revisions.Record{Revision: 4, History: []int64{2, 4}, ChangedBy: "alice", ChangedAt: at, ChangeCause: "upgrade", ChangeType: revisions.ChangeRollout}
	owner := func(uid, rv string) client.Object {
		kcp := kcpAt("v1.35.1", 4)
		kcp.UID, kcp.ResourceVersion = types.UID("uid-"+uid), rv
		return kcp
	}
	restart := stored
	restart.Restarts = []revisions.Restart{{At: at, By: "bob", After: at.Format(time.RFC3339)}}
	for _, tc := range []struct {
		name  string
		owner client.Object
		hash  string
		rec   revisions.Record
		want  bool
	}{
		{name: "the same record, the same version of the owner", owner: owner("a", "7"), hash: "h1", rec: stored, want: true},
		{name: "an earlier number the record holds", owner: owner("a", "7"), hash: "h1", rec: revisions.Record{Revision: 2, History: []int64{2}}, want: true},
		{name: "the same time in another location", owner: owner("a", "7"), hash: "h1", rec: func() revisions.Record {
			r := stored
			r.ChangedAt = at.In(time.FixedZone("CET", 3600))
			return r
		}(), want: true},
		{name: "another version of the owner", owner: owner("a", "8"), hash: "h1", rec: stored},
		{name: "another owner", owner: owner("b", "7"), hash: "h1", rec: stored},
		{name: "other content", owner: owner("a", "7"), hash: "h2", rec: stored},
		{name: "a restart to add", owner: owner("a", "7"), hash: "h1", rec: restart},
		{name: "a higher number", owner: owner("a", "7"), hash: "h1", rec: revisions.Record{Revision: 5, History: []int64{5}}},
		{name: "a number the record does not hold", owner: owner("a", "7"), hash: "h1", rec: revisions.Record{Revision: 3, History: []int64{3}}},
		{name: "another author of the same number", owner: owner("a", "7"), hash: "h1", rec: func() revisions.Record {
			r := stored
			r.ChangedBy = "mallory"
			return r
		}()},
		{name: "an owner read without a version", owner: owner("a", ""), hash: "h1", rec: stored},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m memo
			m.remember(owner("a", "7"), "h1", stored)
			got, ok := m.covered(tc.owner, tc.hash, tc.rec)
			assert.Equal(t, tc.want, ok)
			if tc.want {
				assert.True(t, sameRecord(stored, got), "the stored record: %+v", got)
			}
		})
	}

	var m memo
	m.remember(owner("a", "7"), "h1", stored)
	m.forget(owner("a", "8"), "h1")
	_, ok := m.covered(owner("a", "7"), "h1", stored)
	assert.False(t, ok, "forgotten: its RolloutRevision was deleted")
}

// TestRecorderSkipsWhatItJustRecorded: recording again what this Recorder
// recorded from the same version of the object costs no request; any other
// version of the object reads the history as before.
func TestRecorderSkipsWhatItJustRecorded(t *testing.T) {
	ctx := context.Background()
	server := fakeWithIndex(t)
	n := requests{}
	c := counting(server, n)
	r := &Recorder{Client: c, Reader: c}
	kcp := kcpAt("v1.35.1", 3)
	kcp.ResourceVersion = "7"
	snap, err := revisions.ForKubeadmControlPlane(kcp)
	require.NoError(t, err)
	rec := revisions.Record{Revision: 3, History: []int64{3}, ChangedBy: "alice"}

	// The reconciler records the live revision: read (both names the
	// content may be recorded under), list to number, create.
	require.NoError(t, r.Record(ctx, kcp, kinds.KubeadmControlPlane.GVK, snap, rec))
	assert.Equal(t, requests{"get": 2, "list": 1, "create": 1}, n)

	// The next edit replaces that very version: nothing to read or write.
	clear(n)
	highest, err := r.RecordReplaced(ctx, kcp, kinds.KubeadmControlPlane.GVK, snap, rec)
	require.NoError(t, err)
	assert.EqualValues(t, 3, highest)
	assert.Empty(t, n)

	// Another version of the object (it was written since): read it back.
	clear(n)
	later := kcp.DeepCopy()
	later.ResourceVersion = "9"
	highest, err = r.RecordReplaced(ctx, later, kinds.KubeadmControlPlane.GVK, snap, rec)
	require.NoError(t, err)
	assert.EqualValues(t, 3, highest)
	assert.Equal(t, requests{"get": 1}, n)

	// A restart adds to the record: written.
	clear(n)
	restart := rec
	restart.Restarts = []revisions.Restart{{At: time.Now().UTC().Truncate(time.Second), By: "bob", After: "2026-11-29T10:00:00Z"}}
	require.NoError(t, r.Record(ctx, later, kinds.KubeadmControlPlane.GVK, snap, restart))
	assert.Equal(t, requests{"get": 1, "update": 1}, n)
	revs, _, err := List(ctx, server, "ns", "uid-cp")
	require.NoError(t, err)
	require.Len(t, revs, 1)
	assert.Len(t, revs[0].Record.Restarts, 1)
}

// TestConcurrentRecordingsOfOneContent: the reconciler recording content
// as it becomes live and the webhook recording the same content as the one
// the next edit replaces, at once, in one process: one create, and the
// other finds it in the memo — no failed create, no read.
func TestConcurrentRecordingsOfOneContent(t *testing.T) {
	ctx := context.Background()
	kcp := kcpAt("v1.35.2", 4)
	kcp.ResourceVersion = "7"
	snap, err := revisions.ForKubeadmControlPlane(kcp)
	require.NoError(t, err)
	server := fakeWithIndex(t)
	n := requests{}
	var mu sync.Mutex
	slowCreate := interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		mu.Lock()
		n["create"]++
		mu.Unlock()
		time.Sleep(100 * time.Millisecond) // the other recording starts meanwhile
		return c.Create(ctx, obj, opts...)
	}, Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		mu.Lock()
		n["get"]++
		mu.Unlock()
		return c.Get(ctx, key, obj, opts...)
	}}
	c := interceptor.NewClient(server, slowCreate)
	r := &Recorder{Client: c, Reader: c, Index: indexOver(server)}
	rec := revisions.Record{Revision: 4, History: []int64{4}, ChangedBy: "alice"}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, errs[i] = r.record(ctx, kcp, kinds.KubeadmControlPlane.GVK, snap, rec) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	assert.Equal(t, requests{"create": 1}, n, "one create, no failed one and no read")
	revs, _ := historyOf(t, server)
	require.Len(t, revs, 1)
	assert.Equal(t, "alice", revs[0].Record.ChangedBy)
}
