package framework

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// GuardManifests returns the path of the guard's webhook registration:
// RepoRoot/config/webhook/manifests.yaml.
func (e *Environment) GuardManifests() string {
	return filepath.Join(e.RepoRoot, "config", "webhook", "manifests.yaml")
}

// LocalWebhookConfigurations reads the Validating- and
// MutatingWebhookConfigurations of a multi-document YAML file and points
// every webhook's clientConfig at baseURL (https://HOST:PORT) plus the path
// of its service reference, trusting caBundle. Everything else is kept as
// written; unknown fields are an error.
func LocalWebhookConfigurations(path, baseURL string, caBundle []byte) ([]client.Object, error) {
	docs, err := readYAMLDocuments(path)
	if err != nil {
		return nil, err
	}
	var objs []client.Object
	for i, doc := range docs {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("decoding document %d of %s: %w", i+1, path, err)
		}
		switch tm.Kind {
		case "ValidatingWebhookConfiguration":
			cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, cfg); err != nil {
				return nil, fmt.Errorf("decoding document %d of %s: %w", i+1, path, err)
			}
			for j := range cfg.Webhooks {
				if err := localClientConfig(&cfg.Webhooks[j].ClientConfig, baseURL, caBundle); err != nil {
					return nil, fmt.Errorf("webhook %s in %s: %w", cfg.Webhooks[j].Name, path, err)
				}
			}
			objs = append(objs, cfg)
		case "MutatingWebhookConfiguration":
			cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, cfg); err != nil {
				return nil, fmt.Errorf("decoding document %d of %s: %w", i+1, path, err)
			}
			for j := range cfg.Webhooks {
				if err := localClientConfig(&cfg.Webhooks[j].ClientConfig, baseURL, caBundle); err != nil {
					return nil, fmt.Errorf("webhook %s in %s: %w", cfg.Webhooks[j].Name, path, err)
				}
			}
			objs = append(objs, cfg)
		default:
			return nil, fmt.Errorf("document %d of %s: unexpected kind %q (want Validating- or MutatingWebhookConfiguration)", i+1, path, tm.Kind)
		}
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("no webhook configuration in %s", path)
	}
	return objs, nil
}

// localClientConfig replaces a service reference (or a URL) by baseURL plus
// the same path.
func localClientConfig(cc *admissionregistrationv1.WebhookClientConfig, baseURL string, caBundle []byte) error {
	path := "/"
	switch {
	case cc.Service != nil:
		if cc.Service.Path != nil && *cc.Service.Path != "" {
			path = *cc.Service.Path
		}
	case cc.URL != nil:
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return fmt.Errorf("parsing its URL: %w", err)
		}
		if u.Path != "" {
			path = u.Path
		}
	default:
		return fmt.Errorf("clientConfig has neither service nor url")
	}
	local := baseURL + path
	cc.Service = nil
	cc.URL = &local
	cc.CABundle = caBundle
	return nil
}

// registerGuardWebhooks creates or updates the guard's webhook
// configurations, pointed at the guard on port and trusting the guard's CA
// bundle. The caller holds guardMu.
func (e *Environment) registerGuardWebhooks(ctx context.Context, port int) error {
	base := "https://" + net.JoinHostPort(localHost, strconv.Itoa(port))
	objs, err := LocalWebhookConfigurations(e.GuardManifests(), base, e.guardCABundle)
	if err != nil {
		return fmt.Errorf("reading the guard's webhook configurations: %w", err)
	}
	for _, obj := range objs {
		if err := createOrReplace(ctx, e.Client, obj); err != nil {
			return err
		}
	}
	return nil
}

// createOrReplace creates obj, or replaces the existing object of that name
// with it.
func createOrReplace(ctx context.Context, c client.Client, obj client.Object) error {
	existing, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("copying %T", obj)
	}
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	case err != nil:
		return fmt.Errorf("reading %T %s: %w", obj, obj.GetName(), err)
	case obj.GetObjectKind().GroupVersionKind().Kind == "Secret":
		// A Secret the guard fills (its stamp key) keeps what it holds,
		// as `kubectl apply` of a manifest without data keeps it.
	default:
		obj.SetResourceVersion(existing.GetResourceVersion())
		if err := c.Update(ctx, obj); err != nil {
			return fmt.Errorf("updating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}
