package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The file names controller-runtime's webhook server reads from its cert
// directory.
const (
	tlsCertFile = "tls.crt"
	tlsKeyFile  = "tls.key"
)

// GuardCertDir returns the guard's --cert-dir, which holds its serving
// certificate (tls.crt) and key (tls.key). It belongs to the guard alone:
// the Cluster API conversion webhooks serve envtest's certificate from
// another directory. It is "" until the guard was first started.
func (e *Environment) GuardCertDir() string {
	e.guardMu.Lock()
	defer e.guardMu.Unlock()
	return e.guardCertDir
}

// GuardCABundle returns the PEM CA bundle the guard's webhook
// configurations trust, and that StartGuard registers them with.
func (e *Environment) GuardCABundle() []byte {
	e.guardMu.Lock()
	defer e.guardMu.Unlock()
	return bytes.Clone(e.guardCABundle)
}

// WriteGuardServingCert replaces the guard's serving certificate: it writes
// keyPEM to tls.key, then certPEM to tls.crt, each atomically (a new file
// renamed over the old one). The running guard's certificate watcher loads
// the pair once both are written; until then it keeps serving the previous
// pair, since a new key does not match the old certificate. The API server
// must already trust the new certificate's CA (SetGuardCABundle) or its
// calls fail from then on.
func (e *Environment) WriteGuardServingCert(certPEM, keyPEM []byte) error {
	dir := e.GuardCertDir()
	if dir == "" {
		return fmt.Errorf("writing the guard's serving certificate: the guard was never started")
	}
	if err := writeFileAtomically(filepath.Join(dir, tlsKeyFile), keyPEM, 0o600); err != nil {
		return fmt.Errorf("writing the guard's serving key: %w", err)
	}
	if err := writeFileAtomically(filepath.Join(dir, tlsCertFile), certPEM, 0o644); err != nil {
		return fmt.Errorf("writing the guard's serving certificate: %w", err)
	}
	e.logger.Info("guard serving certificate replaced", "dir", dir)
	return nil
}

// SetGuardCABundle sets caBundle (PEM, one or more CA certificates) on every
// webhook of the guard's webhook configurations (those GuardManifests
// names) and remembers it for later StartGuard calls. The API server picks
// the change up asynchronously, usually within a second.
func (e *Environment) SetGuardCABundle(ctx context.Context, caBundle []byte) error {
	if err := e.running(); err != nil {
		return fmt.Errorf("setting the guard's CA bundle: %w", err)
	}
	objs, err := LocalWebhookConfigurations(e.GuardManifests(), "https://"+localHost, nil)
	if err != nil {
		return fmt.Errorf("setting the guard's CA bundle: %w", err)
	}
	e.guardMu.Lock()
	e.guardCABundle = bytes.Clone(caBundle)
	e.guardMu.Unlock()
	for _, obj := range objs {
		key := client.ObjectKeyFromObject(obj)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			switch obj.(type) {
			case *admissionregistrationv1.ValidatingWebhookConfiguration:
				cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
				if err := e.Client.Get(ctx, key, cfg); err != nil {
					return err
				}
				for i := range cfg.Webhooks {
					cfg.Webhooks[i].ClientConfig.CABundle = caBundle
				}
				return e.Client.Update(ctx, cfg)
			case *admissionregistrationv1.MutatingWebhookConfiguration:
				cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
				if err := e.Client.Get(ctx, key, cfg); err != nil {
					return err
				}
				for i := range cfg.Webhooks {
					cfg.Webhooks[i].ClientConfig.CABundle = caBundle
				}
				return e.Client.Update(ctx, cfg)
			default:
				return fmt.Errorf("unexpected %T", obj)
			}
		})
		if err != nil {
			return fmt.Errorf("setting the CA bundle of %T %s: %w", obj, key.Name, err)
		}
	}
	e.logger.Info("guard CA bundle set", "configurations", len(objs))
	return nil
}

// ensureGuardCertDir makes the guard's cert directory on first use, with a
// copy of envtest's serving certificate (valid for 127.0.0.1), which
// envtest's CA signs, and with Options.GuardClientAuth the client CA
// (GuardClientCAFile).
func (e *Environment) ensureGuardCertDir() error {
	if e.guardCertDir != "" {
		return nil
	}
	wio := &e.testEnv.WebhookInstallOptions
	dir := filepath.Join(e.WorkDir, "guard-certs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the guard's cert directory: %w", err)
	}
	for _, name := range []string{tlsCertFile, tlsKeyFile} {
		data, err := os.ReadFile(filepath.Join(wio.LocalServingCertDir, name))
		if err != nil {
			return fmt.Errorf("reading envtest's serving certificate: %w", err)
		}
		if err := writeFileAtomically(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("writing the guard's serving certificate: %w", err)
		}
	}
	if e.clientAuth != nil {
		if err := writeFileAtomically(filepath.Join(dir, GuardClientCAFile), e.clientAuth.caPEM, 0o644); err != nil {
			return fmt.Errorf("writing the guard's client CA: %w", err)
		}
	}
	e.guardCertDir = dir
	e.guardCABundle = bytes.Clone(wio.LocalServingCAData)
	return nil
}

// writeFileAtomically writes data to a new file beside path and renames it
// over path, so a reader sees either the old or the new content.
func writeFileAtomically(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("creating a file beside %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(perm); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("setting the mode of %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", tmp.Name(), path, err)
	}
	return nil
}
