package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/retry"
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// conversionServerTimeout bounds the start of the sandbox's webhook server.
const conversionServerTimeout = 30 * time.Second

// The environment installs the development infrastructure CRDs with two
// versions (v1beta1, v1beta2) and points their conversion at its own
// conversion webhook, whose scheme may not hold these kinds. The API server
// keeps a watch cache per served version and converts every stored object
// for it, so each write of a DevMachine then fails a conversion and every
// v1beta1 read fails. When the environment's scheme lacks the kinds, the
// sandbox serves their conversion itself (they convert through
// controller-runtime's Hub/Convertible) and points the CRDs at it.

// environmentConvertsInfrastructure reports whether the environment's
// conversion webhook knows the development infrastructure kinds.
func environmentConvertsInfrastructure() bool {
	scheme, err := framework.NewScheme()
	return err == nil && scheme.Recognizes(infrav1.GroupVersion.WithKind("DevMachine"))
}

// conversionServer is the sandbox's webhook server for the development
// infrastructure kinds' conversion.
type conversionServer struct {
	port     int
	certDir  string
	caBundle []byte
}

// newConversionServer generates a self-signed serving certificate for
// 127.0.0.1 in a new directory and picks a free port.
func newConversionServer() (*conversionServer, error) {
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(workloadHost, []net.IP{net.ParseIP(workloadHost)}, nil)
	if err != nil {
		return nil, fmt.Errorf("generating the conversion webhook's certificate: %w", err)
	}
	dir, err := os.MkdirTemp("", "rollout-guard-sandbox-certs-")
	if err != nil {
		return nil, fmt.Errorf("creating the conversion webhook's cert directory: %w", err)
	}
	s := &conversionServer{certDir: dir, caBundle: certPEM}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return s, fmt.Errorf("writing the conversion webhook's key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o644); err != nil {
		return s, fmt.Errorf("writing the conversion webhook's certificate: %w", err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(workloadHost, "0"))
	if err != nil {
		return s, fmt.Errorf("finding a free port for the conversion webhook: %w", err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return s, fmt.Errorf("finding a free port for the conversion webhook: %w", err)
	}
	return s, nil
}

// options are the manager's webhook server options.
func (s *conversionServer) options() webhook.Options {
	return webhook.Options{Host: workloadHost, Port: s.port, CertDir: s.certDir}
}

// register registers the conversion of the development infrastructure
// kinds served in two versions (path /convert).
func (s *conversionServer) register(mgr ctrl.Manager) error {
	for _, obj := range []client.Object{
		&infrav1.DevCluster{}, &infrav1.DevClusterTemplate{}, &infrav1.DevMachine{}, &infrav1.DevMachineTemplate{},
		&infrav1.DockerCluster{}, &infrav1.DockerClusterTemplate{}, &infrav1.DockerMachine{}, &infrav1.DockerMachineTemplate{},
	} {
		if err := ctrl.NewWebhookManagedBy(mgr, obj).Complete(); err != nil {
			return fmt.Errorf("conversion webhook of %T: %w", obj, err)
		}
	}
	return nil
}

// waitAndPointCRDs waits until mgr's webhook server serves, then points the
// conversion of every development infrastructure CRD that converts through
// a webhook at it.
func (s *conversionServer) waitAndPointCRDs(ctx context.Context, mgr ctrl.Manager, c client.Client) error {
	started := mgr.GetWebhookServer().StartedChecker()
	deadline := time.Now().Add(conversionServerTimeout)
	for started(nil) != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("the sandbox's conversion webhook server on port %d did not start within %s", s.port, conversionServerTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the sandbox's conversion webhook server: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds); err != nil {
		return fmt.Errorf("listing the CRDs: %w", err)
	}
	url := "https://" + net.JoinHostPort(workloadHost, strconv.Itoa(s.port)) + "/convert"
	for i := range crds.Items {
		crd := &crds.Items[i]
		if crd.Spec.Group != infrav1.GroupVersion.Group || crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
			continue
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			fresh := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), fresh); err != nil {
				return err
			}
			if fresh.Spec.Conversion.Webhook == nil {
				fresh.Spec.Conversion.Webhook = &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"}}
			}
			fresh.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: s.caBundle}
			return c.Update(ctx, fresh)
		})
		if err != nil {
			return fmt.Errorf("pointing the conversion of CRD %s at the sandbox: %w", crd.Name, err)
		}
	}
	return nil
}

// cleanup removes the certificate directory.
func (s *conversionServer) cleanup() error {
	if s == nil || s.certDir == "" {
		return nil
	}
	if err := os.RemoveAll(s.certDir); err != nil {
		return fmt.Errorf("removing the conversion webhook's cert directory: %w", err)
	}
	return nil
}
