package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// fullWorld is a cluster whose objects carry everything a real management
// cluster puts on them that the guard never reads: managed fields, other
// controllers' annotations and finalizers, conditions, addresses, topology.
// Worker Machine md-1-m runs (per its node) v1.31.0 while its spec says
// v1.34.2, so only a cache that kept status.nodeInfo sees the skew. Worker
// Machines carry the labels that name their pool, so only a cache that kept
// them words a refusal per pool.
func fullWorld() []client.Object {
	world := cluster("v1.34.2", "v1.34.2", "v1.34.2")
	managed := []metav1.ManagedFieldsEntry{{Manager: "capi-controller", APIVersion: "cluster.x-k8s.io/v1beta2", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}}}
	decorate := func(m *metav1.ObjectMeta) {
		m.ManagedFields = managed
		m.Finalizers = []string{"cluster.cluster.x-k8s.io"}
		m.UID = types.UID("uid-" + m.Name)
		m.CreationTimestamp = metav1.Date(2026, 1, 2, 3, 4, 5, 0, metav1.Now().Location())
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"a":"large blob"}`
		m.Annotations["cluster.x-k8s.io/paused"] = ""
		m.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "c1", UID: "uid-c1"}}
	}
	conditions := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "all good"}}
	for _, obj := range world {
		switch o := obj.(type) {
		case *clusterv1.Cluster:
			decorate(&o.ObjectMeta)
			o.Annotations[revisions.AnnotationRevision] = "5"
			o.Spec.Topology = clusterv1.Topology{Version: "v1.34.2", ClassRef: clusterv1.ClusterClassRef{Name: "quick-start"},
				Variables: []clusterv1.ClusterVariable{{Name: "imageRepository", Value: apiextensionsv1.JSON{Raw: []byte(`"registry.example/images"`)}}}}
			o.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevCluster", Name: "c1"}
			o.Status.Conditions = conditions
		case *controlplanev1.KubeadmControlPlane:
			decorate(&o.ObjectMeta)
			o.Annotations[revisions.AnnotationRevision] = "3"
			o.Annotations[revisions.AnnotationHighestRun] = `{"kubernetes":"v1.34.2","kubernetesRevision":2}`
			o.Status.Conditions = conditions
			o.Status.Replicas = ptr.To[int32](3)
			o.Status.Version = "v1.34.2" //nolint:staticcheck // the field older controllers set
			o.Spec.KubeadmConfigSpec.PreKubeadmCommands = []string{"sysctl --system"}
			o.Spec.KubeadmConfigSpec.Files = []bootstrapv1.File{{Path: "/etc/sysctl.d/99-kubernetes.conf", Content: "net.ipv4.ip_forward = 1\n"}}
			o.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = "3.5.21-0"
		case *clusterv1.MachineDeployment:
			decorate(&o.ObjectMeta)
			o.Annotations[revisions.AnnotationRevision] = "2"
			// Set on the stored object by someone: the cache's own note
			// must replace it.
			o.Annotations[history.AnnotationCachedHash] = "0000000000"
			o.Spec.Replicas = ptr.To[int32](3)
			o.Spec.Template.Labels = map[string]string{"pool": o.Name}
			o.Spec.Template.Spec.FailureDomain = "zone-a"
			o.Spec.Template.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: o.Name}
			o.Spec.Template.Spec.Bootstrap.ConfigRef = clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfigTemplate", Name: o.Name}
			o.Status.Conditions = conditions
			o.Status.Replicas = ptr.To[int32](3)
		case *clusterv1.Machine:
			decorate(&o.ObjectMeta)
			o.Labels = map[string]string{clusterv1.MachineDeploymentNameLabel: strings.TrimSuffix(o.Name, "-m"), "other": "x"}
			o.Spec.ProviderID = "dev://" + o.Name
			o.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachine", Name: o.Name}
			o.Status.Addresses = clusterv1.MachineAddresses{{Type: clusterv1.MachineInternalIP, Address: "10.0.0.1"}}
			o.Status.Conditions = conditions
			if o.Name == "md-1-m" {
				o.Status.NodeInfo = &corev1.NodeSystemInfo{KubeletVersion: "v1.31.0", OSImage: "Ubuntu", KernelVersion: "6.8"}
			}
		}
	}
	world = append(world,
		&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp-0", Labels: map[string]string{clusterv1.MachineControlPlaneLabel: "", clusterv1.ClusterNameLabel: "c1"}},
			Spec: clusterv1.MachineSpec{ClusterName: "c1", Version: "v1.30.0"}},
		&clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mp-0", Annotations: map[string]string{"other": "x", revisions.AnnotationRevision: "4"},
			Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}, UID: "uid-mp-0",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "c1", UID: "uid-c1"}}},
			Spec: clusterv1.MachinePoolSpec{ClusterName: "c1", Replicas: ptr.To[int32](2), ProviderIDList: []string{"dev://mp-0-a", "dev://mp-0-b"},
				Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{Version: "v1.31.5",
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{Kind: "DevMachinePool", Name: "mp-0"}}}},
			Status: clusterv1.MachinePoolStatus{Replicas: ptr.To[int32](2), NodeRefs: []corev1.ObjectReference{{Kind: "Node", Name: "mp-0-a"}}}},
		&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mp-0-m", Labels: map[string]string{clusterv1.MachinePoolNameLabel: "mp-0", "other": "x"}},
			Spec: clusterv1.MachineSpec{ClusterName: "c1", Version: "v1.31.5"}},
	)
	return world
}

// trimmed returns deep copies of objs passed through the transforms of
// CacheOptions, as the guard's cache would hold them — Machines as the
// Machine store gives them back to the policy.
func trimmed(t *testing.T, objs []client.Object) []client.Object {
	t.Helper()
	return trimmedKeeping(t, objs, nil)
}

// trimmedKeeping is trimmed through the cache options keeping unrecorded
// content in pending.
func trimmedKeeping(t *testing.T, objs []client.Object, pending *history.Pending) []client.Object {
	t.Helper()
	opts := CacheOptions(pending)
	var out []client.Object
	for _, obj := range objs {
		var transform func(any) (any, error)
		for key, by := range opts.ByObject {
			if fmt.Sprintf("%T", key) == fmt.Sprintf("%T", obj) {
				transform = by.Transform
			}
		}
		if _, ok := obj.(*clusterv1.Machine); ok {
			transform = func(in any) (any, error) {
				e, err := toMachineEntry(in)
				if err != nil {
					return nil, err
				}
				m := e.(*machineEntry).machine()
				return &m, nil
			}
		}
		require.NotNil(t, transform, "no cache transform for %T", obj)
		got, err := transform(obj.DeepCopyObject())
		require.NoError(t, err)
		out = append(out, got.(client.Object))
	}
	return out
}

// TestCacheTransformsKeepWhatThePolicyReads judges the same changes against
// the full objects and against the trimmed ones the guard caches: every
// decision and warning must be the same. Each change is refused for a reason
// that needs a field the transforms must keep, so a transform that drops
// one changes a decision.
func TestCacheTransformsKeepWhatThePolicyReads(t *testing.T) {
	md := func(version string) *clusterv1.MachineDeployment {
		m := &clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "md-0"}, Spec: clusterv1.MachineDeploymentSpec{ClusterName: "c1"}}
		m.Spec.Template.Spec.Version = version
		return m
	}
	topology := func(version string) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"}}
		c.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: "c1-cp"}
		c.Spec.Topology.Version = version
		return c
	}
	cases := []struct {
		name       string
		old, new   client.Object
		wantInRule string
		wantNames  []string
	}{
		// Needs the Cluster's controlPlaneRef and the KCP's spec.version.
		{name: "worker newer than its control plane", old: md("v1.34.2"), new: md("v1.35.0"), wantInRule: "WorkerNewerThanControlPlane"},
		// Needs pools' versions, the pool of a MachinePool, Machines' node
		// versions and the control-plane label (cp-0 at v1.30.0 is not a worker).
		{name: "control plane upgrade leaves workers too old", old: kcp("v1.34.2"), new: kcp("v1.35.0"), wantInRule: "ControlPlaneLeavesWorkerTooOld",
			wantNames: []string{"Machine md-1-m of MachineDeployment md-1 runs v1.31.0", "MachinePool mp-0 and its Machine mp-0-m run v1.31.5"}},
		// Needs the KCP's running versions and highest-run stamp from the cache.
		{name: "topology downgrade", old: topology("v1.34.2"), new: topology("v1.33.0"), wantInRule: "ControlPlaneDowngrade"},
		{name: "topology upgrade past the workers", old: topology("v1.34.2"), new: topology("v1.35.0"), wantInRule: "ControlPlaneLeavesWorkerTooOld",
			wantNames: []string{"Machine md-1-m of MachineDeployment md-1 runs v1.31.0"}},
	}
	full, cached := testFacts(t, fullWorld()...), testFacts(t, trimmed(t, fullWorld())...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			want, wantWarnings, err := full.Decide(ctx, tc.old, tc.new)
			require.NoError(t, err)
			got, gotWarnings, err := cached.Decide(ctx, tc.old, tc.new)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.Equal(t, wantWarnings, gotWarnings)
			refusal := policy.RuleIDs(got)
			require.Contains(t, refusal, tc.wantInRule, "the case must exercise the cached facts: %+v", got)
			text, _ := json.Marshal(got)
			for _, name := range tc.wantNames {
				assert.Contains(t, string(text), name)
			}
		})
	}
}

// TestCacheTransformsKeepWhatHistoryReads checks that the history
// reconciler records the same revision from a trimmed object as from the
// whole one — same content hash, stamps, highest versions run, owner,
// Cluster, topology ownership and creation time — for every kind whose revision content the cache keeps
// (RevisionContentCached: MachinePools). A KubeadmControlPlane's and a
// MachineDeployment's it does not keep: their cached copy carries the
// hash of the whole content (history.AnnotationCachedHash), and the
// reconciler reads one from the API server when that content is not
// recorded (history's TestReconcilerReadsTheObjectFromObjectReader); all
// the rest of what history reads stays.
func TestCacheTransformsKeepWhatHistoryReads(t *testing.T) {
	world := fullWorld()
	pending := history.NewPending(0)
	small := trimmedKeeping(t, world, pending)
	for i, obj := range world {
		kind, ok := kinds.HistoryOf(obj)
		if !ok {
			continue
		}
		t.Run(kind.GVK.Kind+"/"+obj.GetName(), func(t *testing.T) {
			want, err := kind.Snapshot(obj)
			require.NoError(t, err)
			got, err := kind.Snapshot(small[i])
			require.NoError(t, err)
			if RevisionContentCached(kind.GVK) {
				assert.Equal(t, want.Hash, got.Hash)
				assert.NotContains(t, small[i].GetAnnotations(), history.AnnotationCachedHash)
				_, kept := pending.Take(obj.GetUID(), want.Hash)
				assert.False(t, kept, "content the cache keeps whole is kept aside too")
			} else {
				assert.NotEqual(t, want.Hash, got.Hash, "the cache keeps all of a %s's revision content: read it from the cache again", kind.GVK.Kind)
				hash, noted := history.CachedHash(small[i])
				assert.True(t, noted)
				assert.Equal(t, want.Hash, hash, "the hash of the whole content")
				// An informer may pass what it holds through its transform
				// again: the copy, and its hash, stay as they are.
				// The whole content is kept aside for the history
				// reconciler, under that hash.
				kept, ok := pending.Take(obj.GetUID(), hash)
				require.True(t, ok, "the whole content kept aside")
				assert.Equal(t, want, kept)
				again := trimmedKeeping(t, []client.Object{small[i]}, pending)[0]
				assert.Equal(t, small[i], again, "transformed twice")
				_, ok = pending.Take(obj.GetUID(), got.Hash)
				assert.False(t, ok, "the trimmed copy's content kept aside")
				_, ok = pending.Take(obj.GetUID(), want.Hash)
				assert.False(t, ok, "content kept aside again when transformed twice")
			}
			assert.Equal(t, revisions.StampsOf(obj), revisions.StampsOf(small[i]))
			assert.NotZero(t, revisions.StampsOf(small[i]).Revision)
			assert.Equal(t, obj.GetUID(), small[i].GetUID())
			assert.Equal(t, kind.ClusterName(obj), kind.ClusterName(small[i]), "the Cluster it belongs to")
			_, owned := obj.GetLabels()[clusterv1.ClusterTopologyOwnedLabel]
			_, keptOwned := small[i].GetLabels()[clusterv1.ClusterTopologyOwnedLabel]
			assert.Equal(t, owned, keptOwned, "whether a topology owns it")
			assert.Equal(t, obj.GetCreationTimestamp(), small[i].GetCreationTimestamp())
			assert.Equal(t, obj.GetGeneration(), small[i].GetGeneration())
			if k, isKCP := obj.(*controlplanev1.KubeadmControlPlane); isKCP {
				cached := small[i].(*controlplanev1.KubeadmControlPlane)
				assert.Equal(t, policy.HighestRunOf(k), policy.HighestRunOf(cached))
				// What says whether it ever had a Machine.
				assert.Equal(t, k.Status.Initialization, cached.Status.Initialization)
				assert.Equal(t, k.Status.Replicas, cached.Status.Replicas)
				assert.Equal(t, k.Status.LastRemediation, cached.Status.LastRemediation)
			}
		})
	}
}

// TestCacheTransformsDrop checks that what the guard never reads is gone,
// which is the point of the transforms.
func TestCacheTransformsDrop(t *testing.T) {
	small := trimmed(t, fullWorld())
	for _, obj := range small {
		t.Run(fmt.Sprintf("%T/%s", obj, obj.GetName()), func(t *testing.T) {
			assert.Empty(t, obj.GetManagedFields())
			assert.Empty(t, obj.GetFinalizers())
			for k := range obj.GetAnnotations() {
				assert.Contains(t, k, revisions.Prefix, "annotation %s is not the guard's", k)
			}
			switch o := obj.(type) {
			case *clusterv1.Cluster:
				// The topology's class and version say it has one; its
				// variables are gone.
				assert.Equal(t, clusterv1.ClusterSpec{ControlPlaneRef: o.Spec.ControlPlaneRef,
					Topology: clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "quick-start"}, Version: "v1.34.2"}}, o.Spec)
				assert.NotEmpty(t, o.Spec.ControlPlaneRef.Name)
				assert.Empty(t, o.Status.Conditions)
			case *controlplanev1.KubeadmControlPlane:
				assert.Empty(t, o.Status.Conditions)
				want := bootstrapv1.KubeadmConfigSpec{}
				want.ClusterConfiguration.Etcd.Local.ImageTag = "3.5.21-0"
				assert.Equal(t, want, o.Spec.KubeadmConfigSpec, "the kubeadmConfigSpec but the etcd image tag")
			case *clusterv1.MachineDeployment:
				assert.Equal(t, clusterv1.MachineDeploymentStatus{}, o.Status)
				want := clusterv1.MachineDeploymentSpec{ClusterName: "c1"}
				want.Template.Spec.Version = "v1.34.2"
				assert.Equal(t, want, o.Spec, "the cluster name and the template's version")
			case *clusterv1.MachinePool:
				assert.Empty(t, o.Spec.ProviderIDList)
				assert.Nil(t, o.Spec.Replicas)
				assert.Equal(t, clusterv1.MachinePoolStatus{}, o.Status)
			case *clusterv1.Machine:
				assert.Empty(t, o.Spec.ProviderID)
				assert.Empty(t, o.Spec.InfrastructureRef.Name)
				assert.Empty(t, o.Status.Addresses)
				assert.Empty(t, o.Status.Conditions)
				assert.Empty(t, o.OwnerReferences)
				if o.Status.NodeInfo != nil {
					assert.Equal(t, corev1.NodeSystemInfo{KubeletVersion: o.Status.NodeInfo.KubeletVersion}, *o.Status.NodeInfo)
				}
			}
		})
	}
}

// TestCacheTransformsPassOtherTypes: a transform given an object of another
// type (a deletion tombstone) returns it unchanged rather than failing.
func TestCacheTransformsPassOtherTypes(t *testing.T) {
	tombstone := struct{ Key string }{Key: "ns/c1"}
	for key, by := range CacheOptions(nil).ByObject {
		got, err := by.Transform(tombstone)
		require.NoError(t, err, "%T", key)
		assert.Equal(t, tombstone, got, "%T", key)
	}
}

// TestRolloutRevisionsAreNeverCached: history reads them live.
func TestRolloutRevisionsAreNeverCached(t *testing.T) {
	opts := ClientOptions()
	require.NotNil(t, opts.Cache)
	require.Len(t, opts.Cache.DisableFor, 1)
	assert.Equal(t, "*v1alpha1.RolloutRevision", fmt.Sprintf("%T", opts.Cache.DisableFor[0]))
	for key := range CacheOptions(nil).ByObject {
		assert.NotEqual(t, "*v1alpha1.RolloutRevision", fmt.Sprintf("%T", key))
	}
}

// TestCacheTransformRemembersContentHashes: an event that changes nothing of
// an object's spec (its generation stays), or nothing of its content (a
// scale), reuses the content hash noted and takes no snapshot (keeps
// nothing aside); new content is hashed anew; an object being deleted is
// forgotten.
func TestCacheTransformRemembersContentHashes(t *testing.T) {
	var md *clusterv1.MachineDeployment
	for _, obj := range fullWorld() {
		if m, ok := obj.(*clusterv1.MachineDeployment); ok {
			md = m
			break
		}
	}
	require.NotNil(t, md)
	md.Generation = 4
	pending := history.NewPending(0)
	transform := cacheTransform(kinds.MachineDeployment, pending)
	through := func(m *clusterv1.MachineDeployment) *clusterv1.MachineDeployment {
		t.Helper()
		out, err := transform(m.DeepCopy())
		require.NoError(t, err)
		return out.(*clusterv1.MachineDeployment)
	}
	hashOf := func(m *clusterv1.MachineDeployment) string {
		t.Helper()
		hash, noted := history.CachedHash(m)
		require.True(t, noted)
		return hash
	}
	first := through(md)
	want, err := kinds.MachineDeployment.Snapshot(md)
	require.NoError(t, err)
	require.Equal(t, want.Hash, hashOf(first))
	_, kept := pending.Take(md.UID, want.Hash)
	require.True(t, kept, "the first event's content kept aside")

	// At the same generation: the hash noted then, nothing kept aside.
	// (The template is changed here behind the generation's back only to
	// show that the memory is what answers; the API server never sends
	// that.)
	status := md.DeepCopy()
	status.Status.Replicas = new(int32(7))
	status.Labels = map[string]string{"team": "c"}
	status.Spec.Template.Spec.Version = "v1.99.0"
	assert.Equal(t, want.Hash, hashOf(through(status)), "same generation")
	assert.Zero(t, pending.Len(), "a status or label event keeps content aside")

	// A new generation of the same content: the same hash, no snapshot.
	scaled := md.DeepCopy()
	scaled.Generation = 5
	scaled.Spec.Replicas = new(int32(9))
	assert.Equal(t, want.Hash, hashOf(through(scaled)), "replicas change no content")
	assert.Zero(t, pending.Len(), "a scale keeps content aside: its snapshot was taken")
	edited := scaled.DeepCopy()
	edited.Generation = 6
	edited.Spec.Template.Spec.Version = "v1.35.0"
	newSnap, err := kinds.MachineDeployment.Snapshot(edited)
	require.NoError(t, err)
	require.NotEqual(t, want.Hash, newSnap.Hash)
	assert.Equal(t, newSnap.Hash, hashOf(through(edited)), "a template edit")
	assert.Equal(t, 1, pending.Len(), "a template edit's content kept aside")

	// Another object at the same generation is not taken for this one.
	other := edited.DeepCopy()
	other.UID = "uid-other"
	other.Spec.Template.Spec.Version = "v1.34.2"
	otherSnap, err := kinds.MachineDeployment.Snapshot(other)
	require.NoError(t, err)
	assert.Equal(t, otherSnap.Hash, hashOf(through(other)))

	// Deleted, then at the same generation again (a test only): hashed anew.
	deleting := edited.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	through(deleting)
	again := edited.DeepCopy()
	again.Spec.Template.Spec.Version = "v1.36.0"
	againSnap, err := kinds.MachineDeployment.Snapshot(again)
	require.NoError(t, err)
	assert.Equal(t, againSnap.Hash, hashOf(through(again)), "a deleted object's hash forgotten")
}

// BenchmarkCacheTransformEvent measures the cache transform of one watch
// event of a MachineDeployment and a KubeadmControlPlane already cached:
// a status update (same generation), a scale (a new generation, the same
// content) and a template edit (new content).
func BenchmarkCacheTransformEvent(b *testing.B) {
	for _, obj := range fullWorld() {
		kind, ok := kinds.HistoryOf(obj)
		if !ok || RevisionContentCached(kind.GVK) || kind.GVK.Kind == "Cluster" {
			continue
		}
		obj.SetGeneration(1)
		events := []struct {
			name string
			edit func(client.Object, int)
		}{
			{"status", func(client.Object, int) {}},
			{"replicas", func(o client.Object, i int) { o.SetGeneration(int64(i + 2)) }},
			{"template", func(o client.Object, i int) {
				o.SetGeneration(int64(i + 2))
				switch o := o.(type) {
				case *clusterv1.MachineDeployment:
					o.Spec.Template.Spec.Version = fmt.Sprintf("v1.34.%d", i)
				case *controlplanev1.KubeadmControlPlane:
					o.Spec.Version = fmt.Sprintf("v1.34.%d", i)
				}
			}},
		}
		for _, ev := range events {
			b.Run(kind.GVK.Kind+"/"+ev.name, func(b *testing.B) {
				transform := cacheTransform(kind, history.NewPending(0))
				if _, err := transform(obj.DeepCopyObject()); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					o := obj.DeepCopyObject().(client.Object)
					ev.edit(o, i)
					b.StartTimer()
					if _, err := transform(o); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
