package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlcluster "sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
)

// inventoryProvider is one provider the sandbox runs, as clusterctl's
// provider inventory records it.
type inventoryProvider struct {
	name, namespace string
	kind            clusterctlv1.ProviderType
}

// InventoryProviders are the providers the sandbox runs, with the names,
// types and namespaces `clusterctl init --bootstrap kubeadm
// --control-plane kubeadm --infrastructure docker` gives them: Cluster
// API's core, its kubeadm bootstrap and control-plane providers, and the
// development infrastructure provider (shipped as "docker").
var inventoryProviders = []inventoryProvider{
	{"cluster-api", "capi-system", clusterctlv1.CoreProviderType},
	{"kubeadm", "capi-kubeadm-bootstrap-system", clusterctlv1.BootstrapProviderType},
	{"kubeadm", "capi-kubeadm-control-plane-system", clusterctlv1.ControlPlaneProviderType},
	{"docker", "capd-system", clusterctlv1.InfrastructureProviderType},
}

// recordProviders leaves clusterctl's provider inventory as `clusterctl
// init` leaves it: the inventory's CRD and one Provider per provider the
// sandbox runs, at the Cluster API version of capiDir, in the provider's
// namespace. The CRDs already carry clusterctl's labels (the environment
// loads them so). With it, clusterctl's commands that read the inventory
// (move, describe, upgrade plan) work on the sandbox as on a management
// cluster clusterctl installed. It uses clusterctl's own inventory client.
func recordProviders(ctx context.Context, c client.Client, kubeconfig, capiDir string) error {
	_, version, ok := strings.Cut(filepath.Base(capiDir), "@")
	if !ok {
		return fmt.Errorf("cannot tell the Cluster API version from %s", capiDir)
	}
	cfg, err := clusterctlconfig.New(ctx, "", clusterctlconfig.InjectReader(clusterctlconfig.NewMemoryReader()))
	if err != nil {
		return fmt.Errorf("clusterctl's configuration: %w", err)
	}
	inventory := clusterctlcluster.New(clusterctlcluster.Kubeconfig{Path: kubeconfig}, cfg).ProviderInventory()
	if err := inventory.EnsureCustomResourceDefinitions(ctx); err != nil {
		return fmt.Errorf("installing clusterctl's provider inventory CRD: %w", err)
	}
	for _, p := range inventoryProviders {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.namespace}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s for clusterctl's inventory: %w", p.namespace, err)
		}
		provider := clusterctlv1.Provider{
			ObjectMeta:   metav1.ObjectMeta{Namespace: p.namespace, Name: clusterctlv1.ManifestLabel(p.name, p.kind)},
			ProviderName: p.name,
			Type:         string(p.kind),
			Version:      version,
		}
		provider.Labels = map[string]string{
			clusterctlv1.ClusterctlLabel: "",
			clusterv1.ProviderNameLabel:  provider.ManifestLabel(),
		}
		if err := inventory.Create(ctx, provider); err != nil {
			return fmt.Errorf("recording provider %s in clusterctl's inventory: %w", provider.InstanceName(), err)
		}
	}
	return nil
}
