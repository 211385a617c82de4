package revisions_test

import (
	"testing"

	"github.com/rollout-guard/rollout-guard/revisions"
)

func BenchmarkForKubeadmControlPlane(b *testing.B) {
	kcp := newKCP()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := revisions.ForKubeadmControlPlane(kcp); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkForMachineDeployment(b *testing.B) {
	md := newMD()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := revisions.ForMachineDeployment(md); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRolloutRevisionRoundTrip(b *testing.B) {
	kcp := newKCP()
	snap := kcpSnap(b, kcp)
	rec := fullRecord()
	b.ReportAllocs()
	for b.Loop() {
		cr := revisions.RolloutRevision(kcp, kcpGVK, snap, rec)
		if _, err := revisions.FromRolloutRevision(cr); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDiff(b *testing.B) {
	from := kcpSnap(b, newKCP())
	to := cp(b, "v1.35.0", "3.6.6-0")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := revisions.Diff(from, to); err != nil {
			b.Fatal(err)
		}
	}
}
