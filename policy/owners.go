package policy

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// owner is what the policy reads of the owner a MachineSet or a Machine
// names as its controller, once it has checked that the owner is real.
type owner struct {
	// desc names it in messages: "MachineDeployment md-0".
	desc string
	// version is the version it gives what it makes: a worker pool's
	// spec.template.spec.version, a control plane's spec.version.
	version string
	// skipPreflight reads its preflight-skip annotation (only a
	// MachineDeployment's is asked for); nil for other owners.
	skipPreflight func(context.Context) (string, error)
}

// ownerOf returns the owner that ref, the controller owner reference of
// a kind object (MachineSet or Machine) of cluster clusterName, names —
// nil when the claim does not hold. A claim holds when the owner is of a
// kind whose controller makes such objects (a MachineSet's: a
// MachineDeployment; a Machine's: a MachineSet, a MachinePool or the
// Cluster's control plane), exists under ref's name with ref's UID, and
// belongs to the same Cluster.
//
// Why all of it: an owner reference is written by whoever creates the
// object. One that names an owner that is not there, another owner's UID,
// or a pool of another Cluster at a version its own control plane allows,
// would otherwise carry a kubelet ahead of this Cluster's control plane
// past the guard.
//
// An owner the cache does not hold yet (its controller made it a moment
// ago, as the MachineDeployment controller makes a MachineSet and then
// its Machines) is read from the API server, when the policy has a live
// reader.
func (f factReader) ownerOf(ctx context.Context, kind, namespace, clusterName, version string, ref metav1.OwnerReference) (*owner, error) {
	gk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).GroupKind()
	key := types.NamespacedName{Namespace: namespace, Name: ref.Name}
	core := gk.Group == clusterv1.GroupVersion.Group
	switch {
	case kind == "MachineSet" && core && gk.Kind == "MachineDeployment":
		md := &clusterv1.MachineDeployment{}
		if ok, err := f.getOwner(ctx, key, ref.UID, md, func() bool { return md.Spec.Template.Spec.Version == version }); !ok || err != nil || md.Spec.ClusterName != clusterName {
			return nil, err
		}
		return &owner{desc: "MachineDeployment " + md.Name, version: md.Spec.Template.Spec.Version,
			skipPreflight: func(ctx context.Context) (string, error) {
				return f.liveAnnotation(ctx, md, clusterv1.MachineSetSkipPreflightChecksAnnotation)
			}}, nil
	case kind == "Machine" && core && gk.Kind == "MachineSet":
		ms := &clusterv1.MachineSet{}
		if ok, err := f.getOwner(ctx, key, ref.UID, ms, func() bool { return ms.Spec.Template.Spec.Version == version }); !ok || err != nil || ms.Spec.ClusterName != clusterName {
			return nil, err
		}
		return &owner{desc: "MachineSet " + ms.Name, version: ms.Spec.Template.Spec.Version}, nil
	case kind == "Machine" && core && gk.Kind == "MachinePool":
		mp := &clusterv1.MachinePool{}
		if ok, err := f.getOwner(ctx, key, ref.UID, mp, func() bool { return mp.Spec.Template.Spec.Version == version }); !ok || err != nil || mp.Spec.ClusterName != clusterName {
			return nil, err
		}
		return &owner{desc: "MachinePool " + mp.Name, version: mp.Spec.Template.Spec.Version}, nil
	case kind == "Machine":
		return f.controlPlaneOwner(ctx, namespace, clusterName, version, gk, ref)
	}
	return nil, nil
}

// controlPlaneOwner returns the control plane ref names when it is the
// control plane of Cluster clusterName (its spec.controlPlaneRef) and has
// ref's UID; nil otherwise.
func (f factReader) controlPlaneOwner(ctx context.Context, namespace, clusterName, version string, gk schema.GroupKind, ref metav1.OwnerReference) (*owner, error) {
	cluster := &clusterv1.Cluster{}
	if err := f.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: clusterName}, cluster, f.getOptions()...); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Cluster %s/%s: %w", namespace, clusterName, err)
	}
	cpRef := cluster.Spec.ControlPlaneRef
	if cpRef.Name != ref.Name || cpRef.Kind != gk.Kind || cpRef.APIGroup != gk.Group {
		return nil, nil
	}
	key := types.NamespacedName{Namespace: namespace, Name: ref.Name}
	if gk == kubeadmControlPlaneKind {
		kcp := &controlplanev1.KubeadmControlPlane{}
		if ok, err := f.getOwner(ctx, key, ref.UID, kcp, func() bool { return kcp.Spec.Version == version }); !ok || err != nil {
			return nil, err
		}
		return &owner{desc: "KubeadmControlPlane " + kcp.Name, version: kcp.Spec.Version}, nil
	}
	if f.mapper == nil {
		return nil, nil
	}
	mapping, err := f.mapper.RESTMapping(gk)
	if err != nil {
		// Not served: not a control plane that can own anything here.
		return nil, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(mapping.GroupVersionKind)
	readCtx, cancel := context.WithTimeout(ctx, ContractReadTimeout)
	defer cancel()
	if ok, err := f.getOwner(readCtx, key, ref.UID, u, func() bool { return contractVersion(u) == version }); !ok || err != nil {
		if readCtx.Err() != nil && ctx.Err() == nil || apierrors.IsForbidden(err) {
			// Unreadable: the Machine is judged on its own.
			return nil, nil
		}
		return nil, err
	}
	return &owner{desc: ref.Kind + " " + u.GetName(), version: contractVersion(u)}, nil
}

// getOwner reads the object key names into obj, from the cache and, when
// it is not there, has another UID or is not current (its version is not
// yet the one its controller just gave it and what it makes: a control
// plane bumped a moment ago, whose new Machines follow at once), from the
// API server (f.live). false when no object of that name has uid.
func (f factReader) getOwner(ctx context.Context, key types.NamespacedName, uid types.UID, obj client.Object, current func() bool) (bool, error) {
	if uid == "" {
		return false, nil
	}
	err := f.reader.Get(ctx, key, obj, f.getOptions()...)
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	if err == nil && obj.GetUID() == uid && (current() || f.live == nil) {
		return true, nil
	}
	if f.live == nil {
		return false, nil
	}
	// obj may share maps and slices with the cache's copy (read without a
	// deep copy): decode the live object into a zeroed one, never over it.
	gvk := obj.GetObjectKind().GroupVersionKind()
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetGroupVersionKind(gvk)
	}
	if err := f.live.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %T %s from the API server: %w", obj, key, err)
	}
	return obj.GetUID() == uid, nil
}

// liveAnnotation returns annotation key of obj as the API server holds it
// (the guard's cache keeps only the project's own annotations), read with
// f.live, else as obj has it.
func (f factReader) liveAnnotation(ctx context.Context, obj client.Object, key string) (string, error) {
	if f.live == nil {
		return obj.GetAnnotations()[key], nil
	}
	got := obj.DeepCopyObject().(client.Object)
	if err := f.live.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading %T %s from the API server: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	if got.GetUID() != obj.GetUID() {
		return "", nil
	}
	return got.GetAnnotations()[key], nil
}
