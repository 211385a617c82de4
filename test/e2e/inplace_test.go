package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// A bump no control-plane Machine has run may be set back; once Cluster
// API has begun updating one of them in place (its in-progress annotation,
// set before the Machine's new spec), the Machine may already run the bump,
// so the revert is refused. The guard reads the annotation from its
// Machine store.
func TestRevertWhileAMachineIsUpdatedInPlace(t *testing.T) {
	ctx := context.Background()
	const refused = kcpDenied + `spec.version: Forbidden: KubeadmControlPlane c1-control-plane: Kubernetes downgrade from v1.36.1 to v1.35.2 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.36.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)`
	for _, tc := range []struct {
		name     string
		updating bool
		want     string // the refusal; "" when allowed
	}{
		{name: "no Machine runs the bump: allowed"},
		{name: "a Machine updated in place: refused", updating: true, want: refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, framework.WorldSpec{Version: "v1.35.2", WorkerVersion: "v1.34.3"})
			const machine = "c1-control-plane-0"
			w.AddMachine(t, machine, "v1.35.2", map[string]string{clusterv1.MachineControlPlaneLabel: ""})
			// A Machine created in the bump's own second counts as created
			// with it: bump in the next second.
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
			require.NoError(t, edit(t, mergePatch, w.KCP, "v1.36.1", kcpVersion...), "the bump")
			if tc.updating {
				m := &clusterv1.Machine{}
				m.Namespace, m.Name = w.Namespace, machine
				setAnnotations(t, m, map[string]any{clusterv1.UpdateInProgressAnnotation: ""})
			}
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				err := dryRunSet(ctx, w.KCP, "v1.35.2", kcpVersion...)
				if tc.want == "" {
					assert.NoError(c, err)
				} else if assert.Error(c, err) {
					assert.Equal(c, tc.want, err.Error())
				}
			}, 20*time.Second, 100*time.Millisecond, "the guard's cache never caught up")
			err := edit(t, mergePatch, w.KCP, "v1.35.2", kcpVersion...)
			if tc.want == "" {
				require.NoError(t, err, "the revert")
				return
			}
			require.Error(t, err, "the guard let the revert through")
			assert.Equal(t, tc.want, err.Error())
		})
	}
}
