package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The guard's identity as config/rbac ships it: the ServiceAccount
// rollout-guard in namespace rollout-guard-system.
const (
	// GuardNamespace is the namespace the guard is installed in and where
	// its leader-election Lease lives.
	GuardNamespace = "rollout-guard-system"
	// GuardServiceAccountName is the name of the guard's ServiceAccount.
	GuardServiceAccountName = "rollout-guard"
	// GuardServiceAccount is the user name of the guard's ServiceAccount,
	// which the guard impersonates unless Options.GuardAsAdmin is set.
	GuardServiceAccount = "system:serviceaccount:" + GuardNamespace + ":" + GuardServiceAccountName
	// GuardUser is the user the guard authenticates as when
	// Options.GuardAsAdmin is set (group system:masters).
	GuardUser = "rollout-guard"
)

// GuardGroups are the groups the API server gives GuardServiceAccount.
func GuardGroups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + GuardNamespace, "system:authenticated"}
}

// GuardRBACDir returns the kustomization of the guard's RBAC:
// RepoRoot/config/rbac.
func (e *Environment) GuardRBACDir() string {
	return filepath.Join(e.RepoRoot, "config", "rbac")
}

// GuardConfig returns a copy of the client configuration the guard runs
// with: the admin impersonating GuardServiceAccount in GuardGroups, or,
// with Options.GuardAsAdmin, a system:masters user. It is nil until the
// guard was first started.
func (e *Environment) GuardConfig() *rest.Config {
	e.guardMu.Lock()
	defer e.guardMu.Unlock()
	if e.guardConfig == nil {
		return nil
	}
	return rest.CopyConfig(e.guardConfig)
}

// InstallGuardRBAC creates namespace GuardNamespace and creates or replaces
// every object that kustomize builds from GuardRBACDir: the ServiceAccount,
// the ClusterRoles and their bindings, the leader-election Role and its
// binding. StartGuard calls it once, before the guard first starts (unless
// Options.GuardAsAdmin); call it again to restore objects a test changed.
func (e *Environment) InstallGuardRBAC(ctx context.Context) error {
	if err := e.running(); err != nil {
		return fmt.Errorf("installing the guard's RBAC: %w", err)
	}
	objs, err := BuildKustomization(e.GuardRBACDir())
	if err != nil {
		return fmt.Errorf("installing the guard's RBAC: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: GuardNamespace}}
	if err := e.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("installing the guard's RBAC: creating namespace %s: %w", GuardNamespace, err)
	}
	for _, obj := range objs {
		if err := createOrReplace(ctx, e.Client, obj); err != nil {
			return fmt.Errorf("installing the guard's RBAC from %s: %w", e.GuardRBACDir(), err)
		}
	}
	e.logger.Info("guard RBAC installed", "from", e.GuardRBACDir(), "objects", len(objs))
	return nil
}

// ensureGuardIdentity provisions the guard's identity and writes its
// kubeconfig, once: it installs the shipped RBAC and, by default, makes the
// kubeconfig impersonate GuardServiceAccount; with Options.GuardAsAdmin it
// adds a system:masters user instead.
func (e *Environment) ensureGuardIdentity(ctx context.Context) error {
	if e.guardKubeconfig != "" {
		return nil
	}
	var cfg *rest.Config
	var data []byte
	// The arming Role (config/rbac/arming_role.yaml) must exist whoever
	// the guard runs as: the webhooks are called only once it is bound.
	if err := e.InstallGuardRBAC(ctx); err != nil {
		return err
	}
	if e.opts.GuardAsAdmin {
		user, err := e.testEnv.AddUser(envtest.User{Name: GuardUser, Groups: []string{"system:masters"}}, nil)
		if err != nil {
			return fmt.Errorf("provisioning the guard's user: %w", err)
		}
		if data, err = user.KubeConfig(); err != nil {
			return fmt.Errorf("making the guard's kubeconfig: %w", err)
		}
		cfg = user.Config()
	} else {
		var err error
		if data, err = impersonatingKubeconfig(e.testEnv.KubeConfig, GuardServiceAccount, GuardGroups()); err != nil {
			return fmt.Errorf("making the guard's kubeconfig: %w", err)
		}
		cfg = rest.CopyConfig(e.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: GuardServiceAccount, Groups: GuardGroups()}
	}
	path := filepath.Join(e.WorkDir, "guard.kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing the guard's kubeconfig: %w", err)
	}
	e.guardKubeconfig, e.guardConfig = path, cfg
	return nil
}

// impersonatingKubeconfig returns the kubeconfig adminKubeconfig with every
// user set to impersonate user in groups.
func impersonatingKubeconfig(adminKubeconfig []byte, user string, groups []string) ([]byte, error) {
	kc, err := clientcmd.Load(adminKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the admin kubeconfig: %w", err)
	}
	if len(kc.AuthInfos) == 0 {
		return nil, fmt.Errorf("the admin kubeconfig has no user")
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate = user
		ai.ImpersonateGroups = append([]string(nil), groups...)
	}
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("encoding the kubeconfig: %w", err)
	}
	return data, nil
}
