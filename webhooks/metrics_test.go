package webhooks

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecisionsAreCounted(t *testing.T) {
	before := testutil.ToFloat64(decisionsTotal.WithLabelValues("KubeadmControlPlane", outcomeRefused, "ControlPlaneDowngrade"))
	v := kcpValidator(testFacts(t, cluster("v1.35.2", "v1.34.2")...))
	_, err := v.ValidateUpdate(context.Background(), kcp("v1.35.2"), kcp("v1.34.2"))
	require.Error(t, err)
	after := testutil.ToFloat64(decisionsTotal.WithLabelValues("KubeadmControlPlane", outcomeRefused, "ControlPlaneDowngrade"))
	assert.Equal(t, before+1, after)
}
