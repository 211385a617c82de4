package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestEnforcementWarnThroughTheAPIServer runs the guard with
// --enforcement=warn: a control-plane downgrade it would refuse goes
// through the API server with the refusal as a warning, and is recorded as
// any change; started again as configured, the guard refuses the same kind
// of change.
func TestEnforcementWarnThroughTheAPIServer(t *testing.T) {
	ctx := context.Background()
	// The world waits until the guard refuses what it would refuse: made
	// while it enforces.
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.33.5"})
	require.NoError(t, env.StartGuardWith(ctx, "--enforcement=warn"))
	t.Cleanup(func() { require.NoError(t, env.StartGuard(context.Background())) })
	c, warnings := warningClient(t, "")
	downgrade := func(version string) error {
		return c.Patch(ctx, w.KCP.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"version":"`+version+`"}}`)))
	}
	require.NoError(t, downgrade("v1.33.5"), "warn only: the downgrade is allowed")
	joined := strings.Join(warnings.texts, "\n")
	assert.Contains(t, joined, "rollout-guard (--enforcement=warn) would refuse this change: ")
	assert.Contains(t, joined, "Kubernetes downgrade from v1.34.2 to v1.33.5 is not supported by kubeadm [rule ControlPlaneDowngrade]")
	assert.EqualValues(t, 2, env.Stamps(t, w.KCP).Revision, "recorded as any change")

	require.NoError(t, env.StartGuard(ctx))
	err := downgrade("v1.32.4")
	require.Error(t, err, "enforcing again, the guard refuses a downgrade")
	assert.Contains(t, err.Error(), "[rule ControlPlaneDowngrade]")
}
