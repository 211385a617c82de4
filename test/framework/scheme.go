package framework

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	addonsv1beta1 "sigs.k8s.io/cluster-api/api/addons/v1beta1"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1beta1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1beta1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1alpha1 "sigs.k8s.io/cluster-api/api/ipam/v1alpha1"
	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	runtimev1alpha1 "sigs.k8s.io/cluster-api/api/runtime/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
)

// NewScheme returns a scheme with the client-go types, apiextensions v1 and
// every served version of the Cluster API types whose CRDs the environment
// installs: core, addons, IPAM and runtime (cluster.x-k8s.io and its
// sub-groups), kubeadm bootstrap and kubeadm control plane. The conversion
// webhooks need all versions of a kind in the scheme.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	adds := []struct {
		name string
		add  func(*runtime.Scheme) error
	}{
		{"client-go", clientgoscheme.AddToScheme},
		{"rollout-guard.io/v1alpha1", rgv1alpha1.AddToScheme},
		{"apiextensions/v1", apiextensionsv1.AddToScheme},
		{"cluster.x-k8s.io/v1beta1", clusterv1beta1.AddToScheme},
		{"cluster.x-k8s.io/v1beta2", clusterv1.AddToScheme},
		{"addons.cluster.x-k8s.io/v1beta1", addonsv1beta1.AddToScheme},
		{"addons.cluster.x-k8s.io/v1beta2", addonsv1.AddToScheme},
		{"ipam.cluster.x-k8s.io/v1alpha1", ipamv1alpha1.AddToScheme},
		{"ipam.cluster.x-k8s.io/v1beta1", ipamv1beta1.AddToScheme},
		{"ipam.cluster.x-k8s.io/v1beta2", ipamv1.AddToScheme},
		{"runtime.cluster.x-k8s.io/v1alpha1", runtimev1alpha1.AddToScheme},
		{"runtime.cluster.x-k8s.io/v1beta2", runtimev1.AddToScheme},
		{"bootstrap.cluster.x-k8s.io/v1beta1", bootstrapv1beta1.AddToScheme},
		{"bootstrap.cluster.x-k8s.io/v1beta2", bootstrapv1.AddToScheme},
		{"controlplane.cluster.x-k8s.io/v1beta1", controlplanev1beta1.AddToScheme},
		{"controlplane.cluster.x-k8s.io/v1beta2", controlplanev1.AddToScheme},
	}
	for _, a := range adds {
		if err := a.add(scheme); err != nil {
			return nil, fmt.Errorf("adding %s to the scheme: %w", a.name, err)
		}
	}
	return scheme, nil
}
