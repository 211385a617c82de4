package plan

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimecatalog "sigs.k8s.io/cluster-api/api/runtime/catalog"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/exp/topology/desiredstate"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// A ClusterClass may name an upgrade-plan extension
// (spec.upgrade.external.generateUpgradePlanExtension): Cluster API's
// topology controller then asks it, through its GenerateUpgradePlan hook,
// for the versions the control plane and the workers step through. plan
// asks it the same question, over HTTPS at the URL of its ExtensionConfig,
// trusting the ExtensionConfig's caBundle, with the Cluster as it would be
// stored and the versions the cluster runs. An extension served by a
// Service (clientConfig.service) is only reachable from inside the
// management cluster: plan then shows the target alone, as it does when
// the extension cannot be asked.

// extensionPlanProblem is why Cluster API's topology controller refuses the
// steps an upgrade-plan extension answered for an upgrade to desired
// (desiredstate.DefaultAndValidateUpgradePlans, which it runs on them): a
// plan that does not end at desired, skips a minor or goes back; "" when
// it takes them.
func extensionPlanProblem(desired, cpVersion, minWorkers string, cp, workers []string) string {
	if _, err := desiredstate.DefaultAndValidateUpgradePlans(desired, cpVersion, minWorkers, cp, workers); err != nil {
		return err.Error()
	}
	return ""
}

// defaultExtensionTimeout is Cluster API's timeout of an extension call
// when the handler does not announce one.
const defaultExtensionTimeout = 10 * time.Second

// askUpgradePlanExtension asks the upgrade-plan extension handler name
// (HANDLER.EXTENSIONCONFIG, as Cluster API names discovered handlers) for
// the steps of planned's upgrade from cpVersion (the control plane) and
// minWorkers (the oldest worker pool), and returns the control plane's and
// the workers' versions as it answers them.
func askUpgradePlanExtension(ctx context.Context, cl *core.Clients, name string, planned *clusterv1.Cluster, cpVersion, minWorkers string) (cp, workers []string, err error) {
	_, configName, ok := strings.Cut(name, ".")
	if !ok {
		return nil, nil, fmt.Errorf("%q is not a handler name of the form HANDLER.EXTENSIONCONFIG", name)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(runtimev1.GroupVersion.WithKind("ExtensionConfig"))
	if err := cl.Client.Get(ctx, client.ObjectKey{Name: configName}, u); err != nil {
		return nil, nil, fmt.Errorf("reading ExtensionConfig %s: %w", configName, err)
	}
	ext := &runtimev1.ExtensionConfig{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ext); err != nil {
		return nil, nil, fmt.Errorf("reading ExtensionConfig %s: %w", configName, err)
	}
	var handler *runtimev1.ExtensionHandler
	for i, h := range ext.Status.Handlers {
		if h.Name == name && h.RequestHook.Hook == "GenerateUpgradePlan" {
			handler = &ext.Status.Handlers[i]
		}
	}
	if handler == nil {
		return nil, nil, fmt.Errorf("ExtensionConfig %s lists no GenerateUpgradePlan handler %s (not discovered by Cluster API yet?)", configName, name)
	}
	target, err := extensionURL(ext.Spec.ClientConfig, handler, strings.TrimSuffix(name, "."+configName))
	if err != nil {
		return nil, nil, fmt.Errorf("ExtensionConfig %s: %w", configName, err)
	}

	req := &runtimehooksv1.GenerateUpgradePlanRequest{
		Cluster:                           *requestCluster(planned),
		FromControlPlaneKubernetesVersion: cpVersion,
		FromWorkersKubernetesVersion:      minWorkers,
		ToKubernetesVersion:               planned.Spec.Topology.Version,
	}
	req.SetGroupVersionKind(runtimehooksv1.GroupVersion.WithKind("GenerateUpgradePlanRequest"))
	if len(ext.Spec.Settings) > 0 {
		req.Settings = ext.Spec.Settings
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the GenerateUpgradePlan request: %w", err)
	}
	timeout := defaultExtensionTimeout
	if handler.TimeoutSeconds > 0 {
		timeout = time.Duration(handler.TimeoutSeconds) * time.Second
	}
	httpClient, err := extensionHTTPClient(ext.Spec.ClientConfig.CABundle, timeout)
	if err != nil {
		return nil, nil, fmt.Errorf("ExtensionConfig %s: %w", configName, err)
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpResp, err := httpClient.Do(httpReq)
	if err != nil {
		return nil, nil, fmt.Errorf("calling %s: %w", name, err)
	}
	defer httpResp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(httpResp.Body, 1<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the answer of %s: %w", name, err)
	}
	if httpResp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%s answered %s: %s", name, httpResp.Status, core.OneLine(string(raw)))
	}
	resp := &runtimehooksv1.GenerateUpgradePlanResponse{}
	if err := json.Unmarshal(raw, resp); err != nil {
		return nil, nil, fmt.Errorf("decoding the answer of %s: %w", name, err)
	}
	if resp.Status != runtimehooksv1.ResponseStatusSuccess {
		return nil, nil, fmt.Errorf("%s answered %s: %s", name, orText(string(resp.Status), "no status"), resp.Message)
	}
	for _, s := range resp.ControlPlaneUpgrades {
		cp = append(cp, s.Version)
	}
	for _, s := range resp.WorkersUpgrades {
		workers = append(workers, s.Version)
	}
	return cp, workers, nil
}

// extensionURL is where Cluster API calls handler (named handlerName by
// its extension) of an extension with config: the URL's path joined with
// the hook's; an extension behind a Service is refused, as out of reach.
func extensionURL(config runtimev1.ClientConfig, handler *runtimev1.ExtensionHandler, handlerName string) (*url.URL, error) {
	if config.Service.IsDefined() {
		return nil, fmt.Errorf("the extension is served by Service %s/%s, which is only reachable from inside the management cluster", config.Service.Namespace, config.Service.Name)
	}
	if config.URL == "" {
		return nil, errors.New("clientConfig has neither url nor service")
	}
	u, err := url.Parse(config.URL)
	if err != nil {
		return nil, fmt.Errorf("clientConfig.url: %w", err)
	}
	if u.Scheme != "https" {
		return nil, fmt.Errorf("clientConfig.url %s: not https", config.URL)
	}
	gv, err := schema.ParseGroupVersion(handler.RequestHook.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("handler %s: requestHook.apiVersion: %w", handler.Name, err)
	}
	u.Path = path.Join(u.Path, runtimecatalog.GVHToPath(runtimecatalog.GroupVersionHook{Group: gv.Group, Version: gv.Version, Hook: handler.RequestHook.Hook}, handlerName))
	return u, nil
}

// extensionHTTPClient is an HTTPS client that trusts caBundle (the system's
// roots when it is empty).
func extensionHTTPClient(caBundle []byte, timeout time.Duration) (*http.Client, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("clientConfig.caBundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: tlsConfig, Proxy: http.ProxyFromEnvironment}}, nil
}

// requestCluster is the Cluster as Cluster API sends it to an extension:
// without status and managed fields.
func requestCluster(c *clusterv1.Cluster) *clusterv1.Cluster {
	c = c.DeepCopy()
	c.SetManagedFields(nil)
	c.Status = clusterv1.ClusterStatus{}
	return c
}
