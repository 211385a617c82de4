package framework

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	bootstrapconversion "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/conversion"
	controlplaneconversion "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/conversion"
	coreconversion "sigs.k8s.io/cluster-api/core/webhooks/conversion"
	"sigs.k8s.io/cluster-api/util/contract"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
)

// converterConstructor builds the converter of one kind, as Cluster API's
// webhooks/conversion packages define them.
type converterConstructor = func(*runtime.Scheme) (crconversion.Converter, error)

// setupConversionWebhooks registers, on mgr's webhook server (path /convert),
// the conversion webhooks of every Cluster API kind whose CRD the environment
// installs, exactly as Cluster API's own managers do through their admission
// webhooks' SetupWebhookWithManager, but without the defaulting and
// validating webhooks. It also points the conversion packages at the API
// version of a referenced kind, read from its CRD's contract label.
func setupConversionWebhooks(mgr ctrl.Manager) error {
	coreconversion.SetAPIVersionGetter(getAPIVersion)
	controlplaneconversion.SetAPIVersionGetter(getAPIVersion)

	errs := []error{
		// core: cluster.x-k8s.io and its addons, ipam and runtime groups.
		registerConverter(mgr, &clusterv1.Cluster{}, coreconversion.Cluster),
		registerConverter(mgr, &clusterv1.ClusterClass{}, coreconversion.ClusterClass),
		registerConverter(mgr, &clusterv1.Machine{}, coreconversion.Machine),
		registerConverter(mgr, &clusterv1.MachineSet{}, coreconversion.MachineSet),
		registerConverter(mgr, &clusterv1.MachineDeployment{}, coreconversion.MachineDeployment),
		registerConverter(mgr, &clusterv1.MachinePool{}, coreconversion.MachinePool),
		registerConverter(mgr, &clusterv1.MachineHealthCheck{}, coreconversion.MachineHealthCheck),
		registerConverter(mgr, &clusterv1.MachineDrainRule{}, coreconversion.MachineDrainRule),
		registerConverter(mgr, &addonsv1.ClusterResourceSet{}, coreconversion.ClusterResourceSet),
		registerConverter(mgr, &addonsv1.ClusterResourceSetBinding{}, coreconversion.ClusterResourceSetBinding),
		registerConverter(mgr, &ipamv1.IPAddress{}, coreconversion.IPAddress),
		registerConverter(mgr, &ipamv1.IPAddressClaim{}, coreconversion.IPAddressClaim),
		registerConverter(mgr, &runtimev1.ExtensionConfig{}, coreconversion.ExtensionConfig),
		// kubeadm control plane.
		registerConverter(mgr, &controlplanev1.KubeadmControlPlane{}, controlplaneconversion.KubeadmControlPlane),
		registerConverter(mgr, &controlplanev1.KubeadmControlPlaneTemplate{}, controlplaneconversion.KubeadmControlPlaneTemplate),
		// kubeadm bootstrap.
		registerConverter(mgr, &bootstrapv1.KubeadmConfig{}, bootstrapconversion.KubeadmConfig),
		registerConverter(mgr, &bootstrapv1.KubeadmConfigTemplate{}, bootstrapconversion.KubeadmConfigTemplate),
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("registering the Cluster API conversion webhooks: %w", err)
	}
	return nil
}

// registerConverter registers the conversion webhook of obj's kind, and
// nothing else, with mgr.
func registerConverter[T runtime.Object](mgr ctrl.Manager, obj T, converter converterConstructor) error {
	if err := ctrl.NewWebhookManagedBy(mgr, obj).WithConverter(converter).Complete(); err != nil {
		return fmt.Errorf("conversion webhook of %T: %w", obj, err)
	}
	return nil
}

// crdReaders holds a reader of the API server of every running environment,
// newest last. Cluster API keeps its API-version lookup in a package
// variable, so all environments of a process share getAPIVersion, which
// reads through the newest one.
var crdReaders struct {
	sync.Mutex
	list []*client.Reader
}

// pushCRDReader makes r the reader getAPIVersion uses, until the returned
// function removes it again.
func pushCRDReader(r client.Reader) (remove func()) {
	entry := &r
	crdReaders.Lock()
	defer crdReaders.Unlock()
	crdReaders.list = append(crdReaders.list, entry)
	return func() {
		crdReaders.Lock()
		defer crdReaders.Unlock()
		crdReaders.list = slices.DeleteFunc(crdReaders.list, func(e *client.Reader) bool { return e == entry })
	}
}

// cachedFirst reads an object from cached, and from live when cached does
// not have it (or cannot answer yet).
//
// Why: the API server asks for a conversion to v1beta1 on every write of a
// Cluster API object, and each conversion looks up the contract label of
// one or two CRDs. Read from the API server, that is a quorum read of a CRD
// of up to a megabyte, decoded and converted, per write: a fifth of
// kube-apiserver's CPU under bench-admission's edits, in every
// configuration alike, which Cluster API's own managers do not spend (they
// read CRDs through their cache). The fallback keeps a CRD created a moment
// ago (an infrastructure provider's, by a test) found at once.
type cachedFirst struct {
	cached, live client.Reader
}

// Get reads key into obj from the cache, else from the API server.
func (r cachedFirst) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.cached.Get(ctx, key, obj, opts...); err == nil {
		return nil
	}
	return r.live.Get(ctx, key, obj, opts...)
}

// List lists from the API server (getAPIVersion lists nothing).
func (r cachedFirst) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.live.List(ctx, list, opts...)
}

// getAPIVersion is the function Cluster API's conversion code calls to turn
// a v1beta2 contract reference (group and kind) back into a v1beta1 object
// reference (apiVersion): the newest version the kind's CRD lists in its
// contract label (cluster.x-k8s.io/v1beta2, else cluster.x-k8s.io/v1beta1).
// It reads the CRD's metadata through the environment's cache, as Cluster
// API's managers do, and from the API server when the cache does not have
// it yet, so CRDs created after start (an infrastructure provider's) are
// found at once.
func getAPIVersion(ctx context.Context, gk schema.GroupKind) (string, error) {
	crdReaders.Lock()
	var reader client.Reader
	if n := len(crdReaders.list); n > 0 {
		reader = *crdReaders.list[n-1]
	}
	crdReaders.Unlock()
	if reader == nil {
		return "", fmt.Errorf("no running environment to read the CRD of %s from", gk)
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	name := contract.CalculateCRDName(gk.Group, gk.Kind)
	if err := reader.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return "", fmt.Errorf("reading CustomResourceDefinition %s for the apiVersion of %s: %w", name, gk, err)
	}
	for _, label := range []string{ContractLabel, "cluster.x-k8s.io/v1beta1"} {
		value := crd.GetLabels()[label]
		if value == "" {
			continue
		}
		versions := strings.Split(value, "_")
		sort.Slice(versions, func(i, j int) bool {
			return version.CompareKubeAwareVersionStrings(versions[i], versions[j]) > 0
		})
		return schema.GroupVersion{Group: gk.Group, Version: versions[0]}.String(), nil
	}
	return "", fmt.Errorf("CustomResourceDefinition %s has no contract label (%s or cluster.x-k8s.io/v1beta1)", name, ContractLabel)
}
