package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestPlanLocalWithReadRightsOnly plans a template switch, a version bump,
// an undo the guard refuses and a restart of the whole cluster twice: as the admin, through the
// server-side dry run, and as a user who may only get, list and watch,
// with --local and without it (the plan falls back to --local, saying
// so). The read-only plans have the same changes, steps, machines, counts,
// holds and verdict (the refusal from the policy, with the guard's rules
// and text, exit 6), marked local in JSON and in text.
func TestPlanLocalWithReadRightsOnly(t *testing.T) {
	ns := "cli-plan-local"
	w := newWorld(t, ns, framework.WorldSpec{Version: "v1.33.5", WorkerVersion: "v1.33.5"})
	w.AddPoolMachines(t, w.MD, 2, "v1.33.5")
	kcp, md := "kcp/"+kcpName, "md/"+mdName
	rolloutCmd(t, kcp, "--version", "v1.34.2", "-n", ns).ok(t)
	waitRecorded(t, w.KCP)
	setNow(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)) // restart plans name the time
	t.Cleanup(func() { setNow(time.Time{}) })
	grantViewer(t, ns, []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}}, w.MD, w.KCP, w.Cluster)

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"template switch", []string{"plan", md, "--template", "devmachinetemplate/c1-md-1"}, rollout.ExitOK},
		{"version bump", []string{"plan", md, "--version", "v1.33.6"}, rollout.ExitOK},
		{"refused undo", []string{"plan", kcp, "--to-revision", "1"}, rollout.ExitRefused},
		{"restart of the cluster", []string{"plan", "cluster/" + clusterName, "--restart"}, rollout.ExitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full := runPlan(t, "admin", tc.code, append(tc.args, "-n", ns, "-o", "json")...)
			for _, local := range []struct {
				name, flag, stderr string
			}{
				{"--local", "--local", ""},
				{"patch denied", "", "Warning: the server-side dry run is not permitted"},
			} {
				args := append(append([]string(nil), tc.args...), "-n", ns, "-o", "json")
				if local.flag != "" {
					args = append(args, local.flag)
				}
				r := rolloutAs(t, "viewer", args...)
				require.Equal(t, tc.code, r.code, "%s: exit code; stderr:\n%s", local.name, r.stderr)
				if local.stderr == "" {
					assert.NotContains(t, r.stderr, "Warning: the server-side dry run", local.name)
				} else {
					assert.Contains(t, r.stderr, local.stderr, local.name)
				}
				var got v1alpha1.RolloutPlan
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), "%s:\n%s", local.name, r.stdout)
				require.Len(t, got.Objects, len(full.Objects))
				assert.Equal(t, full.Admitted, got.Admitted, local.name)
				for i, op := range got.Objects {
					want := full.Objects[i]
					assert.True(t, op.Verdict.Local, "%s: the verdict is marked local", local.name)
					assert.False(t, want.Verdict.Local, "the dry run's verdict is not local")
					assert.Equal(t, want.Verdict.Admitted, op.Verdict.Admitted, local.name)
					assert.Equal(t, want.Verdict.Rules, op.Verdict.Rules, local.name)
					assert.Equal(t, want.Verdict.Message, op.Verdict.Message, "%s: the guard's own text", local.name)
					assert.Equal(t, want.Changes, op.Changes, local.name)
					assert.Equal(t, want.Steps, op.Steps, local.name)
					assert.Equal(t, want.Machines, op.Machines, local.name)
					assert.Equal(t, want.Counts, op.Counts, local.name)
					assert.Equal(t, want.Holds, op.Holds, local.name)
					assert.Equal(t, want.Effect, op.Effect, local.name)
					assert.Equal(t, want.Strategy, op.Strategy, local.name)
				}
			}
			r := rolloutAs(t, "viewer", append(tc.args, "-n", ns, "--local")...)
			assert.Equal(t, tc.code, r.code, r.stderr)
			assert.Contains(t, r.stdout, "nothing was changed (local: rollout-guard's policy evaluated here, no dry run).")
			if tc.code == rollout.ExitOK {
				assert.Contains(t, r.stdout, "  Verdict:  admitted by rollout-guard's policy, evaluated here (local: Cluster API's webhooks and the API server's validation not asked)\n")
			} else {
				assert.Contains(t, r.stdout, "  Verdict:  REFUSED by rollout-guard (")
				assert.Contains(t, r.stdout, "; its policy evaluated here, local)\n")
			}
		})
	}
}

// runPlan runs plan ... -o json as user, checks its exit code and decodes
// the plan.
func runPlan(t *testing.T, user string, code int, args ...string) v1alpha1.RolloutPlan {
	t.Helper()
	r := rolloutAs(t, user, args...)
	require.Equal(t, code, r.code, "exit code; stderr:\n%s", r.stderr)
	var p v1alpha1.RolloutPlan
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &p), r.stdout)
	require.NotEmpty(t, p.Objects, strings.Join(args, " "))
	return p
}
