package main

import (
	"encoding/json"
	"maps"
	"runtime"
	"testing"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/webhooks"
)

// BenchmarkCacheMemory measures the live heap the guard's cache holds per
// Cluster API object of the realistic world (B/object), control planes and
// worker pools stamped as the world's live revisions are: each object
// decoded from its JSON as the informer receives it, trimmed by the
// guard's transform (webhooks.CacheOptions) and kept in an informer
// indexer with a namespace index. It says where the memory of the
// 2,000-cluster run goes, kind by kind, beside the revision records
// (history's BenchmarkIndexMemory).
func BenchmarkCacheMemory(b *testing.B) {
	const clusters = 200
	for _, kind := range []struct {
		name      string
		perWorld  int
		make      func(b *testing.B, k int) client.Object
		transform toolscache.TransformFunc
	}{
		{"Cluster", clusters, func(_ *testing.B, i int) client.Object {
			return builder.Cluster(namespaceOf(i), clusterName(i)).WithControlPlane(kcpName(i)).WithInfrastructure(clusterName(i)).Build()
		}, webhooks.CacheTransform(kinds.Cluster)},
		{"KubeadmControlPlane", clusters, func(b *testing.B, i int) client.Object {
			kcp, err := worldKCP(i, true)
			if err != nil {
				b.Fatal(err)
			}
			withStatus(b, kcp, kcpStatus(clusterName(i), cpMachines, cpVersion, 1))
			kcp.SetAnnotations(stamps(record(revisionsPerObj)))
			return kcp
		}, webhooks.CacheTransform(kinds.KubeadmControlPlane)},
		{"MachineDeployment", clusters * mdsPerCluster, func(b *testing.B, k int) client.Object {
			i, j := k/mdsPerCluster, k%mdsPerCluster
			md := worldMD(i, j)
			withStatus(b, md, mdStatus(mdName(i, j), workerVersion, 2, 1))
			md.SetAnnotations(stamps(record(revisionsPerObj)))
			return md
		}, webhooks.CacheTransform(kinds.MachineDeployment)},
		{"Machine", clusters * (cpMachines + workerMachines), func(b *testing.B, k int) client.Object {
			i, m := k/(cpMachines+workerMachines), k%(cpMachines+workerMachines)
			machine := worldMachine(i, m)
			withStatus(b, machine, machineStatus(machine.Name, machine.Spec.Version, m < cpMachines, k))
			return machine
		}, webhooks.CompactMachine},
	} {
		b.Run("kind="+kind.name, func(b *testing.B) {
			// As the informer receives them: decoded from JSON.
			raws := make([][]byte, kind.perWorld)
			for k := range raws {
				raw, err := json.Marshal(kind.make(b, k))
				if err != nil {
					b.Fatal(err)
				}
				raws[k] = raw
			}
			proto := kind.make(b, 0)
			var perObject float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
				for _, raw := range raws {
					obj := proto.DeepCopyObject().(client.Object)
					if err := json.Unmarshal(raw, obj); err != nil {
						b.Fatal(err)
					}
					trimmed, err := kind.transform(obj)
					if err != nil {
						b.Fatal(err)
					}
					if err := store.Add(trimmed); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perObject = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(raws))
				runtime.KeepAlive(store)
			}
			b.ReportMetric(perObject, "B/object")
		})
	}
}

// stamps are the annotations the guard's stamper leaves on an object
// whose live revision is rec: its non-empty stamps (an empty one is
// deleted, see webhooks' stamp patch).
func stamps(rec revisions.Record) map[string]string {
	out := rec.Annotations()
	maps.DeleteFunc(out, func(_, v string) bool { return v == "" })
	return out
}

// withStatus sets obj's status from its JSON form, as the API server would
// decode it.
func withStatus(b *testing.B, obj client.Object, status map[string]any) {
	b.Helper()
	raw, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(raw, obj); err != nil {
		b.Fatal(err)
	}
}
