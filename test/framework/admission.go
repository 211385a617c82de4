package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	bootstrapadmission "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/admission"
	controlplaneadmission "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/admission"
	controlplaneconversion "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/conversion"
	coreadmission "sigs.k8s.io/cluster-api/core/webhooks/admission"
	coreconversion "sigs.k8s.io/cluster-api/core/webhooks/conversion"
	"sigs.k8s.io/cluster-api/util/index"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterAPIAdmissionTimeout bounds the wait until the API server calls
// Cluster API's admission webhooks once they are registered.
const clusterAPIAdmissionTimeout = 30 * time.Second

// ClusterAPIWebhookManifest is one of Cluster API's webhook registrations.
type ClusterAPIWebhookManifest struct {
	// Path of the manifest, relative to the sigs.k8s.io/cluster-api module.
	Path string
	// NamePrefix is the prefix Cluster API's kustomize configuration
	// (config/default) gives the configurations' names, as clusterctl
	// installs them; the manifests alone all use the same two names.
	NamePrefix string
}

// ClusterAPIWebhookManifests are the admission webhook registrations of the
// three providers whose CRDs the environment installs: core, kubeadm
// control plane, kubeadm bootstrap. With Options.ClusterAPIAdmission they
// are installed with these name prefixes (for example
// "capi-validating-webhook-configuration").
var ClusterAPIWebhookManifests = []ClusterAPIWebhookManifest{
	{Path: "core/config/webhook/manifests.yaml", NamePrefix: "capi-"},
	{Path: "controlplane/kubeadm/config/webhook/manifests.yaml", NamePrefix: "capi-kubeadm-control-plane-"},
	{Path: "bootstrap/kubeadm/config/webhook/manifests.yaml", NamePrefix: "capi-kubeadm-bootstrap-"},
}

// setupAdmissionWebhooks registers, on mgr's webhook server, Cluster API's
// defaulting and validating webhooks of every kind whose CRD the
// environment installs, as Cluster API's core, kubeadm control plane and
// kubeadm bootstrap managers do; each kind's setup also registers its
// conversion (path /convert), so this replaces setupConversionWebhooks.
func setupAdmissionWebhooks(ctx context.Context, mgr ctrl.Manager) error {
	coreconversion.SetAPIVersionGetter(getAPIVersion)
	controlplaneconversion.SetAPIVersionGetter(getAPIVersion)

	// The ClusterClass webhook lists the Clusters of a class through this
	// cache index (Cluster API adds it only when its ClusterTopology gate
	// is on at start; the index costs nothing when no class exists).
	if err := index.ByClusterClassRef(ctx, mgr); err != nil {
		return fmt.Errorf("adding the Cluster-by-ClusterClass index: %w", err)
	}
	// Reads go through the manager's cache, as in Cluster API's managers,
	// except where Cluster API itself reads the API server directly.
	c, reader := mgr.GetClient(), mgr.GetAPIReader()
	webhooks := []struct {
		kind  string
		setup func(ctrl.Manager) error
	}{
		// core: cluster.x-k8s.io and its addons, ipam and runtime groups.
		{"ClusterClass", (&coreadmission.ClusterClass{Client: c}).SetupWebhookWithManager},
		{"Cluster", (&coreadmission.Cluster{Client: c, ClusterCacheReader: noWorkloadClusters{}}).SetupWebhookWithManager},
		{"Machine", (&coreadmission.Machine{}).SetupWebhookWithManager},
		{"MachineSet", (&coreadmission.MachineSet{}).SetupWebhookWithManager},
		{"MachineDeployment", (&coreadmission.MachineDeployment{}).SetupWebhookWithManager},
		{"MachineDrainRule", (&coreadmission.MachineDrainRule{}).SetupWebhookWithManager},
		{"MachinePool", (&coreadmission.MachinePool{}).SetupWebhookWithManager},
		{"MachineHealthCheck", (&coreadmission.MachineHealthCheck{}).SetupWebhookWithManager},
		{"ClusterResourceSet", (&coreadmission.ClusterResourceSet{}).SetupWebhookWithManager},
		{"ClusterResourceSetBinding", (&coreadmission.ClusterResourceSetBinding{}).SetupWebhookWithManager},
		{"ExtensionConfig", (&coreadmission.ExtensionConfig{}).SetupWebhookWithManager},
		{"IPAddress", (&coreadmission.IPAddress{Client: reader}).SetupWebhookWithManager},
		{"IPAddressClaim", (&coreadmission.IPAddressClaim{}).SetupWebhookWithManager},
		// kubeadm control plane.
		{"KubeadmControlPlane", (&controlplaneadmission.KubeadmControlPlane{}).SetupWebhookWithManager},
		{"KubeadmControlPlane scale", (&controlplaneadmission.ScaleValidator{Client: c}).SetupWebhookWithManager},
		{"KubeadmControlPlaneTemplate", (&controlplaneadmission.KubeadmControlPlaneTemplate{}).SetupWebhookWithManager},
		// kubeadm bootstrap.
		{"KubeadmConfig", (&bootstrapadmission.KubeadmConfig{}).SetupWebhookWithManager},
		{"KubeadmConfigTemplate", (&bootstrapadmission.KubeadmConfigTemplate{}).SetupWebhookWithManager},
	}
	var errs []error
	for _, w := range webhooks {
		if err := w.setup(mgr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", w.kind, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("registering Cluster API's admission webhooks: %w", err)
	}
	return nil
}

// noWorkloadClusters stands in for the cluster cache of Cluster API's
// Cluster webhook, which reads a workload cluster only to check the nodes
// of MachinePools before a topology version change; the environment runs
// no cluster cache, and the sandbox no MachinePools.
type noWorkloadClusters struct{}

// GetReader always fails: the environment's webhooks read no workload cluster.
func (noWorkloadClusters) GetReader(_ context.Context, cluster client.ObjectKey) (client.Reader, error) {
	return nil, fmt.Errorf("the test environment's Cluster webhook cannot read workload cluster %s", cluster)
}

// ClusterAPIWebhookConfigurations reads Cluster API's webhook
// registrations (ClusterAPIWebhookManifests) from the module directory
// capiDir, names each configuration with its prefix and points every
// webhook at baseURL (https://HOST:PORT) plus its path, trusting caBundle.
func ClusterAPIWebhookConfigurations(capiDir, baseURL string, caBundle []byte) ([]client.Object, error) {
	var all []client.Object
	for _, m := range ClusterAPIWebhookManifests {
		objs, err := LocalWebhookConfigurations(filepath.Join(capiDir, m.Path), baseURL, caBundle)
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			obj.SetName(m.NamePrefix + obj.GetName())
		}
		all = append(all, objs...)
	}
	return all, nil
}

// webhookPaths returns the URL path of every webhook of the
// configurations in objs.
func webhookPaths(objs []client.Object) ([]string, error) {
	var paths []string
	add := func(cc admissionregistrationv1.WebhookClientConfig) error {
		if cc.URL == nil {
			return errors.New("a webhook has no URL")
		}
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return fmt.Errorf("parsing webhook URL %q: %w", *cc.URL, err)
		}
		paths = append(paths, u.Path)
		return nil
	}
	for _, obj := range objs {
		switch cfg := obj.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			for _, w := range cfg.Webhooks {
				if err := add(w.ClientConfig); err != nil {
					return nil, err
				}
			}
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			for _, w := range cfg.Webhooks {
				if err := add(w.ClientConfig); err != nil {
					return nil, err
				}
			}
		}
	}
	return paths, nil
}

// registerClusterAPIWebhooks registers Cluster API's admission webhooks
// with the API server, pointed at the environment's webhook server on mux,
// and waits until the API server calls them. A webhook path the server does
// not serve is an error: with failurePolicy Fail, it would refuse every
// request of its kind.
func (e *Environment) registerClusterAPIWebhooks(ctx context.Context, mux *http.ServeMux) error {
	wio := &e.testEnv.WebhookInstallOptions
	base := "https://" + net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	objs, err := ClusterAPIWebhookConfigurations(e.ClusterAPIDir, base, wio.LocalServingCAData)
	if err != nil {
		return fmt.Errorf("reading Cluster API's webhook configurations: %w", err)
	}
	paths, err := webhookPaths(objs)
	if err != nil {
		return fmt.Errorf("reading Cluster API's webhook configurations: %w", err)
	}
	for _, p := range paths {
		if _, pattern := mux.Handler(&http.Request{Method: http.MethodPost, URL: &url.URL{Path: p}}); pattern == "" {
			return fmt.Errorf("cluster API's webhook configurations name path %s, which the environment does not serve", p)
		}
	}
	// Mutating first: once the validating webhooks answer, the defaulting
	// ones (registered earlier) are live too.
	for _, obj := range objs {
		if _, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
			if err := createOrReplace(ctx, e.Client, obj); err != nil {
				return err
			}
		}
	}
	for _, obj := range objs {
		if _, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok {
			if err := createOrReplace(ctx, e.Client, obj); err != nil {
				return err
			}
		}
	}
	return e.waitClusterAPIAdmission(ctx)
}

// waitClusterAPIAdmission makes a server-side dry-run create of a
// MachineDrainRule that only Cluster API's webhook refuses (a drain order
// with behavior Skip; the guard does not look at this kind) until the API
// server calls the webhook: a configuration takes effect some moments
// after it is created.
func (e *Environment) waitClusterAPIAdmission(ctx context.Context) error {
	deadline := time.Now().Add(clusterAPIAdmissionTimeout)
	for {
		err := e.Client.Create(ctx, clusterAPIAdmissionProbe(), client.DryRunAll)
		switch {
		case err != nil && strings.Contains(err.Error(), "validation.machinedrainrule.cluster.x-k8s.io"):
			return nil
		case err != nil && !strings.Contains(err.Error(), "failed calling webhook"):
			return fmt.Errorf("cluster API admission round trip: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for Cluster API's admission webhooks: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server did not call Cluster API's admission webhooks within %s (last result: %v)", clusterAPIAdmissionTimeout, err)
		}
	}
}

// clusterAPIAdmissionProbe is a MachineDrainRule that the CRD's schema
// accepts and Cluster API's webhook refuses.
func clusterAPIAdmissionProbe() *clusterv1.MachineDrainRule {
	return &clusterv1.MachineDrainRule{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "rollout-guard-capi-admission-probe"},
		Spec: clusterv1.MachineDrainRuleSpec{
			Drain: clusterv1.MachineDrainRuleDrainConfig{
				Behavior: clusterv1.MachineDrainRuleDrainBehaviorSkip,
				Order:    ptr.To[int32](1),
			},
		},
	}
}
