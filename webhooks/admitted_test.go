package webhooks

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// worldKCP returns the KubeadmControlPlane of fullWorld.
func worldKCP(t testing.TB) *controlplanev1.KubeadmControlPlane {
	t.Helper()
	for _, obj := range fullWorld() {
		if k, ok := obj.(*controlplanev1.KubeadmControlPlane); ok {
			return k
		}
	}
	t.Fatal("fullWorld has no KubeadmControlPlane")
	return nil
}

// TestAdmittedContent: the Snapshot remembered of an object is given back
// only for an old object of that object whose content has the very
// encoding remembered; anything else is taken anew.
func TestAdmittedContent(t *testing.T) {
	admitted := worldKCP(t)
	// A marker Snapshot no content hashes to: seeing it back shows that
	// the memory answered.
	marker := revisions.Snapshot{Kind: revisions.KindKubeadmControlPlane, Hash: "remembered"}
	tests := []struct {
		name       string
		kind       kinds.Kind
		old        func() client.Object
		remembered bool
	}{
		{"the content admitted", kinds.KubeadmControlPlane, func() client.Object {
			k := admitted.DeepCopy()
			k.Spec.Replicas = new(int32(7)) // not content
			k.Status = controlplanev1.KubeadmControlPlaneStatus{}
			return k
		}, true},
		{"other content (changed after the guard answered)", kinds.KubeadmControlPlane, func() client.Object {
			k := admitted.DeepCopy()
			k.Spec.KubeadmConfigSpec.PreKubeadmCommands = append(k.Spec.KubeadmConfigSpec.PreKubeadmCommands, "echo attacker")
			return k
		}, false},
		{"another object with the same content", kinds.KubeadmControlPlane, func() client.Object {
			k := admitted.DeepCopy()
			k.UID = types.UID("another")
			return k
		}, false},
		{"no UID", kinds.KubeadmControlPlane, func() client.Object {
			k := admitted.DeepCopy()
			k.UID = ""
			return k
		}, false},
		{"a kind without fingerprints", kinds.ClusterClass, func() client.Object {
			return admitted.DeepCopy()
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a admittedContent
			a.remember(tt.kind, admitted, marker)
			old := tt.old()
			got, err := a.snapshot(kinds.KubeadmControlPlane, old)
			require.NoError(t, err)
			if tt.remembered {
				assert.Equal(t, marker, got)
				return
			}
			want, err := kinds.KubeadmControlPlane.Snapshot(old)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// BenchmarkOldSnapshot measures the Snapshot of a control plane's old
// object in a mutating call: taken whole, and remembered from the call
// that admitted that content.
func BenchmarkOldSnapshot(b *testing.B) {
	kcp := worldKCP(b)
	b.Run("taken", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := kinds.KubeadmControlPlane.Snapshot(kcp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remembered", func(b *testing.B) {
		var a admittedContent
		snap, err := kinds.KubeadmControlPlane.Snapshot(kcp)
		require.NoError(b, err)
		a.remember(kinds.KubeadmControlPlane, kcp, snap)
		b.ReportAllocs()
		for b.Loop() {
			if got, err := a.snapshot(kinds.KubeadmControlPlane, kcp); err != nil || got.Hash != snap.Hash {
				b.Fatal(got.Hash, err)
			}
		}
	})
}
