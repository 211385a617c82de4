package webhooks

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestEnforcementWarn: with --enforcement=warn a change the policy refuses
// is allowed, with the refusal as a warning, and counted as warned once
// per rule; an allowed change gets no such warning; with deny (and by
// default) the same change is refused.
func TestEnforcementWarn(t *testing.T) {
	facts := testFacts(t, cluster("v1.34.2", "v1.34.2")...)
	tests := []struct {
		name        string
		enforcement Enforcement
		newVersion  string
		wantAllowed bool
		wantWarned  float64
	}{
		{"a downgrade, warn only", EnforcementWarn, "v1.33.5", true, 1},
		{"an upgrade, warn only", EnforcementWarn, "v1.35.0", true, 0},
		{"a downgrade, deny", EnforcementDeny, "v1.33.5", false, 0},
		{"a downgrade, by default", "", "v1.33.5", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := kcpValidator(facts)
			v.Enforcement = tt.enforcement
			warned := decisionsTotal.WithLabelValues("KubeadmControlPlane", outcomeWarned, "ControlPlaneDowngrade")
			before := testutil.ToFloat64(warned)
			resp := admission.WithValidator(testScheme(t), v).Handle(context.Background(), review(t, "KubeadmControlPlane", kcp("v1.34.2"), kcp(tt.newVersion)))
			require.Equal(t, tt.wantAllowed, resp.Allowed, "%+v", resp.Result)
			assert.Equal(t, before+tt.wantWarned, testutil.ToFloat64(warned))
			if tt.wantWarned > 0 {
				require.Len(t, resp.Warnings, 1)
				assert.Contains(t, resp.Warnings[0], "rollout-guard (--enforcement=warn) would refuse this change: ")
				assert.Contains(t, resp.Warnings[0], "Kubernetes downgrade from v1.34.2 to v1.33.5 is not supported by kubeadm [rule ControlPlaneDowngrade]")
				return
			}
			for _, w := range resp.Warnings {
				assert.NotContains(t, w, "would refuse")
			}
		})
	}
	_, err := ParseEnforcement("audit")
	assert.EqualError(t, err, `--enforcement "audit": want deny (refuse what the policy refuses) or warn (allow it with a warning, and count it)`)
}
