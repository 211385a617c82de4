package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/revisions/revisionstest"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestContentsOfOneShortHashAreTwoRevisions performs the short-hash
// collision attack through the real API server and guard: a user with
// edit rights runs a birthday search over a nonce label
// (revisionstest.Collide, seconds on one core) and finds two templates of
// MachineDeployment c1-md-0 — the second naming another infrastructure
// template — whose digests share the 40 bits that name a RolloutRevision.
// Applied one after the other, they are two revisions: the guard stamps
// the second with a new number, the history records both (the second
// under its long name), `rollout history` lists both, and `rollout undo`
// to the first rolls the template back to it.
//
// Before the digest decided, the second edit kept the first's stamps,
// history showed the first content only (with the second's data recorded
// over it), and undo said "already at revision 2".
func TestContentsOfOneShortHashAreTwoRevisions(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.35.2", Templates: true})
	md := &clusterv1.MachineDeployment{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(w.MD), md))

	// The search, over the content as the API server stores it.
	const placeholder = "NONCE-PLACEHOLDER"
	withNonce := func(obj *clusterv1.MachineDeployment, nonce, infra string) *clusterv1.MachineDeployment {
		out := obj.DeepCopy()
		if out.Spec.Template.Labels == nil {
			out.Spec.Template.Labels = map[string]string{}
		}
		out.Spec.Template.Labels["nonce"] = nonce
		out.Spec.Template.Spec.InfrastructureRef.Name = infra
		return out
	}
	dataOf := func(obj *clusterv1.MachineDeployment) []byte {
		snap, err := revisions.ForMachineDeployment(obj)
		require.NoError(t, err)
		return snap.Data
	}
	start := time.Now()
	x, y, err := revisionstest.Collide(revisions.KindMachineDeployment,
		dataOf(withNonce(md, placeholder, "c1-md-0")), dataOf(withNonce(md, placeholder, "c1-md-1")), placeholder)
	require.NoError(t, err)
	t.Logf("two templates of one short hash found in %s: nonce %s (c1-md-0), nonce %s (c1-md-1)", time.Since(start).Round(time.Millisecond), x, y)

	// apply sets the template's nonce and infrastructure template, as the
	// admin, and returns the object stored and its snapshot.
	apply := func(nonce, infra string) (*clusterv1.MachineDeployment, revisions.Snapshot) {
		t.Helper()
		cur := &clusterv1.MachineDeployment{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(md), cur))
		edited := withNonce(cur, nonce, infra)
		require.NoError(t, env.Client.Patch(ctx, edited, client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{})))
		snap, err := revisions.ForMachineDeployment(edited)
		require.NoError(t, err)
		return edited, snap
	}
	first, snapA := apply(x, "c1-md-0")
	second, snapB := apply(y, "c1-md-1")
	require.Equal(t, revisions.ShortHash(snapA.Hash), revisions.ShortHash(snapB.Hash), "the stored templates share their short hash")
	require.NotEqual(t, snapA.Hash, snapB.Hash)

	// The guard stamps the second as a revision of its own.
	assert.Equal(t, "2", first.Annotations[revisions.AnnotationRevision], "the first template is revision 2")
	assert.Equal(t, "3", second.Annotations[revisions.AnnotationRevision], "the second template is revision 3, not the first's number")

	// Both are recorded, each under a name of its own, with its own data.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		revs, bad, err := history.List(ctx, env.Client, md.Namespace, string(md.UID))
		require.NoError(c, err)
		require.Empty(c, bad)
		byNumber := map[int64]revisions.Revision{}
		for _, r := range revs {
			byNumber[r.Record.Revision] = r
		}
		require.Len(c, revs, 3, framework.DescribeHistory(revs))
		assert.Equal(c, snapA.Hash, byNumber[2].Snapshot.Hash, "revision 2 is the first template")
		assert.Equal(c, snapB.Hash, byNumber[3].Snapshot.Hash, "revision 3 is the second template")
		assert.Equal(c, revisions.Name(md.Name, snapA.Hash), byNumber[2].Name)
		assert.Equal(c, revisions.LongName(md.Name, snapB.Hash), byNumber[3].Name)
	}, 30*time.Second, 200*time.Millisecond, "the two templates were never recorded as two revisions")
	cr := &rgv1alpha1.RolloutRevision{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: md.Namespace, Name: revisions.LongName(md.Name, snapB.Hash)}, cr))
	assert.Equal(t, snapB.Hash, cr.Annotations[revisions.AnnotationDigest])

	// rollout history lists both.
	out := rolloutCLI(t, "history", "md/c1-md-0", "-n", md.Namespace)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	assert.Regexp(t, `^2\s+v1\.35\.2\s+DevMachineTemplate/c1-md-0\s`, lines[2])
	assert.Regexp(t, `^3\s+v1\.35\.2\s+DevMachineTemplate/c1-md-1\s`, lines[3])

	// rollout undo to the first rolls back to it.
	out = rolloutCLI(t, "undo", "md/c1-md-0", "--to-revision", "2", "-n", md.Namespace)
	assert.NotContains(t, out, "already at")
	assert.Contains(t, out, "rolled back to revision 2")
	back := &clusterv1.MachineDeployment{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(md), back))
	assert.Equal(t, "c1-md-0", back.Spec.Template.Spec.InfrastructureRef.Name)
	assert.Equal(t, x, back.Spec.Template.Labels["nonce"])
	assert.Equal(t, "4", back.Annotations[revisions.AnnotationRevision], "the undo is revision 4")
	backSnap, err := revisions.ForMachineDeployment(back)
	require.NoError(t, err)
	assert.Equal(t, snapA.Hash, backSnap.Hash, "the first template's content")

	// And an undo to it now is where it is.
	out = rolloutCLI(t, "undo", "md/c1-md-0", "--to-revision", "2", "-n", md.Namespace)
	assert.Contains(t, out, "already at revision 2")
}
