package builder

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// InfrastructureGroup is the API group of the infrastructure kinds the
	// objects name (those of Cluster API's development provider, and the
	// stand-ins of tests that need none served).
	InfrastructureGroup = "infrastructure.cluster.x-k8s.io"
	// DevMachineTemplateKind is the machine template kind of Cluster API's
	// development provider.
	DevMachineTemplateKind = "DevMachineTemplate"
)

// object is what a builder builds: an API object that copies itself.
type object[T any] interface {
	metav1.Object
	DeepCopy() T
}

// base is what every builder has: the object it builds (obj) and the
// methods that set its metadata and build it; each With… returns the
// builder (self).
type base[B any, T object[T]] struct {
	self B
	obj  T
}

// bind makes obj, named namespace/name, the object of builder self.
func (b *base[B, T]) bind(self B, obj T, namespace, name string) {
	obj.SetNamespace(namespace)
	obj.SetName(name)
	b.self, b.obj = self, obj
}

// start binds builder b to obj (see bind) and returns it.
func start[B interface{ bind(B, T, string, string) }, T object[T]](b B, obj T, namespace, name string) B {
	b.bind(b, obj, namespace, name)
	return b
}

// WithLabels adds labels to the object's.
func (b base[B, T]) WithLabels(labels map[string]string) B {
	b.obj.SetLabels(merged(b.obj.GetLabels(), labels))
	return b.self
}

// WithAnnotations adds annotations to the object's.
func (b base[B, T]) WithAnnotations(annotations map[string]string) B {
	b.obj.SetAnnotations(merged(b.obj.GetAnnotations(), annotations))
	return b.self
}

// WithOwnerReferences adds owner references to the object's.
func (b base[B, T]) WithOwnerReferences(refs ...metav1.OwnerReference) B {
	b.obj.SetOwnerReferences(append(b.obj.GetOwnerReferences(), refs...))
	return b.self
}

// Build returns a copy of the object as built so far.
func (b base[B, T]) Build() T { return b.obj.DeepCopy() }

// merged returns a copy of into with every entry of add set; into when both
// are empty.
func merged(into, add map[string]string) map[string]string {
	if len(into) == 0 && len(add) == 0 {
		return into
	}
	out := make(map[string]string, len(into)+len(add))
	for k, v := range into {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}

// copied returns a copy of m (nil for nil).
func copied(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return merged(nil, m)
}
