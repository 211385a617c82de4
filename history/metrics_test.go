package history

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
)

// TestRecordErrorsAreCounted: a revision the Recorder cannot write counts
// once for its kind, whatever the cause and however often it was retried;
// a recorded one does not count. The alert on recording failures reads
// this counter.
func TestRecordErrorsAreCounted(t *testing.T) {
	crs := schema.GroupResource{Group: "apps", Resource: "rolloutrevisions"}
	for _, tc := range []struct {
		name   string
		create func() error
		want   float64
	}{
		{name: "recorded", create: func() error { return nil }},
		{name: "forbidden", create: func() error { return apierrors.NewForbidden(crs, "x", errors.New("no right")) }, want: 1},
		{name: "a conflict on every retry", create: func() error { return apierrors.NewConflict(crs, "x", errors.New("changed")) }, want: 1},
		{name: "the API server unreachable", create: func() error { return errors.New("connection refused") }, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtime.NewScheme()
			require.NoError(t, controlplanev1.AddToScheme(s))
			require.NoError(t, rgv1alpha1.AddToScheme(s))
			c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if err := tc.create(); err != nil {
						return err
					}
					return c.Create(ctx, obj, opts...)
				},
			}).Build()
			r := &Recorder{Client: c, Reader: c}
			kcp := kcpAt("v1.35.1", 3)
			snap, err := revisions.ForKubeadmControlPlane(kcp)
			require.NoError(t, err)

			before := testutil.ToFloat64(recordErrorsTotal.WithLabelValues("KubeadmControlPlane"))
			err = r.Record(context.Background(), kcp, kinds.KubeadmControlPlane.GVK, snap, revisions.Record{Revision: 3, History: []int64{3}})
			assert.Equal(t, tc.want != 0, err != nil, "error: %v", err)
			assert.Equal(t, before+tc.want, testutil.ToFloat64(recordErrorsTotal.WithLabelValues("KubeadmControlPlane")))
		})
	}
}

// TestRecordErrorSeriesExistFromTheStart: every kind's series is exported
// at 0 before any failure, so the first failure is an increase.
func TestRecordErrorSeriesExistFromTheStart(t *testing.T) {
	assert.Equal(t, len(kinds.WithRevisions()), testutil.CollectAndCount(recordErrorsTotal, "rollout_guard_revision_record_errors_total"))
}
