package revisions_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// FuzzFromRolloutRevision feeds arbitrary data, labels and annotations to
// FromRolloutRevision and what reads its result: no input may panic, and
// whatever decodes must re-encode to a RolloutRevision that decodes equal.
func FuzzFromRolloutRevision(f *testing.F) {
	kcpData := kcpSnap(f, newKCP()).Data
	mdData := mdSnap(f, newMD()).Data
	f.Add(revisions.KindKubeadmControlPlane, "", string(kcpData), "3", "1,3", `[{"at":"2026-03-01T11:00:00Z","by":"bob","after":"x"}]`, "2026-03-01T10:00:00Z")
	f.Add(revisions.KindMachineDeployment, "", string(mdData), "1", "", "", "")
	f.Add(revisions.KindMachineDeployment, "0000000000", `{"spec":{"version":null,"a":[{},[],null]}}`, "x", "1,,2", "[", "noon")
	f.Add(revisions.KindKubeadmControlPlane, "", `{"version":1.5,"machineTemplate":[],"kubeadmConfigSpec":"s"}`, "-1", "-2", "null", "")
	f.Add("Deployment", "", `{}`, "", "", "", "")
	f.Add(revisions.KindMachineDeployment, "", `"a string"`, "", "", "{}", "")
	f.Add(revisions.KindKubeadmControlPlane, "", `{"version":"v1.34.2","kubeadmConfigSpec":{"clusterConfiguration":{"etcd":{"local":{"imageTag":7}}}}}`, "", "", "", "")

	f.Fuzz(func(t *testing.T, kind, hash, data, revision, history, restarts, changedAt string) {
		cr := &rgv1alpha1.RolloutRevision{
			ObjectMeta: metav1.ObjectMeta{
				Name: "x", Namespace: "default",
				Labels: map[string]string{revisions.LabelOwnerKind: kind, revisions.LabelHash: hash},
				Annotations: map[string]string{
					revisions.AnnotationRevision:        revision,
					revisions.AnnotationRevisionHistory: history,
					revisions.AnnotationRestarts:        restarts,
					revisions.AnnotationChangedAt:       changedAt,
				},
			},
			Data: runtime.RawExtension{Raw: []byte(data)},
		}
		if hash == "" {
			// Give well-formed data its real hash, to get past the check.
			if _, err := revisions.FromRolloutRevision(cr); err == nil {
				t.Fatal("a RolloutRevision without a hash label decoded")
			}
			s := revisions.Snapshot{Kind: kind, Data: []byte(data)}
			if got, err := revisions.Diff(s, s); err == nil && len(got) != 0 {
				t.Fatalf("a snapshot differs from itself: %v", got)
			}
			cr.Labels[revisions.LabelHash] = revisions.CanonicalHash(kind, []byte(data))
		}
		rev, err := revisions.FromRolloutRevision(cr)
		if err != nil {
			return
		}
		// What callers do with a decoded revision must not panic either.
		_, _ = rev.Snapshot.Summary()
		_, _ = revisions.Diff(revisions.Snapshot{}, rev.Snapshot)
		_, _ = revisions.ChangeCause(rev.Snapshot, rev.Snapshot)
		_, _ = revisions.IsInPlace(rev.Snapshot, rev.Snapshot)
		_ = revisions.HighestOf([]revisions.Revision{rev})
		_, _ = revisions.RollbackPatch(newKCP(), rev.Snapshot)
		_, _ = revisions.RollbackPatch(newMD(), rev.Snapshot)

		owner, gvk := metav1.Object(newKCP()), kcpGVK
		if kind == revisions.KindMachineDeployment {
			owner, gvk = newMD(), mdGVK
		}
		again, err := revisions.FromRolloutRevision(revisions.RolloutRevision(owner, gvk, rev.Snapshot, rev.Record))
		if err != nil {
			t.Fatalf("re-encoded revision does not decode: %v", err)
		}
		if again.Snapshot.Hash != rev.Snapshot.Hash || string(again.Snapshot.Data) != string(rev.Snapshot.Data) {
			t.Fatalf("re-encoded revision differs: %s vs %s", again.Snapshot.Data, rev.Snapshot.Data)
		}
	})
}
