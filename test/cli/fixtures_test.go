package cli

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// world is one Cluster API cluster in a namespace of its own: Cluster c1,
// KubeadmControlPlane c1-control-plane, MachineDeployment c1-md-0, and the
// templates they may switch between: DevMachineTemplates c1-control-plane,
// c1-control-plane-1, c1-md-0, c1-md-1 and KubeadmConfigTemplates c1-md-0,
// c1-md-1.
type world struct {
	ns      string
	cluster *clusterv1.Cluster
	kcp     *controlplanev1.KubeadmControlPlane
	md      *clusterv1.MachineDeployment
}

// worldSpec says how a new world starts.
type worldSpec struct {
	cpVersion string // KubeadmControlPlane spec.version
	mdVersion string // MachineDeployment version
	etcdTag   string // explicit etcd image tag, "" for kubeadm's default
	topology  bool   // managed by the Cluster's topology
}

const (
	clusterName = "c1"
	kcpName     = "c1-control-plane"
	mdName      = "c1-md-0"
)

// newWorld creates namespace ns and a cluster in it, and waits until the
// guard's cache has seen it.
func newWorld(t *testing.T, ns string, spec worldSpec) *world {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	for _, name := range []string{"c1-control-plane", "c1-control-plane-1", "c1-md-0", "c1-md-1"} {
		createDevMachineTemplate(t, ns, name)
	}
	for _, name := range []string{"c1-md-0", "c1-md-1"} {
		require.NoError(t, c.Create(ctx, &bootstrapv1.KubeadmConfigTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
	}

	w := &world{ns: ns}
	w.cluster = &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName},
		Spec: clusterv1.ClusterSpec{
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane", Name: kcpName},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevCluster", Name: clusterName},
		},
	}
	labels := map[string]string{clusterv1.ClusterNameLabel: clusterName}
	mdLabels := map[string]string{clusterv1.ClusterNameLabel: clusterName, "pool": "md-0"}
	if spec.topology {
		w.cluster.Spec.Topology = clusterv1.Topology{
			ClassRef: clusterv1.ClusterClassRef{Name: "quick-start"},
			Version:  spec.cpVersion,
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{
				{Class: "default-worker", Name: "md-other"},
				{Class: "default-worker", Name: "md-0", Rollout: clusterv1.MachineDeploymentTopologyRolloutSpec{
					Strategy: clusterv1.MachineDeploymentTopologyRolloutStrategy{Type: clusterv1.RollingUpdateMachineDeploymentStrategyType},
				}},
			}},
		}
		labels[clusterv1.ClusterTopologyOwnedLabel] = ""
		mdLabels[clusterv1.ClusterTopologyOwnedLabel] = ""
		mdLabels[clusterv1.ClusterTopologyMachineDeploymentNameLabel] = "md-0"
	}
	require.NoError(t, c.Create(ctx, w.cluster))

	w.kcp = &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kcpName, Labels: labels},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Replicas: ptr.To[int32](3),
			Version:  spec.cpVersion,
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{
				Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: "c1-control-plane"},
				},
			},
		},
	}
	w.kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = spec.etcdTag
	require.NoError(t, c.Create(ctx, w.kcp))

	w.md = &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mdName, Labels: mdLabels},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: clusterName,
			Replicas:    ptr.To[int32](3),
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{"pool": "md-0"}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"pool": "md-0"}},
				Spec: clusterv1.MachineSpec{
					ClusterName: clusterName,
					Version:     spec.mdVersion,
					Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfigTemplate", Name: "c1-md-0",
					}},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: "c1-md-0",
					},
				},
			},
		},
	}
	require.NoError(t, c.Create(ctx, w.md))
	waitForGuardCache(t, w)
	return w
}

// createDevMachineTemplate creates a DevMachineTemplate (Cluster API's
// development infrastructure provider).
func createDevMachineTemplate(t *testing.T, ns, name string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
		"kind":       "DevMachineTemplate",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       map[string]any{"template": map[string]any{"spec": map[string]any{"backend": map[string]any{"docker": map[string]any{}}}}},
	}}
	require.NoError(t, env.Client.Create(context.Background(), u))
}

// refresh re-reads every object of the world.
func (w *world) refresh(t *testing.T) {
	t.Helper()
	for _, obj := range []client.Object{w.cluster, w.kcp, w.md} {
		require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}
}

// stamps reads the revision stamps of obj as stored.
func stamps(t *testing.T, obj client.Object) revisions.Record {
	t.Helper()
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	rec, err := revisions.RecordFromAnnotations(obj.GetAnnotations())
	require.NoError(t, err)
	return rec
}

// waitForGuardCache waits until the guard judges the world's objects with
// all of them in its cache (see framework.WaitGuardSees).
func waitForGuardCache(t *testing.T, w *world) {
	t.Helper()
	require.NoError(t, env.WaitGuardSees(context.Background(), w.md, w.kcp))
}

// waitRecorded waits until the guard has recorded obj's live revision in a
// ControllerRevision (its reconciler does so shortly after each change), so
// that history output does not depend on its timing.
func waitRecorded(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
		var snap revisions.Snapshot
		var err error
		switch o := obj.(type) {
		case *clusterv1.MachineDeployment:
			snap, err = revisions.ForMachineDeployment(o)
		case *clusterv1.MachinePool:
			snap, err = revisions.ForMachinePool(o)
		case *controlplanev1.KubeadmControlPlane:
			snap, err = revisions.ForKubeadmControlPlane(o)
		}
		require.NoError(t, err)
		revs, _, err := history.List(ctx, env.Client, obj.GetNamespace(), string(obj.GetUID()))
		require.NoError(t, err)
		rec := stamps(t, obj)
		for _, r := range revs {
			if r.Snapshot.Hash == snap.Hash && r.Record.Revision == rec.Revision {
				return true
			}
		}
		return false
	}, 20*time.Second, 100*time.Millisecond, "the live revision of %s was never recorded", obj.GetName())
}

// settle fixes the CLI's clock 30 hours after the latest stamp of objs
// (revisions and restarts), so that every AGE in a history table reads
// "30h" whatever the wall clock.
func settle(t *testing.T, objs ...client.Object) {
	t.Helper()
	var latest time.Time
	for _, obj := range objs {
		waitRecorded(t, obj)
		rec := stamps(t, obj)
		if rec.ChangedAt.After(latest) {
			latest = rec.ChangedAt
		}
		if obj.GetCreationTimestamp().After(latest) {
			latest = obj.GetCreationTimestamp().Time
		}
	}
	setNow(latest.Add(30*time.Hour + 30*time.Minute))
	t.Cleanup(func() { setNow(time.Time{}) })
}

// grantViewer binds the user "viewer" to a Role in ns with rules, and waits
// until the API server's authorizer, which learns of bindings through its
// own cache, lets the viewer read every one of objs: the refusals a test
// then shows are the ones the Role leaves, not a binding not yet seen.
func grantViewer(t *testing.T, ns string, rules []rbacv1.PolicyRule, objs ...client.Object) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"},
		Rules:      rules,
	}))
	require.NoError(t, env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "viewer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "viewer"}},
	}))
	viewer, err := env.ClientAs("viewer")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for _, obj := range objs {
			if err := viewer.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)); err != nil {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the viewer's RoleBinding in %s never took effect", ns)
}
