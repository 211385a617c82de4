package revisions_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// The nonces of a real collision of the short hash, found by
// revisionstest.Collide for newMD's template with a "nonce" label: the
// first names DevMachineTemplate md-1, the second md-2. Two machine
// templates an attacker could apply one after the other.
const (
	collidingNonceA = "0000019d45"
	collidingNonceB = "00000bcc2a"
)

// collidingMDs returns two MachineDeployments, the same object at two
// contents of one short hash: their templates name different
// infrastructure templates.
func collidingMDs() (a, b *clusterv1.MachineDeployment) {
	a, b = newMD(), newMD()
	a.Spec.Template.Labels["nonce"] = collidingNonceA
	b.Spec.Template.Labels["nonce"] = collidingNonceB
	b.Spec.Template.Spec.InfrastructureRef.Name = "md-2"
	return a, b
}

// TestContentsOfOneShortHashAreTwoRevisions: two contents whose digests
// share their first 40 bits (what names a RolloutRevision, and what earlier
// releases took for the whole content) are two revisions however they
// are compared, read or recorded.
func TestContentsOfOneShortHashAreTwoRevisions(t *testing.T) {
	mdA, mdB := collidingMDs()
	a, b := mdSnap(t, mdA), mdSnap(t, mdB)
	require.Equal(t, revisions.ShortHash(a.Hash), revisions.ShortHash(b.Hash),
		"the fixture is a collision of the short hash: find new nonces with revisionstest.Collide if the canonical form changed")
	legacy := func(md *clusterv1.MachineDeployment, snap revisions.Snapshot) *rgv1alpha1.RolloutRevision {
		// As an earlier release recorded it: the short hash label alone.
		cr := revisions.RolloutRevision(md, mdGVK, snap, revisions.Record{Revision: 1})
		delete(cr.Annotations, revisions.AnnotationDigest)
		return cr
	}
	for _, tc := range []struct {
		name string
		// read gives a's and b's snapshots as one way of reading gives
		// them.
		read func(t *testing.T) (revisions.Snapshot, revisions.Snapshot)
	}{
		{"snapshots", func(*testing.T) (revisions.Snapshot, revisions.Snapshot) { return a, b }},
		{"records", func(t *testing.T) (revisions.Snapshot, revisions.Snapshot) {
			ra, err := revisions.FromRolloutRevision(revisions.RolloutRevision(mdA, mdGVK, a, revisions.Record{Revision: 1}))
			require.NoError(t, err)
			rb, err := revisions.FromRolloutRevision(revisions.RolloutRevision(mdB, mdGVK, b, revisions.Record{Revision: 2}))
			require.NoError(t, err)
			return ra.Snapshot, rb.Snapshot
		}},
		{"records' metadata", func(t *testing.T) (revisions.Snapshot, revisions.Snapshot) {
			ra, err := revisions.FromMetadata(revisions.RolloutRevision(mdA, mdGVK, a, revisions.Record{Revision: 1}))
			require.NoError(t, err)
			rb, err := revisions.FromMetadata(revisions.RolloutRevision(mdB, mdGVK, b, revisions.Record{Revision: 2}))
			require.NoError(t, err)
			return ra.Snapshot, rb.Snapshot
		}},
		{"records of an earlier release", func(t *testing.T) (revisions.Snapshot, revisions.Snapshot) {
			ra, err := revisions.FromRolloutRevision(legacy(mdA, a))
			require.NoError(t, err)
			rb, err := revisions.FromRolloutRevision(legacy(mdB, b))
			require.NoError(t, err)
			return ra.Snapshot, rb.Snapshot
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotA, gotB := tc.read(t)
			assert.Equal(t, a.Hash, gotA.Hash)
			assert.Equal(t, b.Hash, gotB.Hash)
			assert.True(t, gotA.Same(a))
			assert.True(t, gotB.Same(b))
			assert.False(t, gotA.Same(gotB), "two contents of one short hash are two revisions")
			assert.NotEqual(t, gotA.Hash, gotB.Hash)
		})
	}

	// Their records are first given one name; the second recorded takes
	// the long one, which is the content's alone.
	assert.Equal(t, revisions.Name(mdA.Name, a.Hash), revisions.Name(mdB.Name, b.Hash))
	assert.NotEqual(t, revisions.LongName(mdA.Name, a.Hash), revisions.LongName(mdB.Name, b.Hash))

	// An earlier release's record of a, which b's name finds, is never
	// taken for b: its data decides.
	old, err := revisions.FromRolloutRevision(legacy(mdA, a))
	require.NoError(t, err)
	assert.False(t, old.Snapshot.Same(b))
	_, err = revisions.FromMetadata(legacy(mdA, a))
	assert.ErrorIs(t, err, revisions.ErrNoDigest, "its metadata alone cannot tell")
}
