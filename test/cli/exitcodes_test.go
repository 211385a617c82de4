package cli

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// exitCodeLine is a line of a help's exit-status block: "  6   refused ...".
var exitCodeLine = regexp.MustCompile(`^  (\d+)\s+\S`)

// documentedExitCodes reads the exit codes a command's --help lists.
func documentedExitCodes(t *testing.T, verb string) []int {
	t.Helper()
	help := rolloutCmd(t, strings.Fields(verb+" --help")...).ok(t)
	_, block, ok := strings.Cut(help, "\nExit status:\n")
	require.True(t, ok, "%s --help has no exit status:\n%s", verb, help)
	var codes []int
	for _, line := range strings.Split(block, "\n") {
		if line == "" {
			break
		}
		if m := exitCodeLine.FindStringSubmatch(line); m != nil {
			code, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			codes = append(codes, code)
		}
	}
	require.NotEmpty(t, codes, "%s --help lists no exit code", verb)
	return codes
}

// exitCase is one outcome of one command: what it runs (in the verb's
// world, after the cases before it) and the exit code it must end with.
type exitCase struct {
	name string
	args []string
	code int
}

// TestExitCodesAsDocumented runs every command to each of its outcomes and
// checks its exit code: the one its --help documents for that outcome, and
// every code a --help documents is reached. A refusal by the policy or a
// webhook is 6 in every command that changes or plans a change, dry runs
// and --emit included, and never the 1 of an error.
func TestExitCodesAsDocumented(t *testing.T) {
	kcp, md := "kcp/"+kcpName, "md/"+mdName
	for _, verb := range []struct {
		verb string
		// setup builds the world of the verb's cases in namespace ns.
		setup func(t *testing.T, ns string)
		cases []exitCase
		// unreached are documented codes no case here can reach, and why.
		unreached map[int]string
	}{
		{verb: "", // the template switch, and rollout KIND/NAME alone
			setup: func(t *testing.T, ns string) {
				newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
			},
			cases: []exitCase{
				{"switched", []string{md, "--template", "devmachinetemplate/c1-md-1"}, rollout.ExitOK},
				{"unchanged", []string{md, "--template", "devmachinetemplate/c1-md-1"}, rollout.ExitOK},
				{"template not found", []string{md, "--template", "devmachinetemplate/missing"}, rollout.ExitError},
				{"refused by the policy", []string{md, "--version", "v1.35.2"}, rollout.ExitRefused},
				{"refused, client dry run", []string{md, "--version", "v1.35.2", "--dry-run=client"}, rollout.ExitRefused},
				{"refused by the guard, server dry run", []string{md, "--version", "v1.35.2", "--dry-run=server"}, rollout.ExitRefused},
				{"refused, --emit", []string{md, "--version", "v1.35.2", "--emit", "yaml"}, rollout.ExitRefused},
				{"restart not confirmed", []string{kcp}, rollout.ExitNotConfirmed},
				{"restart confirmed", []string{kcp, "--yes"}, rollout.ExitOK},
			}},
		{verb: "restart",
			setup: func(t *testing.T, ns string) {
				newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
			},
			cases: []exitCase{
				{"restarted", []string{"restart", md}, rollout.ExitOK},
				{"not found", []string{"restart", "md/nope"}, rollout.ExitError},
				{"control plane not confirmed", []string{"restart", kcp}, rollout.ExitNotConfirmed},
				{"control plane confirmed", []string{"restart", kcp, "--yes"}, rollout.ExitOK},
			},
			unreached: map[int]string{rollout.ExitRefused: "no admission webhook of this environment refuses a restart"}},
		{verb: "pause",
			setup: func(t *testing.T, ns string) {
				newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
			},
			cases: []exitCase{
				{"paused", []string{"pause", md}, rollout.ExitOK},
				{"already paused", []string{"pause", md}, rollout.ExitOK},
				{"not found", []string{"pause", "md/nope"}, rollout.ExitError},
			}},
		{verb: "resume",
			setup: func(t *testing.T, ns string) {
				newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
			},
			cases: []exitCase{
				{"not paused", []string{"resume", md}, rollout.ExitOK},
				{"not found", []string{"resume", "md/nope"}, rollout.ExitError},
			}},
		{verb: "history",
			setup: func(t *testing.T, ns string) {
				newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
			},
			cases: []exitCase{
				{"shown", []string{"history", md}, rollout.ExitOK},
				{"not found", []string{"history", "md/nope"}, rollout.ExitError},
			}},
		{verb: "undo",
			setup: func(t *testing.T, ns string) {
				w := newWorld(t, ns, framework.WorldSpec{Version: "v1.33.5", WorkerVersion: "v1.33.5"})
				rolloutCmd(t, md, "--template", "devmachinetemplate/c1-md-1", "-n", ns).ok(t)
				rolloutCmd(t, kcp, "--version", "v1.34.2", "-n", ns).ok(t)
				waitRecorded(t, w.MD)
				waitRecorded(t, w.KCP)
			},
			cases: []exitCase{
				{"rolled back", []string{"undo", md}, rollout.ExitOK},
				{"already at that revision", []string{"undo", md, "--to-revision", "1"}, rollout.ExitOK},
				{"no such revision", []string{"undo", md, "--to-revision", "9"}, rollout.ExitError},
				{"refused by the policy", []string{"undo", kcp}, rollout.ExitRefused},
				{"refused, client dry run", []string{"undo", kcp, "--dry-run=client"}, rollout.ExitRefused},
				{"refused by the guard, server dry run", []string{"undo", kcp, "--dry-run=server"}, rollout.ExitRefused},
				{"refused, --emit", []string{"undo", kcp, "--emit", "yaml"}, rollout.ExitRefused},
			}},
		{verb: "plan",
			setup: func(t *testing.T, ns string) {
				w := newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
				w.AddPoolMachines(t, w.MD, 1, "v1.34.2")
			},
			cases: []exitCase{
				{"admitted", []string{"plan", md, "--template", "devmachinetemplate/c1-md-1"}, rollout.ExitOK},
				{"not found", []string{"plan", "md/nope", "--restart"}, rollout.ExitError},
				{"refused", []string{"plan", md, "--version", "v1.35.2"}, rollout.ExitRefused},
				{"would replace machines", []string{"plan", md, "--template", "devmachinetemplate/c1-md-1", "--fail-on-replace"}, rollout.ExitWouldReplace},
			}},
		{verb: "status",
			setup: func(t *testing.T, ns string) {
				w := newWorld(t, ns, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
				// A MachinePool whose provider runs its instances without
				// Machines, as most do, rolled out: its status counts alone.
				require.NoError(t, env.Client.Create(context.Background(), builder.DevMachinePool(ns, "c1-mp-0").Unstructured()))
				mp := w.MachinePool("c1-mp-0", "v1.34.2").WithBootstrapDataSecret("c1-mp-0-bootstrap").Build()
				require.NoError(t, env.Client.Create(context.Background(), mp))
				mp.Status.ObservedGeneration = mp.Generation
				mp.Status.Replicas, mp.Status.ReadyReplicas, mp.Status.AvailableReplicas, mp.Status.UpToDateReplicas = ptr.To[int32](2), ptr.To[int32](2), ptr.To[int32](2), ptr.To[int32](2)
				require.NoError(t, env.Client.Status().Update(context.Background(), mp))
				rolloutCmd(t, md, "--template", "devmachinetemplate/c1-md-1", "-n", ns).ok(t)
				require.NoError(t, env.Client.Get(context.Background(), client.ObjectKeyFromObject(w.MD), w.MD))
			},
			cases: []exitCase{
				{"rolled out", []string{"status", "mp/c1-mp-0"}, rollout.ExitOK},
				{"rolled out, one read", []string{"status", "mp/c1-mp-0", "--watch=false"}, rollout.ExitOK},
				{"not found", []string{"status", "md/nope"}, rollout.ExitError},
				{"timeout", []string{"status", kcp, "--timeout", "2s"}, rollout.ExitTimeout},
				{"stalled", []string{"status", kcp, "--progress-deadline", "1s", "--timeout", "10m"}, rollout.ExitStalled},
				{"superseded", []string{"status", md, "--revision", "1"}, rollout.ExitSuperseded},
				{"not rolled out yet, one read", []string{"status", kcp, "--watch=false"}, rollout.ExitNotRolledOut},
				{"paused", []string{"status", md, "--paused-by-the-case-before"}, rollout.ExitPaused},
			}},
	} {
		name := verb.verb
		if name == "" {
			name = "rollout"
		}
		t.Run(name, func(t *testing.T) {
			documented := documentedExitCodes(t, verb.verb)
			ns := "cli-exit-" + name
			verb.setup(t, ns)
			reached := map[int]bool{}
			for _, tc := range verb.cases {
				args := tc.args
				if slices.Contains(args, "--paused-by-the-case-before") {
					rolloutCmd(t, "pause", md, "-n", ns).ok(t)
					args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "--paused-by-the-case-before" })
				}
				r := rolloutCmd(t, append(args, "-n", ns)...)
				assert.Equal(t, tc.code, r.code, "%s: exit code; stderr:\n%s", tc.name, r.stderr)
				assert.Contains(t, documented, tc.code, "%s: exit %d is not in %s --help", tc.name, tc.code, name)
				if tc.code == rollout.ExitRefused {
					assert.NotContains(t, r.stderr, "rollout-guard is unavailable", "%s: a refusal, not the guard down", tc.name)
				}
				reached[tc.code] = true
			}
			for _, code := range documented {
				if why, ok := verb.unreached[code]; ok {
					t.Logf("exit %d of %s --help not reached here: %s", code, name, why)
					continue
				}
				assert.True(t, reached[code], "exit %d of %s --help is reached by no case", code, name)
			}
		})
	}
}
