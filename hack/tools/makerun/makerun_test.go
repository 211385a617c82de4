package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var testVersions = Versions{Kubernetes: "v1.36.3", Etcd: "v3.6.16", Kubectl: "v1.36.3", ClusterAPI: "v1.14.2"}

func outputs(steps []Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Outputs...)
	}
	return out
}

// make run builds what the sandbox runs and nothing of the monitoring
// tests; Cluster API's managers only for the flags that run them.
func TestPlanBuildsWhatTheSandboxRuns(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"webhook", "rollout", "etcd", "kubectl", "kube-apiserver", "sandbox"}},
		{[]string{"--clusters", "2"}, []string{"webhook", "rollout", "etcd", "kubectl", "kube-apiserver", "sandbox"}},
		{[]string{"--runtime-sdk"}, []string{"webhook", "rollout", "etcd", "kubectl", "kube-apiserver", "sandbox", "capi-core"}},
		{[]string{"-runtime-sdk=true", "--clusters", "2"}, []string{"webhook", "rollout", "etcd", "kubectl", "kube-apiserver", "sandbox", "capi-core"}},
		{[]string{"--runtime-sdk=false"}, []string{"webhook", "rollout", "etcd", "kubectl", "kube-apiserver", "sandbox"}},
		{[]string{"--in-place-updates"}, []string{"webhook", "rollout", "etcd", "kubectl", "kube-apiserver", "sandbox", "capi-core", "capi-kcp"}},
		// After "--" or a non-flag argument the flag package stops: the
		// sandbox refuses such arguments, and nothing more is built.
		{[]string{"--", "--runtime-sdk"}, []string{"webhook", "rollout", "etcd", "kubectl", "kube-apiserver", "sandbox"}},
	} {
		got := outputs(Plan(Config{Root: "/r", Version: "v0.1.0", SandboxArgs: tc.args}, testVersions))
		if !slices.Equal(got, tc.want) {
			t.Errorf("Plan(%q) builds %v, want %v", tc.args, got, tc.want)
		}
		for _, o := range got {
			if o == "promtool" || o == "kube-state-metrics" {
				t.Errorf("Plan(%q) builds %s, which only the monitoring tests run", tc.args, o)
			}
		}
	}
	got := outputs(Plan(Config{Root: "/r", ToolsOnly: true}, testVersions))
	if want := []string{"etcd", "kubectl", "kube-apiserver"}; !slices.Equal(got, want) {
		t.Errorf("Plan(tools only) builds %v, want %v", got, want)
	}
}

// One go build -o DIR/ of several packages names the binaries itself: a
// step of several packages must want those names.
func TestPlanStepsOfSeveralPackagesKeepGosNames(t *testing.T) {
	for _, s := range Plan(Config{Root: "/r", SandboxArgs: []string{"--in-place-updates"}}, testVersions) {
		if len(s.Packages) != len(s.Outputs) {
			t.Errorf("%s: %d packages, %d outputs", s.Name, len(s.Packages), len(s.Outputs))
		}
		if len(s.Packages) > 1 {
			for i, p := range s.Packages {
				if binaryName(p) != s.Outputs[i] {
					t.Errorf("%s: go build names %s's binary %s, not %s", s.Name, p, binaryName(p), s.Outputs[i])
				}
			}
		}
	}
}

func TestPlanVersionsAndFlags(t *testing.T) {
	steps := Plan(Config{Root: "/r", Version: "v0.1.0", SandboxArgs: []string{"--in-place-updates"}}, testVersions)
	byName := map[string]Step{}
	for _, s := range steps {
		byName[s.Outputs[0]] = s
	}
	if s := byName["kube-apiserver"]; s.Label() != "kube-apiserver v1.36.3" || s.Check == nil || s.Check.Want != "Kubernetes v1.36.3" ||
		!strings.Contains(s.LDFlags, "gitVersion=v1.36.3") || !strings.Contains(s.LDFlags, "gitMinor=36") || s.Dir != "/r/hack/tools" {
		t.Errorf("kube-apiserver step: %+v", s)
	}
	if s := byName["etcd"]; s.Check == nil || s.Check.Want != "etcd Version: 3.6.16" {
		t.Errorf("etcd step: %+v", s)
	}
	if s := byName["kubectl"]; s.Check == nil || s.Check.Want != "Client Version: v1.36.3" {
		t.Errorf("kubectl step: %+v", s)
	}
	if s := byName["webhook"]; s.Label() != "webhook and rollout v0.1.0" || s.LDFlags != "-X main.version=v0.1.0" || s.Check != nil || s.Dir != "/r" {
		t.Errorf("webhook step: %+v", s)
	}
	if s := byName["capi-core"]; s.Dir != "/r/test" || s.LDFlags != "-X sigs.k8s.io/cluster-api/version.gitVersion=v1.14.2" {
		t.Errorf("capi-core step: %+v", s)
	}
	if got := KubectlVersion("v0.36.3"); got != "v1.36.3" {
		t.Errorf("KubectlVersion(v0.36.3) = %s", got)
	}
}

// The guard's build runs alone first; then the tools' lane beside the
// sandbox's; with one lane, everything in plan order.
func TestStages(t *testing.T) {
	steps := Plan(Config{Root: "/r", SandboxArgs: []string{"--runtime-sdk"}}, testVersions)
	// 0 webhook+rollout, 1 etcd, 2 kubectl, 3 kube-apiserver, 4 sandbox, 5 capi-core
	got := Stages(steps, 2)
	want := [][][]int{{{0}}, {{1, 2, 3}, {4, 5}}}
	if !equalStages(got, want) {
		t.Errorf("Stages(2 lanes) = %v, want %v", got, want)
	}
	got = Stages(steps, 1)
	want = [][][]int{{{0}}, {{1, 2, 3, 4, 5}}}
	if !equalStages(got, want) {
		t.Errorf("Stages(1 lane) = %v, want %v", got, want)
	}
	// Warm: the guard's build beside the others, in a lane of its own
	// when there are three.
	warm := Plan(Config{Root: "/r", Warm: true}, testVersions)
	got = Stages(warm, 3)
	want = [][][]int{{{1, 2, 3}, {4}, {0}}}
	if !equalStages(got, want) {
		t.Errorf("Stages(warm, 3 lanes) = %v, want %v", got, want)
	}
	got = Stages(warm, 2)
	want = [][][]int{{{1, 2, 3}, {0, 4}}}
	if !equalStages(got, want) {
		t.Errorf("Stages(warm, 2 lanes) = %v, want %v", got, want)
	}
	got = Stages(Plan(Config{Root: "/r", ToolsOnly: true}, testVersions), 2)
	want = [][][]int{{{0, 1, 2}}}
	if !equalStages(got, want) {
		t.Errorf("Stages(tools only) = %v, want %v", got, want)
	}
}

func equalStages(a, b [][][]int) bool {
	return slices.EqualFunc(a, b, func(x, y [][]int) bool {
		return slices.EqualFunc(x, y, func(p, q []int) bool { return slices.Equal(p, q) })
	})
}

func TestFlagOn(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--runtime-sdk"}, true},
		{[]string{"-runtime-sdk"}, true},
		{[]string{"--runtime-sdk=1"}, true},
		{[]string{"--runtime-sdk", "--runtime-sdk=false"}, false},
		{[]string{"--runtime-sdk=nope"}, false},
		{[]string{"--runtime-sdk-x"}, false},
		{[]string{"extra", "--runtime-sdk"}, false},
	} {
		if got := flagOn(tc.args, "runtime-sdk"); got != tc.want {
			t.Errorf("flagOn(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestBinaryName(t *testing.T) {
	for pkg, want := range map[string]string{
		"./cmd/webhook":                 "webhook",
		"sigs.k8s.io/cluster-api/core":  "core",
		"k8s.io/kube-state-metrics/v2":  "kube-state-metrics",
		"example.com/tool/v1":           "v1",
		"github.com/x/cmd/v2ray":        "v2ray",
		"sigs.k8s.io/cluster-api/core/": "core",
		"github.com/a/b/cmd/something/": "something",
	} {
		if got := binaryName(pkg); got != want {
			t.Errorf("binaryName(%q) = %q, want %q", pkg, got, want)
		}
	}
}

type countingEvents struct {
	listed              int
	downloads, compiles []string
}

func (c *countingEvents) Listed(n int)         { c.listed = n }
func (c *countingEvents) Downloading(m string) { c.downloads = append(c.downloads, m) }
func (c *countingEvents) Compiled(p string)    { c.compiles = append(c.compiles, p) }
func (c *countingEvents) Done(time.Duration)   {}
func (c *countingEvents) Failed(error)         {}

func TestParseBuildLine(t *testing.T) {
	var ev countingEvents
	for _, l := range []string{
		"go: downloading k8s.io/kubernetes v1.36.3",
		"internal/goarch",
		"k8s.io/apimachinery/pkg/util/sets",
		"# github.com/rollout-guard/rollout-guard/webhooks",
		"webhooks/kcp.go:12:2: undefined: foo",
		"go: finding module for package x",
		"",
		"github.com/rollout-guard/rollout-guard/cmd/webhook",
	} {
		ParseBuildLine(l, &ev)
	}
	if !slices.Equal(ev.downloads, []string{"k8s.io/kubernetes v1.36.3"}) {
		t.Errorf("downloads %q", ev.downloads)
	}
	if want := []string{"internal/goarch", "k8s.io/apimachinery/pkg/util/sets", "github.com/rollout-guard/rollout-guard/cmd/webhook"}; !slices.Equal(ev.compiles, want) {
		t.Errorf("compiled %q, want %q", ev.compiles, want)
	}
}

// recordingReporter records the step lines as the plain reporter prints
// them.
type recordingReporter struct {
	mu    sync.Mutex
	plain *PlainReporter
	buf   bytes.Buffer
}

func newRecordingReporter() *recordingReporter {
	r := &recordingReporter{}
	r.plain = NewPlainReporter(&lockedWriter{r: r})
	return r
}

type lockedWriter struct{ r *recordingReporter }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.buf.Write(p)
}

func (r *recordingReporter) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Split(strings.TrimSpace(r.buf.String()), "\n")
}

// writeVersionScript puts an executable at path that prints out.
func writeVersionScript(t *testing.T, path, out string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho '"+out+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// A tool already at its pinned version is skipped, one at another version
// or missing is built, the repository's own binaries are always handed to
// go build; every step is counted out of the plan's length.
func TestRunSkipsWhatIsUpToDate(t *testing.T) {
	bin := t.TempDir()
	writeVersionScript(t, filepath.Join(bin, "etcd"), "etcd Version: 3.6.16")
	writeVersionScript(t, filepath.Join(bin, "kubectl"), "Client Version: v1.35.0") // an older pin
	// kube-apiserver is missing.
	steps := Plan(Config{Root: "/r", Version: "dev"}, testVersions)
	var mu sync.Mutex
	var built []string
	rep := newRecordingReporter()
	r := &Runner{BinDir: bin, LogDir: t.TempDir(), Lanes: 2, Report: rep.plain,
		GoBuild: func(_ context.Context, s Step, targets []string, ev BuildEvents, _ io.Writer) error {
			mu.Lock()
			built = append(built, s.Outputs...)
			mu.Unlock()
			ev.Listed(3)
			for i, p := range s.Packages {
				ev.Compiled(p)
				// The repository's own binaries are built in place (go
				// build then skips an unchanged link), the pinned tools
				// elsewhere and moved.
				if inBin := filepath.Dir(targets[i]) == bin; inBin != (s.Check == nil) {
					t.Errorf("%s built into %s", s.Outputs[i], targets[i])
				}
				if err := os.WriteFile(targets[i], []byte("built"), 0o755); err != nil {
					return err
				}
			}
			return nil
		}}
	if err := r.Run(context.Background(), steps); err != nil {
		t.Fatal(err)
	}
	slices.Sort(built)
	if want := []string{"kube-apiserver", "kubectl", "rollout", "sandbox", "webhook"}; !slices.Equal(built, want) {
		t.Errorf("built %v, want %v", built, want)
	}
	for _, name := range []string{"kube-apiserver", "kubectl", "webhook", "rollout", "sandbox"} {
		if b, err := os.ReadFile(filepath.Join(bin, name)); err != nil || string(b) != "built" {
			t.Errorf("bin/%s: %q, %v", name, b, err)
		}
	}
	lines := rep.lines()
	for _, want := range []string{
		"[1/5] building webhook and rollout dev …",
		"[1/5] webhook and rollout dev: built in ",
		"[2/5] etcd v3.6.16: up to date",
		"[3/5] building kubectl v1.36.3 …",
		"[4/5] building kube-apiserver v1.36.3 …",
		"[4/5] kube-apiserver v1.36.3: built in ",
		"[5/5] building sandbox …",
		"[5/5] sandbox: built in ",
	} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, want) }) {
			t.Errorf("no line %q in:\n%s", want, strings.Join(lines, "\n"))
		}
	}
	// No step's temporary directory is left in bin/.
	entries, _ := os.ReadDir(bin)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left in bin/: %s", e.Name())
		}
	}

	// Everything in place: a second run skips the tools and says so.
	for _, name := range []string{"kubectl", "kube-apiserver"} {
		want := map[string]string{"kubectl": "Client Version: v1.36.3", "kube-apiserver": "Kubernetes v1.36.3"}[name]
		writeVersionScript(t, filepath.Join(bin, name), want)
	}
	built = nil
	rep = newRecordingReporter()
	r.Report = rep.plain
	if err := r.Run(context.Background(), steps); err != nil {
		t.Fatal(err)
	}
	slices.Sort(built)
	if want := []string{"rollout", "sandbox", "webhook"}; !slices.Equal(built, want) {
		t.Errorf("second run built %v, want %v", built, want)
	}
	// With the tools up to date, the lines come in plan order.
	want := []string{
		"[1/5] building webhook and rollout dev …",
		"[1/5] webhook and rollout dev: built in ",
		"[2/5] etcd v3.6.16: up to date",
		"[3/5] kubectl v1.36.3: up to date",
		"[4/5] kube-apiserver v1.36.3: up to date",
		"[5/5] building sandbox …",
		"[5/5] sandbox: built in ",
	}
	got := rep.lines()
	if len(got) != len(want) {
		t.Fatalf("second run's lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("line %d: %q, want %q…", i+1, got[i], want[i])
		}
	}
}

// A failed build stops the run, keeps the binary that was there and names
// the step and its log.
func TestRunStopsAtAFailure(t *testing.T) {
	bin := t.TempDir()
	writeVersionScript(t, filepath.Join(bin, "webhook"), "old")
	steps := Plan(Config{Root: "/r", Version: "dev"}, testVersions)
	rep := newRecordingReporter()
	var mu sync.Mutex
	var ran []string
	r := &Runner{BinDir: bin, LogDir: t.TempDir(), Lanes: 2, Report: rep.plain,
		GoBuild: func(_ context.Context, s Step, _ []string, _ BuildEvents, _ io.Writer) error {
			mu.Lock()
			ran = append(ran, s.Outputs[0])
			mu.Unlock()
			return errors.New("undefined: foo")
		}}
	err := r.Run(context.Background(), steps)
	var se *StepError
	if !errors.As(err, &se) || se.Step.Outputs[0] != "webhook" || !strings.Contains(err.Error(), "build-webhook.log") {
		t.Fatalf("Run: %v, want the webhook step's error naming its log", err)
	}
	if !slices.Equal(ran, []string{"webhook"}) {
		t.Errorf("ran %v after the first stage failed", ran)
	}
	if b, _ := os.ReadFile(filepath.Join(bin, "webhook")); !strings.Contains(string(b), "old") {
		t.Errorf("bin/webhook replaced after a failed build: %q", b)
	}
	if !slices.Contains(rep.lines(), "[1/5] webhook and rollout dev: failed") {
		t.Errorf("lines:\n%s", strings.Join(rep.lines(), "\n"))
	}
}

func TestUpToDate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kube-apiserver")
	c := VersionCheck{Args: []string{"--version"}, Want: "Kubernetes v1.36.3"}
	if UpToDate(context.Background(), path, c) {
		t.Error("a missing binary is up to date")
	}
	writeVersionScript(t, path, "Kubernetes v1.36.2")
	if UpToDate(context.Background(), path, c) {
		t.Error("v1.36.2 is up to date for v1.36.3")
	}
	writeVersionScript(t, path, "Kubernetes v1.36.3")
	if !UpToDate(context.Background(), path, c) {
		t.Error("v1.36.3 is not up to date for v1.36.3")
	}
}

// An interrupt stops the running builds, which say so (not "failed"),
// and starts no other.
func TestRunInterrupted(t *testing.T) {
	steps := Plan(Config{Root: "/r", Version: "dev"}, testVersions)
	rep := newRecordingReporter()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var ran []string
	r := &Runner{BinDir: t.TempDir(), LogDir: t.TempDir(), Lanes: 3, Report: rep.plain,
		GoBuild: func(ctx context.Context, s Step, _ []string, _ BuildEvents, _ io.Writer) error {
			mu.Lock()
			ran = append(ran, s.Outputs[0])
			mu.Unlock()
			cancel() // Ctrl-C while it builds
			<-ctx.Done()
			return ctx.Err()
		}}
	err := r.Run(ctx, steps)
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Run: %v, want ErrInterrupted", err)
	}
	if !slices.Equal(ran, []string{"webhook"}) {
		t.Errorf("ran %v after the interrupt", ran)
	}
	if !slices.Contains(rep.lines(), "[1/5] webhook and rollout dev: interrupted") {
		t.Errorf("lines:\n%s", strings.Join(rep.lines(), "\n"))
	}
}
