package webhooks

import (
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// CacheOptions returns the cache options of the guard's manager. The guard
// holds in memory every Cluster, control plane, worker pool and Machine of
// the management cluster, so each kind keeps only what some reader of the
// cache reads (a management cluster with thousands of clusters must not cost
// gigabytes):
//
//   - Cluster: spec.controlPlaneRef (the policy finds the control plane
//     through it); topology, variables, status and annotations are dropped.
//   - KubeadmControlPlane: its spec but the kubeadmConfigSpec, of which
//     only the etcd image tag stays (the version etcd runs),
//     status.version and status.versions (the versions it runs), the
//     project's own annotations (revision stamps and the highest versions
//     run), labels and owner references (revisions are owned by the
//     object). The kubeadmConfigSpec — files, commands, kubeadm's
//     configurations, most of a control plane's size — is read by no
//     policy rule; the history reconciler, which hashes it into the live
//     revision, reads a control plane from the API server instead when
//     its content is not recorded yet (RevisionContentCached).
//   - MachineDeployment: spec.clusterName and spec.template.spec.version
//     (the policy reads them), the project's annotations, labels and owner
//     references; no status, and none of the rest of its template, which
//     the history reconciler, hashing it into the live revision, reads from
//     the API server when it is not recorded yet (RevisionContentCached).
//   - MachinePool: spec.clusterName and spec.template (hashed into its
//     revision), the project's annotations, labels and owner references;
//     no status, and none of spec.providerIDList, which holds one entry per
//     instance (up to 10,000).
//   - Machine: kept as a compact entry of what the policy reads of it
//     (CompactMachine), which MachineStore reads; the cache cannot give it
//     back as a Machine.
//   - ClusterClass: spec.kubernetesVersions and the upgrade-plan extension
//     (how Cluster API plans a chained upgrade); its templates, variables
//     and patches are dropped.
//
// A control plane and a worker pool, cached without all of their revision
// content, carry the hash of it in their cached copy
// (history.AnnotationCachedHash), taken as they enter the cache.
//
// Every kind loses its managed fields. Other kinds (control planes of other
// providers, read as unstructured through the contract) keep their content
// minus managed fields. ControllerRevisions are not in this cache: see
// ClientOptions.
//
// pending, when not nil, keeps the whole revision content the cache saw
// last of a control plane or worker pool, for the history reconciler
// (history.Pending).
func CacheOptions(pending *history.Pending) cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&clusterv1.Cluster{}:                  {Transform: TrimCluster},
			&controlplanev1.KubeadmControlPlane{}: {Transform: func(obj any) (any, error) { return trimKubeadmControlPlane(obj, pending) }},
			&clusterv1.MachineDeployment{}:        {Transform: func(obj any) (any, error) { return trimMachineDeployment(obj, pending) }},
			&clusterv1.MachinePool{}:              {Transform: TrimMachinePool},
			&clusterv1.Machine{}:                  {Transform: CompactMachine},
			&clusterv1.ClusterClass{}:             {Transform: TrimClusterClass},
		},
	}
}

// RevisionContentCached says whether the guard's cache keeps all of what
// a revision of kind gvk is made of, so that the history reconciler can
// take an object's live revision from the cache. It does not for a
// KubeadmControlPlane, cached without its kubeadmConfigSpec, nor for a
// MachineDeployment, cached with only the version of its template (see
// CacheOptions): their cached copies carry the hash of that content, and
// the reconciler reads one from the API server when that content is not
// recorded as the object's stamps say and the content the cache saw of it
// is no longer kept aside (history.Pending) — rarely; never when the guard
// restarts with its history recorded. What that
// saves: 2,923 bytes of live heap per cached control plane of Cluster
// API's quick start against 6,483 whole, 7 MB at 2,000 clusters
// (BenchmarkCacheMemory).
func RevisionContentCached(gvk schema.GroupVersionKind) bool {
	switch gvk.GroupKind() {
	case controlplanev1.GroupVersion.WithKind("KubeadmControlPlane").GroupKind(), clusterv1.GroupVersion.WithKind("MachineDeployment").GroupKind():
		return false
	}
	return true
}

// ClientOptions returns the client options of the guard's manager: reads of
// ControllerRevisions through the client always go to the API server. A
// cached copy of every revision of every object, data included, would be
// the largest thing the guard holds; history.Index keeps only their
// metadata, in an informer of its own, and a revision's data is read live
// when needed.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&appsv1.ControllerRevision{}}}}
}

// trimMeta keeps the object metadata an informer and the guard's readers
// need, dropping managed fields and the annotations and labels of others
// (keepLabel says which labels stay; nil keeps none).
func trimMeta(m *metav1.ObjectMeta, keepOwners bool, keepLabel func(string) bool) {
	m.ManagedFields = nil
	m.Finalizers = nil
	if !keepOwners {
		m.OwnerReferences = nil
	}
	m.Annotations = ours(m.Annotations)
	m.Labels = filtered(m.Labels, keepLabel)
}

// ours keeps the annotations the project owns (revision stamps, highest
// versions run, the override) but history.AnnotationCachedHash, which only
// the cache sets (withContentHash).
func ours(in map[string]string) map[string]string {
	return filtered(in, func(k string) bool {
		return strings.HasPrefix(k, revisions.Prefix) && k != history.AnnotationCachedHash
	})
}

// withContentHash notes on a cached copy the hash of the revision content
// of the whole object, taken before the transform dropped part of it
// (history.AnnotationCachedHash): the history reconciler then knows whether
// that content is recorded without reading the object from the API server.
// A content whose revision cannot be taken gets no hash; the reconciler
// reads the object and says why.
func withContentHash(m *metav1.ObjectMeta, snap revisions.Snapshot, err error) {
	hash := snap.Hash
	if err != nil {
		hash = ""
	}
	out := make(map[string]string, len(m.Annotations)+1)
	maps.Copy(out, m.Annotations)
	out[history.AnnotationCachedHash] = history.CachedHashValue(hash)
	m.Annotations = out
}

// trimmedBefore says whether obj is a copy the cache already trimmed (it
// carries the hash the cache noted): an informer may pass what it holds
// through its transform again, and the transforms that note a hash must
// then leave it as it is.
func trimmedBefore(obj metav1.Object) bool {
	_, noted := history.CachedHash(obj)
	return noted
}

// filtered returns the entries of in that keep keeps, in a map of their
// exact size, keys and values shared with every other object's (see
// shared): thousands of control planes and worker pools carry the same
// label and annotation keys, and the same values of most of them (cluster
// names, revision numbers, who changed them and how).
func filtered(in map[string]string, keep func(string) bool) map[string]string {
	if keep == nil {
		return nil
	}
	n := 0
	for k := range in {
		if keep(k) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make(map[string]string, n)
	for k, v := range in {
		if keep(k) {
			out[shared(k)] = shared(v)
		}
	}
	return out
}

// TrimCluster is the cache transform of Clusters (see CacheOptions).
// Objects of other types are returned unchanged.
func TrimCluster(obj any) (any, error) {
	c, ok := obj.(*clusterv1.Cluster)
	if !ok {
		return obj, nil
	}
	trimMeta(&c.ObjectMeta, false, nil)
	c.Spec = clusterv1.ClusterSpec{ControlPlaneRef: c.Spec.ControlPlaneRef}
	c.Status = clusterv1.ClusterStatus{}
	return c, nil
}

// TrimKubeadmControlPlane is the cache transform of KubeadmControlPlanes
// (see CacheOptions), keeping no content aside. Objects of other types are
// returned unchanged.
func TrimKubeadmControlPlane(obj any) (any, error) { return trimKubeadmControlPlane(obj, nil) }

// trimKubeadmControlPlane is TrimKubeadmControlPlane, keeping the whole
// content of the control plane in pending (which may be nil).
func trimKubeadmControlPlane(obj any, pending *history.Pending) (any, error) {
	kcp, ok := obj.(*controlplanev1.KubeadmControlPlane)
	if !ok || trimmedBefore(kcp) {
		return obj, nil
	}
	snap, err := revisions.ForKubeadmControlPlane(kcp)
	if err == nil {
		pending.Keep(kcp, snap)
	}
	trimMeta(&kcp.ObjectMeta, true, allLabels)
	withContentHash(&kcp.ObjectMeta, snap, err)
	etcdImageTag := kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag
	kcp.Spec.KubeadmConfigSpec = bootstrapv1.KubeadmConfigSpec{}
	kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = etcdImageTag
	kcp.Status = controlplanev1.KubeadmControlPlaneStatus{
		Version:  kcp.Status.Version, //nolint:staticcheck // read by the policy on older controllers
		Versions: kcp.Status.Versions,
	}
	return kcp, nil
}

// TrimMachineDeployment is the cache transform of MachineDeployments (see
// CacheOptions), keeping no content aside. Objects of other types are
// returned unchanged.
func TrimMachineDeployment(obj any) (any, error) { return trimMachineDeployment(obj, nil) }

// trimMachineDeployment is TrimMachineDeployment, keeping the whole
// content of the worker pool in pending (which may be nil).
func trimMachineDeployment(obj any, pending *history.Pending) (any, error) {
	md, ok := obj.(*clusterv1.MachineDeployment)
	if !ok || trimmedBefore(md) {
		return obj, nil
	}
	snap, err := revisions.ForMachineDeployment(md)
	if err == nil {
		pending.Keep(md, snap)
	}
	trimMeta(&md.ObjectMeta, true, allLabels)
	withContentHash(&md.ObjectMeta, snap, err)
	version := md.Spec.Template.Spec.Version
	md.Spec = clusterv1.MachineDeploymentSpec{ClusterName: md.Spec.ClusterName}
	md.Spec.Template.Spec.Version = version
	md.Status = clusterv1.MachineDeploymentStatus{}
	return md, nil
}

// TrimMachinePool is the cache transform of MachinePools (see
// CacheOptions). Objects of other types are returned unchanged.
func TrimMachinePool(obj any) (any, error) {
	mp, ok := obj.(*clusterv1.MachinePool)
	if !ok {
		return obj, nil
	}
	trimMeta(&mp.ObjectMeta, true, allLabels)
	mp.Spec = clusterv1.MachinePoolSpec{ClusterName: mp.Spec.ClusterName, Template: mp.Spec.Template}
	mp.Status = clusterv1.MachinePoolStatus{}
	return mp, nil
}

// TrimClusterClass is the cache transform of ClusterClasses (see
// CacheOptions). Objects of other types are returned unchanged.
func TrimClusterClass(obj any) (any, error) {
	cc, ok := obj.(*clusterv1.ClusterClass)
	if !ok {
		return obj, nil
	}
	trimMeta(&cc.ObjectMeta, false, nil)
	spec := clusterv1.ClusterClassSpec{KubernetesVersions: cc.Spec.KubernetesVersions}
	spec.Upgrade.External.GenerateUpgradePlanExtension = cc.Spec.Upgrade.External.GenerateUpgradePlanExtension
	cc.Spec = spec
	cc.Status = clusterv1.ClusterClassStatus{}
	return cc, nil
}

// allLabels keeps every label: few and small on worker pools and control
// planes, and the cluster-name label names a control plane's Cluster.
func allLabels(string) bool { return true }

var _ toolscache.TransformFunc = TrimCluster
