package history

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// BenchmarkReconcileRecorded measures what the guard's start costs per
// object once its history is recorded: one reconcile of a control plane
// whose live revision the Index holds as stamped (5 revisions), read from
// a cache copy that carries its content hash — the work of the boot
// reconciliation, 8,000 times at 2,000 clusters. It sends no request: a
// read from the API server fails the benchmark.
func BenchmarkReconcileRecorded(b *testing.B) {
	const revs = 5
	store := &recordStore{}
	kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "team-1", Name: "cluster-1-cp", UID: types.UID("6f1c2a7e-0b1d-4c55-9a3e-000000000001"),
		ResourceVersion: "1000", CreationTimestamp: metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))}}
	var live revisions.Snapshot
	var stamps revisions.Record
	for n := 1; n <= revs; n++ {
		kcp.Spec.Version = fmt.Sprintf("v1.35.%d", n)
		snap, err := revisions.ForKubeadmControlPlane(kcp)
		if err != nil {
			b.Fatal(err)
		}
		rec := revisions.Record{Revision: int64(n), History: []int64{int64(n)}, ChangedBy: "system:serviceaccount:flux-system:kustomize-controller",
			FieldManager: "kustomize-controller", ChangeCause: "version v1.35.0 → " + kcp.Spec.Version, ChangeType: revisions.ChangeRollout,
			ChangedAt: time.Date(2026, 12, 1, 10, n, 0, 0, time.UTC)}
		cr := revisions.RolloutRevision(kcp, kinds.KubeadmControlPlane.GVK, snap, rec)
		cr.ResourceVersion = fmt.Sprint(2000 + n)
		if err := store.Add(&metav1.PartialObjectMetadata{ObjectMeta: cr.ObjectMeta}); err != nil {
			b.Fatal(err)
		}
		live, stamps = snap, rec
	}
	cached := kcp.DeepCopy()
	cached.Annotations = stamps.Annotations()
	cached.Annotations[AnnotationCachedHash] = CachedHashValue(live.Hash)
	index := &Index{entries: storeEntries{store}, synced: func() bool { return true }}
	r := &Reconciler{Client: cacheOf{kcp: cached}, ObjectReader: noReads{b}, APIReader: noReads{b}, Recorder: &Recorder{Index: index}, Kind: kinds.KubeadmControlPlane}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: kcp.Namespace, Name: kcp.Name}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// cacheOf is a manager cache holding one control plane: Get gives a deep
// copy, as the cache does. The rest of client.Client is not called by a
// reconcile that sends nothing (the nil Client would panic).
type cacheOf struct {
	client.Client
	kcp *controlplanev1.KubeadmControlPlane
}

func (c cacheOf) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	out, ok := obj.(*controlplanev1.KubeadmControlPlane)
	if !ok || key != client.ObjectKeyFromObject(c.kcp) {
		return errors.New("not in the cache")
	}
	c.kcp.DeepCopyInto(out)
	return nil
}

// noReads is an API server the benchmark must not read.
type noReads struct{ b *testing.B }

func (n noReads) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	n.b.Fatal("a reconcile of recorded content read the API server")
	return nil
}

func (n noReads) List(context.Context, client.ObjectList, ...client.ListOption) error {
	n.b.Fatal("a reconcile of recorded content listed from the API server")
	return nil
}
