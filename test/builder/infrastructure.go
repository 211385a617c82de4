package builder

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
)

// The objects of Cluster API's development infrastructure provider. The
// test environment of package framework serves their CRDs but its client's
// scheme lacks their types: Unstructured returns one for that client.

// DevMachineTemplateBuilder builds a DevMachineTemplate.
type DevMachineTemplateBuilder struct {
	base[*DevMachineTemplateBuilder, *infrav1.DevMachineTemplate]
}

// DevMachineTemplate starts a DevMachineTemplate namespace/name, of the
// docker backend unless WithInMemoryBackend.
func DevMachineTemplate(namespace, name string) *DevMachineTemplateBuilder {
	docker := infrav1.DevMachineBackendSpec{Docker: &infrav1.DockerMachineBackendSpec{}}
	return start(&DevMachineTemplateBuilder{}, &infrav1.DevMachineTemplate{Spec: infrav1.DevMachineTemplateSpec{
		Template: infrav1.DevMachineTemplateResource{Spec: infrav1.DevMachineSpec{Backend: docker}},
	}}, namespace, name)
}

// WithInMemoryBackend makes the machines simulated in memory, each step of
// their start (VM, node, API server, etcd member) taking startup.
func (b *DevMachineTemplateBuilder) WithInMemoryBackend(startup time.Duration) *DevMachineTemplateBuilder {
	provisioning := infrav1.CommonProvisioningSettings{StartupDuration: metav1.Duration{Duration: startup}}
	b.obj.Spec.Template.Spec.Backend = infrav1.DevMachineBackendSpec{InMemory: &infrav1.InMemoryMachineBackendSpec{
		VM:        &infrav1.InMemoryVMSpec{Provisioning: provisioning},
		Node:      &infrav1.InMemoryNodeSpec{Provisioning: provisioning},
		APIServer: &infrav1.InMemoryAPIServerSpec{Provisioning: provisioning},
		Etcd:      &infrav1.InMemoryEtcdSpec{Provisioning: provisioning},
	}}
	return b
}

// Unstructured returns the DevMachineTemplate as an Unstructured.
func (b *DevMachineTemplateBuilder) Unstructured() *unstructured.Unstructured {
	return toUnstructured(b.Build(), "DevMachineTemplate")
}

// DevMachinePoolBuilder builds a DevMachinePool.
type DevMachinePoolBuilder struct {
	base[*DevMachinePoolBuilder, *infrav1.DevMachinePool]
}

// DevMachinePool starts a DevMachinePool namespace/name of the docker backend.
func DevMachinePool(namespace, name string) *DevMachinePoolBuilder {
	docker := infrav1.DevMachinePoolBackendSpec{Docker: &infrav1.DockerMachinePoolBackendSpec{}}
	return start(&DevMachinePoolBuilder{}, &infrav1.DevMachinePool{Spec: infrav1.DevMachinePoolSpec{Backend: docker}}, namespace, name)
}

// Unstructured returns the DevMachinePool as an Unstructured.
func (b *DevMachinePoolBuilder) Unstructured() *unstructured.Unstructured {
	return toUnstructured(b.Build(), "DevMachinePool")
}

// DevClusterBuilder builds a DevCluster.
type DevClusterBuilder struct {
	base[*DevClusterBuilder, *infrav1.DevCluster]
}

// DevCluster starts a DevCluster namespace/name of the in-memory backend.
func DevCluster(namespace, name string) *DevClusterBuilder {
	return start(&DevClusterBuilder{}, &infrav1.DevCluster{Spec: infrav1.DevClusterSpec{Backend: inMemoryCluster()}}, namespace, name)
}

// WithControlPlaneEndpoint sets where the workload cluster's API server listens.
func (b *DevClusterBuilder) WithControlPlaneEndpoint(host string, port int32) *DevClusterBuilder {
	b.obj.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: host, Port: port}
	return b
}

// DevClusterTemplateBuilder builds a DevClusterTemplate.
type DevClusterTemplateBuilder struct {
	base[*DevClusterTemplateBuilder, *infrav1.DevClusterTemplate]
}

// DevClusterTemplate starts a DevClusterTemplate namespace/name of the
// in-memory backend.
func DevClusterTemplate(namespace, name string) *DevClusterTemplateBuilder {
	return start(&DevClusterTemplateBuilder{}, &infrav1.DevClusterTemplate{Spec: infrav1.DevClusterTemplateSpec{
		Template: infrav1.DevClusterTemplateResource{Spec: infrav1.DevClusterSpec{Backend: inMemoryCluster()}},
	}}, namespace, name)
}

// WithTemplateAnnotations adds annotations to those of the DevClusters
// made from the template.
func (b *DevClusterTemplateBuilder) WithTemplateAnnotations(annotations map[string]string) *DevClusterTemplateBuilder {
	m := &b.obj.Spec.Template.ObjectMeta
	m.Annotations = merged(m.Annotations, annotations)
	return b
}

// inMemoryCluster is the backend of a workload cluster simulated in memory.
func inMemoryCluster() infrav1.DevClusterBackendSpec {
	return infrav1.DevClusterBackendSpec{InMemory: &infrav1.InMemoryClusterBackendSpec{}}
}

// toUnstructured converts obj, an object of the development provider's
// v1beta2 API, to an Unstructured of kind, without the fields a typed
// object always has (its creation time, its status).
func toUnstructured(obj runtime.Object, kind string) *unstructured.Unstructured {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(fmt.Sprintf("converting a %s: %v", kind, err)) // cannot happen: a typed API object always converts
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(infrav1.GroupVersion.WithKind(kind))
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status") // a status is written apart, by its controller
	return u
}
