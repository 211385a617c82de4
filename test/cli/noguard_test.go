package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestWithoutGuard runs history and undo on objects the guard never saw:
// the guard is stopped and unregistered, as if it were not installed.
// history says so and shows what the cluster still has; undo refuses.
func TestWithoutGuard(t *testing.T) {
	ctx := context.Background()
	require.NoError(t, env.StopGuard())
	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-validating"}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-mutating"}},
	} {
		require.NoError(t, env.Client.Delete(ctx, obj))
	}
	t.Cleanup(func() {
		if err := env.StartGuard(context.Background()); err != nil {
			t.Fatalf("starting the guard again: %v", err)
		}
	})

	ns := "cli-noguard"
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	kcp := &controlplanev1.KubeadmControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kcpName, Labels: map[string]string{clusterv1.ClusterNameLabel: clusterName}},
		Spec: controlplanev1.KubeadmControlPlaneSpec{
			Version: "v1.34.2",
			MachineTemplate: controlplanev1.KubeadmControlPlaneMachineTemplate{Spec: controlplanev1.KubeadmControlPlaneMachineTemplateSpec{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: "c1-control-plane"},
			}},
		},
	}
	require.NoError(t, env.Client.Create(ctx, kcp))
	labels := map[string]string{"pool": "md-0"}
	template := func(infra, version string) clusterv1.MachineTemplateSpec {
		return clusterv1.MachineTemplateSpec{
			ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
			Spec: clusterv1.MachineSpec{
				ClusterName: clusterName,
				Version:     version,
				Bootstrap:   clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfigTemplate", Name: "c1-md-0"}},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate", Name: infra,
				},
			},
		}
	}
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mdName},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: clusterName,
			Replicas:    ptr.To[int32](3),
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			Template:    template("c1-md-2", "v1.34.2"),
		},
	}
	require.NoError(t, env.Client.Create(ctx, md))
	// What Cluster API leaves behind: the MachineSets of revisions 1 and 3
	// (it deleted revision 2's once scaled to zero).
	for _, ms := range []struct {
		revision, infra, version string
		replicas                 int32
	}{{"1", "c1-md-0", "v1.34.1", 0}, {"3", "c1-md-2", "v1.34.2", 3}} {
		obj := &clusterv1.MachineSet{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:       ns,
				Name:            fmt.Sprintf("%s-rev%s", mdName, ms.revision),
				Labels:          map[string]string{clusterv1.MachineDeploymentNameLabel: mdName, clusterv1.ClusterNameLabel: clusterName},
				Annotations:     map[string]string{clusterv1.RevisionAnnotation: ms.revision},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineDeployment", Name: mdName, UID: md.UID, Controller: ptr.To(true)}},
			},
			Spec: clusterv1.MachineSetSpec{
				ClusterName: clusterName,
				Replicas:    ptr.To(ms.replicas),
				Selector:    metav1.LabelSelector{MatchLabels: labels},
				Template:    template(ms.infra, ms.version),
			},
		}
		require.NoError(t, env.Client.Create(ctx, obj))
	}
	setNow(md.CreationTimestamp.Add(30*time.Hour + 30*time.Minute))
	t.Cleanup(func() { setNow(time.Time{}) })

	golden(t, "history/md-without-guard.txt", rolloutCmd(t, "history", "md/"+mdName, "-n", ns).ok(t))
	golden(t, "history/kcp-without-guard.txt", rolloutCmd(t, "history", "kcp/"+kcpName, "-n", ns).ok(t))
	out := rolloutCmd(t, "history", "md/"+mdName, "-n", ns, "-o", "yaml").ok(t)
	assert.Contains(t, out, "recorded: false\n")
	assert.Contains(t, out, "machineSet: c1-md-0-rev3\n")

	rolloutCmd(t, "undo", "md/"+mdName, "-n", ns).fails(t,
		"cannot undo MachineDeployment cli-noguard/c1-md-0: rollout-guard recorded no history for it (no ControllerRevisions, no rollout-guard.io/ stamps), so there is nothing to roll back to; is the guard installed? See rollout history machinedeployment/c1-md-0")
}
