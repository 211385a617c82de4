package framework

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MetricsReaderAccount is the ServiceAccount MetricsReaderToken creates.
const MetricsReaderAccount = "scraper"

// MetricsReaderToken creates namespace with ServiceAccount
// MetricsReaderAccount, binds it to the guard's shipped
// rollout-guard-metrics-reader ClusterRole (ClusterRoleBinding
// namespace-reader) and returns a token of it valid for valid: what a
// Prometheus scraping the guard's metrics endpoint is given.
func MetricsReaderToken(ctx context.Context, c client.Client, namespace string, valid time.Duration) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: MetricsReaderAccount}}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		sa,
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: namespace + "-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rollout-guard-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: sa.Name}},
		},
	} {
		if err := c.Create(ctx, obj); err != nil {
			return "", fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(valid.Seconds()))}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token for the metrics scraper: %w", err)
	}
	return tr.Status.Token, nil
}
