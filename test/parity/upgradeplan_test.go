package parity

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/cluster-api/exp/topology/desiredstate"

	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/skew"
)

// classLists are ClusterClass spec.kubernetesVersions lists, ordered as
// Cluster API requires: the sandbox's, several patches of a minor, a missing
// minor, build metadata that orders, and build metadata that does not.
var classLists = map[string][]string{
	"sandbox":              {"v1.32.4", "v1.33.5", "v1.34.3", "v1.35.2", "v1.36.1"},
	"patches":              {"v1.33.0", "v1.33.1", "v1.33.5", "v1.34.0", "v1.34.3", "v1.35.0", "v1.35.2", "v1.36.0", "v1.36.1", "v1.37.0"},
	"a missing minor":      {"v1.32.4", "v1.33.5", "v1.35.2", "v1.36.1"},
	"two missing minors":   {"v1.31.2", "v1.34.3", "v1.35.2"},
	"ordered builds":       {"v1.33.5+build.1", "v1.33.5+build.2", "v1.34.3+build.1", "v1.34.3+build.2", "v1.35.2+build.1"},
	"unordered builds":     {"v1.33.5+abc", "v1.33.5+def", "v1.34.3+abc", "v1.34.3+def", "v1.35.2+abc"},
	"no v prefix":          {"1.33.5", "1.34.3", "1.35.2"},
	"one version":          {"v1.35.2"},
	"release candidates":   {"v1.34.3", "v1.35.0-rc.1", "v1.35.0", "v1.36.0-rc.0", "v1.36.1"},
	"long chain, one each": {"v1.28.9", "v1.29.4", "v1.30.2", "v1.31.1", "v1.32.4", "v1.33.5", "v1.34.3", "v1.35.2", "v1.36.1"},
}

// TestClassUpgradePlanMatchesClusterAPI: for every ClusterClass list above
// and every pair of its versions (from, to), policy.ClassUpgradePlan gives
// the control-plane steps Cluster API's GetUpgradePlanFromClusterClassVersions
// gives, and the guard refuses a skipped minor exactly when Cluster API's
// DefaultAndValidateUpgradePlans rejects the plan.
func TestClassUpgradePlanMatchesClusterAPI(t *testing.T) {
	pairs := 0
	for name, list := range classLists {
		capiPlan := desiredstate.GetUpgradePlanFromClusterClassVersions(list)
		for _, from := range list {
			for _, to := range list {
				label := fmt.Sprintf("%s: %s to %s", name, from, to)
				want, _, wantErr := capiPlan(context.Background(), to, from, "")
				got, gotErr := policy.ClassUpgradePlan(list, to, from)
				require.Equal(t, wantErr == nil, gotErr == nil, "%s: Cluster API %v, ours %v", label, wantErr, gotErr)
				assert.Equal(t, nonEmpty(want), nonEmpty(got), label)
				pairs++

				if !isUpgrade(t, from, to) {
					continue
				}
				// Cluster API validates the plan before it runs it.
				_, invalid := desiredstate.DefaultAndValidateUpgradePlans(to, from, "", want, nil)
				d := skew.EvaluateControlPlane(skew.ControlPlaneChange{
					Kind: "Cluster", Name: "demo", VersionField: "spec.topology.version",
					OldVersion: skew.ReadVersion(from), NewVersion: skew.ReadVersion(to), RunningVersions: skew.ReadVersions([]string{from}),
					Plan: &skew.UpgradePlan{Source: "ClusterClass demo-class spec.kubernetesVersions", Steps: skew.ReadVersions(got)},
				})
				refusedSkip := slices.ContainsFunc(d.Violations, func(v skew.Violation) bool { return v.Rule == skew.RuleControlPlaneMinorSkip })
				assert.Equal(t, invalid != nil, refusedSkip, "%s: Cluster API's validation says %v; the guard's violations %v", label, invalid, d.Violations)
			}
		}
	}
	t.Logf("%d pairs of versions compared over %d ClusterClass lists", pairs, len(classLists))
}

func isUpgrade(t *testing.T, from, to string) bool {
	t.Helper()
	f, err := skew.ParseVersion(from)
	require.NoError(t, err)
	o, err := skew.ParseVersion(to)
	require.NoError(t, err)
	return o.Compare(f) > 0
}

// nonEmpty maps an empty plan to nil: Cluster API returns []string{} where
// the guard returns nil, and both mean "no step".
func nonEmpty(plan []string) []string {
	if len(plan) == 0 {
		return nil
	}
	return plan
}
