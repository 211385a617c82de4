package history

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// BenchmarkIndexMemory measures the live heap the revision Index holds per
// recorded revision (B/revision), in an informer indexer with the owner
// index, for 10,000 revisions of 500 MachineDeployments in 50 namespaces
// — records as the guard writes them, metadata as the API server returns
// it. form=entry is the Index's indexEntry; form=metadata is the same
// metadata kept as an ObjectMeta with its two maps (managed fields, owner
// references, finalizers and UID dropped, repeated strings shared), the
// form the Index kept before.
func BenchmarkIndexMemory(b *testing.B) {
	const owners, perOwner = 500, 20
	var crs []*metav1.PartialObjectMetadata
	for o := range owners {
		md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%d", o%50), Name: fmt.Sprintf("cluster-%d-md-%d", o/3, o%3),
			UID: types.UID(fmt.Sprintf("6f1c2a7e-0b1d-4c55-9a3e-%012d", o))}}
		mdGVK := clusterv1.GroupVersion.WithKind("MachineDeployment")
		for n := 1; n <= perOwner; n++ {
			md.Spec.Template.Spec.Version = fmt.Sprintf("v1.35.%d", n)
			snap, err := revisions.ForMachineDeployment(md)
			if err != nil {
				b.Fatal(err)
			}
			cr := revisions.RolloutRevision(md, mdGVK, snap, revisions.Record{Revision: int64(n), History: []int64{int64(n)},
				ChangedBy: "system:serviceaccount:flux-system:kustomize-controller", FieldManager: "kustomize-controller",
				ChangeCause: "spec.template.spec.version", ChangeType: revisions.ChangeRollout, ChangedAt: time.Date(2026, 12, 1, 10, n, o%60, 0, time.UTC)})
			cr.UID = types.UID(fmt.Sprintf("0d3b8f4e-77aa-4e1b-8c2d-%012d", o*perOwner+n))
			cr.ResourceVersion = fmt.Sprint(1_000_000 + o*perOwner + n)
			cr.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 1, 10, n, 0, 0, time.UTC))
			crs = append(crs, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}, ObjectMeta: cr.ObjectMeta})
		}
	}
	for _, form := range []struct {
		name      string
		transform toolscache.TransformFunc
		owner     toolscache.IndexFunc
	}{
		{"entry", toEntry, byOwnerUID},
		{"metadata", sharedMetadata, func(obj any) ([]string, error) {
			return []string{obj.(*metav1.PartialObjectMetadata).Labels[revisions.LabelOwnerUID]}, nil
		}},
	} {
		b.Run("form="+form.name, func(b *testing.B) {
			var perRevision float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{ownerUIDIndex: form.owner})
				for _, cr := range crs {
					obj, err := form.transform(cr.DeepCopy())
					if err != nil {
						b.Fatal(err)
					}
					if err := store.Add(obj); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perRevision = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(crs))
				runtime.KeepAlive(store)
			}
			b.ReportMetric(perRevision, "B/revision")
		})
	}
}

// sharedMetadata keeps a RolloutRevision's metadata as an ObjectMeta —
// name, namespace, resourceVersion, labels and annotations, repeated
// strings shared — the form the revision Index kept before indexEntry.
func sharedMetadata(in any) (any, error) {
	obj := in.(*metav1.PartialObjectMetadata)
	out := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: shared(appsv1.SchemeGroupVersion.String()), Kind: shared("RolloutRevision")}}
	out.Name, out.Namespace, out.ResourceVersion = obj.Name, shared(obj.Namespace), obj.ResourceVersion
	out.Labels = make(map[string]string, len(obj.Labels))
	for k, v := range obj.Labels {
		if k != revisions.LabelHash {
			v = shared(v)
		}
		out.Labels[shared(k)] = v
	}
	out.Annotations = make(map[string]string, len(obj.Annotations))
	for k, v := range obj.Annotations {
		if k != revisions.AnnotationChangedAt {
			v = shared(v)
		}
		out.Annotations[shared(k)] = v
	}
	return out, nil
}
