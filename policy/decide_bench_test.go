package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// memReader serves a fixed set of objects as the guard's cache does (no
// copy, options ignored: the policy filters by cluster itself), so that a
// benchmark measures the policy and not a fake API server.
type memReader struct {
	objects []client.Object
}

func (m memReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	for _, o := range m.objects {
		if o.GetNamespace() != key.Namespace || o.GetName() != key.Name {
			continue
		}
		switch into := obj.(type) {
		case *clusterv1.Cluster:
			if from, ok := o.(*clusterv1.Cluster); ok {
				*into = *from
				return nil
			}
		case *clusterv1.ClusterClass:
			if from, ok := o.(*clusterv1.ClusterClass); ok {
				*into = *from
				return nil
			}
		case *controlplanev1.KubeadmControlPlane:
			if from, ok := o.(*controlplanev1.KubeadmControlPlane); ok {
				*into = *from
				return nil
			}
		}
	}
	return fmt.Errorf("memReader: %T %s not served", obj, key)
}

func (m memReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	for _, o := range m.objects {
		switch into := list.(type) {
		case *clusterv1.MachineDeploymentList:
			if from, ok := o.(*clusterv1.MachineDeployment); ok {
				into.Items = append(into.Items, *from)
			}
		case *clusterv1.MachinePoolList:
			if from, ok := o.(*clusterv1.MachinePool); ok {
				into.Items = append(into.Items, *from)
			}
		case *clusterv1.MachineList:
			if from, ok := o.(*clusterv1.Machine); ok {
				into.Items = append(into.Items, *from)
			}
		case *clusterv1.ClusterList:
			if from, ok := o.(*clusterv1.Cluster); ok {
				into.Items = append(into.Items, *from)
			}
		default:
			return fmt.Errorf("memReader: %T not served", list)
		}
	}
	return nil
}

var _ client.Reader = memReader{}

// benchCluster is a topology cluster "demo" whose control plane, at
// kcpVersion with an upgrade of it stamped at revision 4, runs running; its
// class lists sandboxClass; it has ten hand-made MachineDeployments, each
// with three Machines, at v1.33 and v1.34.
func benchCluster(b *testing.B, kcpVersion string, running []string, cpMachines ...client.Object) Policy {
	b.Helper()
	w := topologyWorld{
		classVersions: sandboxClass, kcpVersion: kcpVersion, running: running,
		kcpStamp: &revisions.Record{Revision: 4, History: []int64{4}, ChangedBy: "alice", ChangedAt: time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC), ChangeType: revisions.ChangeRollout},
		highest: &revisions.HighestRun{Kubernetes: kcpVersion, KubernetesRevision: 4, Etcd: "3.6.8", EtcdRevision: 4,
			Before: &revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 3, Etcd: "3.6.6", EtcdRevision: 3}, BeforeRevision: 4},
	}
	class := &clusterv1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-class"}}
	class.Spec.KubernetesVersions = w.classVersions
	objs := append([]client.Object{topologyCluster(kcpVersion, nil), class, w.kcp()}, cpMachines...)
	for i := range 10 {
		md := pool(fmt.Sprintf("md-%d", i), fmt.Sprintf("v1.%d.2", 33+i%2), false)
		objs = append(objs, md)
		for j := range 3 {
			m := cpMachine(fmt.Sprintf("md-%d-%d", i, j), md.Spec.Template.Spec.Version, time.Time{})
			delete(m.Labels, clusterv1.MachineControlPlaneLabel)
			m.Labels[clusterv1.MachineDeploymentNameLabel] = md.Name
			objs = append(objs, m)
		}
	}
	return Policy{Reader: memReader{objects: objs}, Mapper: meta.NewDefaultRESTMapper(nil), Indexed: true}
}

// BenchmarkDecide measures one decision of the policy over a cluster read
// from memory: the facts gathered, the versions read and the rules applied.
func BenchmarkDecide(b *testing.B) {
	before := time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		policy   func(b *testing.B) Policy
		old, new client.Object
	}{
		{
			name:   "Cluster upgrade through the class",
			policy: func(b *testing.B) Policy { return benchCluster(b, "v1.35.2", []string{"v1.35.2"}) },
			old:    topologyCluster("v1.35.2", nil), new: topologyCluster("v1.36.1", nil),
		},
		{
			name:   "Cluster upgrade of two minors through the class",
			policy: func(b *testing.B) Policy { return benchCluster(b, "v1.34.3", []string{"v1.34.3"}) },
			old:    topologyCluster("v1.34.3", nil), new: topologyCluster("v1.36.1", nil),
		},
		{
			name: "Cluster revert of an unrolled bump",
			policy: func(b *testing.B) Policy {
				return benchCluster(b, "v1.36.1", []string{"v1.35.2"}, cpMachine("cp-1", "v1.35.2", before), cpMachine("cp-2", "v1.35.2", before))
			},
			old: topologyCluster("v1.36.1", nil), new: topologyCluster("v1.35.2", nil),
		},
		{
			name:   "KubeadmControlPlane upgrade",
			policy: func(b *testing.B) Policy { return benchCluster(b, "v1.35.2", []string{"v1.35.2"}) },
			old:    benchKCP("v1.35.2"), new: benchKCP("v1.36.1"),
		},
		{
			name:   "MachineDeployment upgrade",
			policy: func(b *testing.B) Policy { return benchCluster(b, "v1.35.2", []string{"v1.35.2"}) },
			old:    pool("md-0", "v1.33.2", false), new: pool("md-0", "v1.34.2", false),
		},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			p := c.policy(b)
			if d, _, err := p.Decide(context.Background(), c.old, c.new); err != nil || !d.Allowed() {
				b.Fatalf("decision: %v %v", err, d.Violations)
			}
			b.ReportAllocs()
			for b.Loop() {
				_, _, _ = p.Decide(context.Background(), c.old, c.new)
			}
		})
	}
}

// benchKCP is the KubeadmControlPlane of benchCluster at version.
func benchKCP(version string) *controlplanev1.KubeadmControlPlane {
	kcp := topologyWorld{kcpVersion: version, running: []string{"v1.35.2"}}.kcp()
	raw, _ := json.Marshal(revisions.HighestRun{Kubernetes: "v1.35.2", KubernetesRevision: 3, Etcd: "3.6.6", EtcdRevision: 3})
	kcp.Annotations[revisions.AnnotationHighestRun] = string(raw)
	return kcp
}
