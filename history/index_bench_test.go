package history

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// BenchmarkIndexMemory measures the live heap the revision Index holds per
// recorded revision (B/record), for the records of a management cluster
// as the guard writes them — names, labels and annotations of
// revisions.RolloutRevision, metadata as the API server returns it:
//
//   - world=scale: 2,000 clusters in 20 namespaces, each a control plane
//     and 3 worker pools with 5 revisions (40,000 records), as
//     test/cmd/bench-scale creates them;
//   - world=deep: 500 worker pools with 20 revisions each.
//
// form=store is the Index's recordStore, filled as its reflector fills
// it; form=metadata is the same metadata kept as an ObjectMeta with its
// two maps (managed fields, owner references, finalizers and UID dropped,
// repeated strings shared) in an informer's indexer with an owner index,
// the form the Index first kept.
func BenchmarkIndexMemory(b *testing.B) {
	for _, world := range []struct {
		name string
		crs  func(b *testing.B) []*metav1.PartialObjectMetadata
	}{
		{"scale", scaleRecords},
		{"deep", deepRecords},
	} {
		crs := world.crs(b)
		for _, form := range []struct {
			name string
			fill func(b *testing.B, crs []*metav1.PartialObjectMetadata) any
		}{
			{"store", func(b *testing.B, crs []*metav1.PartialObjectMetadata) any {
				s := &recordStore{}
				items := make([]any, len(crs))
				for i, cr := range crs {
					items[i] = cr.DeepCopy()
				}
				if err := s.Replace(items, "1"); err != nil {
					b.Fatal(err)
				}
				return s
			}},
			{"metadata", func(b *testing.B, crs []*metav1.PartialObjectMetadata) any {
				store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{"owner": func(obj any) ([]string, error) {
					return []string{obj.(*metav1.PartialObjectMetadata).Labels[revisions.LabelOwnerUID]}, nil
				}})
				for _, cr := range crs {
					obj, err := sharedMetadata(cr.DeepCopy())
					if err != nil {
						b.Fatal(err)
					}
					if err := store.Add(obj); err != nil {
						b.Fatal(err)
					}
				}
				return store
			}},
		} {
			b.Run("world="+world.name+"/form="+form.name, func(b *testing.B) {
				var perRecord float64
				for b.Loop() {
					var before, after runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					store := form.fill(b, crs)
					runtime.GC()
					runtime.ReadMemStats(&after)
					perRecord = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(len(crs))
					runtime.KeepAlive(store)
				}
				b.ReportMetric(perRecord, "B/record")
			})
		}
	}
}

// scaleRecords are the RolloutRevisions of test/cmd/bench-scale's world
// of 2,000 clusters: in 20 namespaces, for each cluster its control plane
// (revision k at v1.(30+k).0) and 3 worker pools (v1.(29+k).0), 5
// revisions each, recorded as the guard records admitted changes.
func scaleRecords(b *testing.B) []*metav1.PartialObjectMetadata {
	const clusters, pools, perOwner = 2000, 3, 5
	var crs []*metav1.PartialObjectMetadata
	add := func(owner client.Object, kind kinds.Kind, n int, version func(k int)) {
		for k := 1; k <= perOwner; k++ {
			version(k)
			snap, err := kind.Snapshot(owner)
			if err != nil {
				b.Fatal(err)
			}
			cr := revisions.RolloutRevision(owner, kind.GVK, snap, guardRecord(k, fmt.Sprintf("v1.%d.0", 29+k)))
			cr.UID = types.UID(fmt.Sprintf("0d3b8f4e-77aa-4e1b-8c2d-%012d", n*perOwner+k))
			cr.ResourceVersion = fmt.Sprint(1_000_000 + n*perOwner + k)
			cr.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 1, 10, k, 0, 0, time.UTC))
			crs = append(crs, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}, ObjectMeta: cr.ObjectMeta})
		}
	}
	for i := range clusters {
		ns, cluster := fmt.Sprintf("scale-%02d", i%20), fmt.Sprintf("c%04d", i)
		kcp := &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster + "-cp", UID: types.UID(fmt.Sprintf("6f1c2a7e-0b1d-4c55-9a3e-%012d", 4*i))}}
		add(kcp, kinds.KubeadmControlPlane, 4*i, func(k int) { kcp.Spec.Version = fmt.Sprintf("v1.%d.0", 30+k) })
		for j := range pools {
			md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-md-%d", cluster, j),
				UID: types.UID(fmt.Sprintf("6f1c2a7e-0b1d-4c55-9a3e-%012d", 4*i+1+j))}}
			md.Spec.ClusterName = cluster
			add(md, kinds.MachineDeployment, 4*i+1+j, func(k int) { md.Spec.Template.Spec.Version = fmt.Sprintf("v1.%d.0", 29+k) })
		}
	}
	return crs
}

// deepRecords are 20 revisions of each of 500 worker pools in 50
// namespaces.
func deepRecords(b *testing.B) []*metav1.PartialObjectMetadata {
	const owners, perOwner = 500, 20
	var crs []*metav1.PartialObjectMetadata
	for o := range owners {
		md := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%d", o%50), Name: fmt.Sprintf("cluster-%d-md-%d", o/3, o%3),
			UID: types.UID(fmt.Sprintf("6f1c2a7e-0b1d-4c55-9a3e-%012d", o))}}
		for n := 1; n <= perOwner; n++ {
			md.Spec.Template.Spec.Version = fmt.Sprintf("v1.35.%d", n)
			snap, err := revisions.ForMachineDeployment(md)
			if err != nil {
				b.Fatal(err)
			}
			rec := guardRecord(n, md.Spec.Template.Spec.Version)
			rec.ChangedAt = time.Date(2026, 12, 1, 10, n, o%60, 0, time.UTC)
			cr := revisions.RolloutRevision(md, kinds.MachineDeployment.GVK, snap, rec)
			cr.UID = types.UID(fmt.Sprintf("0d3b8f4e-77aa-4e1b-8c2d-%012d", o*perOwner+n))
			cr.ResourceVersion = fmt.Sprint(1_000_000 + o*perOwner + n)
			cr.CreationTimestamp = metav1.NewTime(time.Date(2026, 12, 1, 10, n, 0, 0, time.UTC))
			crs = append(crs, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}, ObjectMeta: cr.ObjectMeta})
		}
	}
	return crs
}

// guardRecord is the record of revision n, made live at version by a
// GitOps controller.
func guardRecord(n int, version string) revisions.Record {
	return revisions.Record{Revision: int64(n), History: []int64{int64(n)},
		ChangedBy: "system:serviceaccount:flux-system:kustomize-controller", FieldManager: "kustomize-controller",
		ChangeCause: "spec.template.spec.version: " + version, ChangeType: revisions.ChangeRollout, ChangedAt: time.Date(2026, 12, 1, 10, n, 0, 0, time.UTC)}
}

// sharedMetadata keeps a RolloutRevision's metadata as an ObjectMeta —
// name, namespace, resourceVersion, labels and annotations, repeated
// strings shared — the form the revision Index first kept.
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

// shared returns the one copy of s the process keeps.
func shared(s string) string {
	return unique.Make(s).Value()
}
