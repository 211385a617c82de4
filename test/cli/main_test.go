// Package cli drives the rollout CLI in-process, through rollout.Execute
// (the same path as cmd/rollout), against a real kube-apiserver with
// Cluster API's CRDs and the guard registered from the project's own
// manifests: every verb on MachineDeployments and KubeadmControlPlanes,
// every error path with its exact message and exit code, and the help,
// history tables and -o json pinned by golden files under testdata/
// (rewrite them with go test ./cli/ -update).
package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// overrideGroup is the group the guard of these tests lets use the break-glass override.
const overrideGroup = "platform-admins"

var (
	update = flag.Bool("update", false, "rewrite the golden files under testdata/")

	// env is the one API server and guard that every test of this package shares.
	env *framework.Environment
	// kubeconfigs by user: "admin" (system:masters), "oncall" (system:masters
	// and the override group), "mallory" (system:masters only), "viewer"
	// (only what the tests grant it through RBAC).
	kubeconfigs = map[string]string{}
	// cacheDir is the CLI's discovery cache.
	cacheDir string
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rollout-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating a temporary directory:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	cacheDir = filepath.Join(dir, "cache")
	logFile, err := os.Create(filepath.Join(dir, "environment.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating the log file:", err)
		return 1
	}
	defer logFile.Close()
	env, err = framework.Start(ctx, framework.Options{StartGuard: true, Log: logFile, GuardArgs: []string{"--override-groups=" + overrideGroup}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test environment:", err)
		return 1
	}
	code := func() int {
		kubeconfigs["admin"] = env.Kubeconfig
		for user, groups := range map[string][]string{
			"oncall":  {"system:masters", overrideGroup},
			"mallory": {"system:masters"},
			"viewer":  nil,
		} {
			path := filepath.Join(dir, user+".kubeconfig")
			if err := writeImpersonatingKubeconfig(env.Kubeconfig, path, user, groups); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			kubeconfigs[user] = path
		}
		return m.Run()
	}()
	if code != 0 {
		logFile.Sync()
		if tail, err := os.ReadFile(logFile.Name()); err == nil && len(tail) > 4000 {
			fmt.Fprintf(os.Stderr, "last lines of the environment log:\n%s\n", tail[len(tail)-4000:])
		}
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test environment:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// writeImpersonatingKubeconfig writes the admin kubeconfig with its user
// impersonating user in groups.
func writeImpersonatingKubeconfig(admin, path, user string, groups []string) error {
	kc, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		return fmt.Errorf("reading %s: %w", admin, err)
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate = user
		ai.ImpersonateGroups = append([]string(nil), groups...)
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// clock is the CLI's clock in these tests: fixed, so that AGE is
// deterministic (see setNow).
var clock struct {
	sync.Mutex
	now time.Time
}

// setNow fixes the CLI's clock; the zero time means the real clock.
func setNow(t time.Time) {
	clock.Lock()
	defer clock.Unlock()
	clock.now = t
}

func now() time.Time {
	clock.Lock()
	defer clock.Unlock()
	if clock.now.IsZero() {
		return time.Now()
	}
	return clock.now
}

// result is what one run of the CLI printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// runOptions tune one run of the CLI.
type runOptions struct {
	user        string
	beforeWrite func(ctx context.Context) error
	// tee, when set, also receives stdout and stderr, interleaved as a
	// terminal shows them.
	tee io.Writer
	// terminal runs the CLI as if a person answered at a terminal, with
	// stdin as what they type.
	terminal bool
	stdin    string
}

// rolloutAs runs the CLI with args as user (see kubeconfigs).
func rolloutAs(t *testing.T, user string, args ...string) result {
	t.Helper()
	return runCLI(t, runOptions{user: user}, args...)
}

// rolloutCmd runs the CLI with args as the admin.
func rolloutCmd(t *testing.T, args ...string) result {
	t.Helper()
	return runCLI(t, runOptions{user: "admin"}, args...)
}

func runCLI(t *testing.T, o runOptions, args ...string) result {
	t.Helper()
	kubeconfig, ok := kubeconfigs[o.user]
	require.True(t, ok, "no kubeconfig for user %q", o.user)
	var stdout, stderr bytes.Buffer
	var out, errOut io.Writer = &stdout, &stderr
	if o.tee != nil {
		out, errOut = io.MultiWriter(&stdout, o.tee), io.MultiWriter(&stderr, o.tee)
	}
	opts := framework.RolloutOptions(cacheDir, out, errOut)
	opts.Now = now
	opts.IOStreams.In = strings.NewReader(o.stdin)
	opts.Terminal = func() bool { return o.terminal }
	if o.beforeWrite != nil {
		opts.BeforeWrite = func(ctx context.Context, _ client.Object) error { return o.beforeWrite(ctx) }
	}
	code := rollout.Execute(context.Background(), opts, append(args, "--kubeconfig="+kubeconfig))
	// A teed run is part of a transcript compared as a whole: its golden
	// diff shows the run, and logging it too would bury that diff.
	if o.tee == nil {
		t.Logf("rollout %s\n--- exit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// ok asserts that a run succeeded and returns its stdout.
func (r result) ok(t *testing.T) string {
	t.Helper()
	require.Equal(t, 0, r.code, "exit code; stderr:\n%s", r.stderr)
	return r.stdout
}

// fails asserts that a run failed with exit code 1 and exactly the error
// message want on stderr ("error: " + want + "\n" as its last line(s)).
func (r result) fails(t *testing.T, want string) {
	t.Helper()
	assert.Equal(t, 1, r.code, "exit code; stdout:\n%s", r.stdout)
	assert.True(t, strings.HasSuffix(r.stderr, "error: "+want+"\n"), "stderr:\n%s\nwant it to end with:\nerror: %s", r.stderr, want)
}

// refused asserts that a run was refused by the policy or the guard
// (exit 6) with exactly the message want on stderr, as fails does.
func (r result) refused(t *testing.T, want string) {
	t.Helper()
	assert.Equal(t, rollout.ExitRefused, r.code, "exit code; stdout:\n%s", r.stdout)
	assert.True(t, strings.HasSuffix(r.stderr, "error: "+want+"\n"), "stderr:\n%s\nwant it to end with:\nerror: %s", r.stderr, want)
}

// lastLine is the last line of out (with its newline): what a command did,
// after what it showed first (undo prints the fields it changes).
func lastLine(out string) string {
	lines := strings.SplitAfter(strings.TrimSuffix(out, "\n"), "\n")
	return lines[len(lines)-1] + "\n"
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing: run go test ./cli/ -update")
	assert.Equal(t, string(want), got, "output differs from %s (rewrite it with -update if the change is intended)", path)
}

// stable replaces what differs between runs (times, UIDs, hashes, the
// discovery cache directory) with placeholders, for golden files.
func stable(s string) string {
	s = strings.ReplaceAll(s, cacheDir, "$HOME/.kube/cache")
	s = rfc3339.ReplaceAllString(s, "TIME")
	s = uid.ReplaceAllString(s, "UID")
	return s
}

var (
	rfc3339 = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	uid     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)
