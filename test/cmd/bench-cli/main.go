// Command bench-cli measures what the rollout CLI costs:
//
//   - history: `rollout history` of a MachineDeployment with 100 recorded
//     revisions, run in-process through rollout.Execute (as cmd/rollout
//     does) with a transport that counts every API request; the discovery
//     cache is cold on the first run and warm on the later ones. The guard
//     records the revisions (test/framework, no controllers).
//   - status: in the sandbox (test/sandbox: the real Cluster API
//     controllers, simulated machines), the delay between a rollout
//     completing as the API server shows it and `bin/rollout status`
//     exiting. This program reads the object every 50 ms, which bounds
//     the moment of completion from both sides. It reads complete when
//     its latest generation is observed, every desired machine exists, is
//     new, ready, available and up to date, and no other machine is left.
//     Also, rollout history run as a process.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/test/bench/report"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

type options struct {
	binDir       string
	out          string
	revisions    int
	historyRuns  int
	statusMD     int
	statusKCP    int
	cpMachines   int
	workers      int
	skipHistory  bool
	skipStatus   bool
	statusArgs   string
	statusWindow time.Duration
	summary      string
}

// cliSummary is the cli section of bench/summary.json.
type cliSummary struct {
	Command string         `json:"command"`
	Started string         `json:"started"`
	Machine report.Machine `json:"machine"`
	History *historyFig    `json:"history,omitempty"`
	Status  []statusFig    `json:"status,omitempty"`
}

// historyFig is what rollout history of one MachineDeployment cost.
type historyFig struct {
	Revisions int `json:"revisions"`
	// RequestsCold and RequestsWarm are the API requests of the first run
	// (cold discovery cache) and the most of any later run.
	RequestsCold int `json:"requests_cold"`
	RequestsWarm int `json:"requests_warm"`
	ListsWarm    int `json:"controllerrevision_lists_warm"`
	// In-process and process wall times over the warm runs, ms.
	InProcessMS [3]float64 `json:"in_process_ms_min_median_max"`
	ProcessMS   [3]float64 `json:"process_ms_min_median_max"`
}

// statusFig is one rollout watched by rollout status: how long after the
// rollout's completion the command exited, between min and max (ms).
type statusFig struct {
	Rollout    string  `json:"rollout"`
	DelayMinMS float64 `json:"delay_min_ms"`
	DelayMaxMS float64 `json:"delay_max_ms"`
}

// sum collects the run's figures for --summary.
var sum cliSummary

func main() {
	var o options
	flag.StringVar(&o.binDir, "bin-dir", "", "directory of etcd, kube-apiserver, webhook and rollout (default: the repository's bin/)")
	flag.StringVar(&o.out, "out", "", "also write the output to this file")
	flag.IntVar(&o.revisions, "revisions", 100, "revisions of the MachineDeployment whose history is read")
	flag.IntVar(&o.historyRuns, "history-runs", 10, "runs of rollout history with a warm discovery cache")
	flag.IntVar(&o.statusMD, "status-md", 3, "MachineDeployment rollouts (template switches) watched by rollout status")
	flag.IntVar(&o.statusKCP, "status-kcp", 2, "KubeadmControlPlane rollouts (version upgrades) watched by rollout status")
	flag.IntVar(&o.cpMachines, "control-plane-machines", 1, "control-plane machines of the sandbox's demo cluster")
	flag.IntVar(&o.workers, "worker-machines", 2, "worker machines of the sandbox's demo cluster")
	flag.BoolVar(&o.skipHistory, "skip-history", false, "skip the history part")
	flag.BoolVar(&o.skipStatus, "skip-status", false, "skip the status part")
	flag.StringVar(&o.statusArgs, "status-args", "", "extra flags for rollout status, space-separated (e.g. --grace=0s)")
	flag.DurationVar(&o.statusWindow, "timeout", 5*time.Minute, "bound on each rollout")
	flag.StringVar(&o.summary, "summary", "", "set the cli section of this JSON summary (e.g. bench/summary.json)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-cli:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	out, closeOut, err := report.Output(o.out)
	if err != nil {
		return err
	}
	defer closeOut()
	logFile, err := os.CreateTemp("", "bench-cli-*.log")
	if err != nil {
		return fmt.Errorf("creating the log file: %w", err)
	}
	defer logFile.Close()
	fmt.Fprintf(os.Stderr, "bench-cli: log in %s\n", logFile.Name())
	sandbox.LogTo(logFile)

	sum.Machine = report.ThisMachine()
	sum.Command = strings.Join(append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...), " ")
	sum.Started = time.Now().UTC().Format(time.RFC3339)
	fmt.Fprintf(out, "cpu: %s\nloadavg-at-start: %s\nrollout: %s\n", report.CPUModel(), sum.Machine.LoadAtStart, binVersion(o.binDir, "rollout"))
	// Ctrl-C or SIGTERM ends the run through its deferred clean-up, which
	// stops every process it started.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !o.skipHistory {
		if err := benchHistory(ctx, o, out, logFile); err != nil {
			return fmt.Errorf("history: %w", err)
		}
	}
	if !o.skipStatus {
		if err := benchStatus(ctx, o, out, logFile); err != nil {
			return fmt.Errorf("status: %w", err)
		}
	}
	sum.Machine.LoadAtEnd = report.LoadAverage()
	fmt.Fprintf(out, "loadavg-at-end: %s\n", sum.Machine.LoadAtEnd)
	if o.summary != "" {
		return report.UpdateSummary(o.summary, "cli", sum)
	}
	return nil
}

// counter counts the API requests of one CLI run.
type counter struct {
	mu       sync.Mutex
	requests []string
}

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		line := req.Method + " " + req.URL.Path
		if req.URL.RawQuery != "" {
			line += "?" + req.URL.RawQuery
		}
		c.requests = append(c.requests, line)
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// benchHistory records o.revisions revisions of a MachineDeployment through
// the guard and times rollout history on it.
func benchHistory(ctx context.Context, o options, out io.Writer, log io.Writer) (retErr error) {
	env, err := framework.Start(ctx, framework.Options{BinDir: o.binDir, StartGuard: true, Log: log,
		// Keep every revision: the default limit would prune below 100.
		GuardArgs: []string{fmt.Sprintf("--history-limit=%d", o.revisions+10)}})
	if err != nil {
		return fmt.Errorf("starting the API server and the guard: %w", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("stopping the environment: %w", err))
		}
	}()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return fmt.Errorf("creating the client: %w", err)
	}
	md, err := createWorld(ctx, c)
	if err != nil {
		return err
	}
	// Every version bump is a new revision; the guard records the one it replaces.
	for i := 1; i < o.revisions; i++ {
		patch := fmt.Appendf(nil, `{"spec":{"template":{"spec":{"version":"v1.35.%d"}}}}`, i)
		if err := c.Patch(ctx, md, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("edit %d of MachineDeployment %s: %w", i, md.Name, err)
		}
	}
	// The live revision is recorded by the guard's reconciler, shortly after.
	if err := waitRevisions(ctx, c, md, o.revisions); err != nil {
		return err
	}

	cacheDir, err := os.MkdirTemp("", "bench-cli-cache-")
	if err != nil {
		return fmt.Errorf("creating the discovery cache directory: %w", err)
	}
	defer os.RemoveAll(cacheDir)
	args := []string{"history", "md/" + md.Name, "-n", md.Namespace, "--kubeconfig", env.Kubeconfig}
	fmt.Fprintf(out, "\n# rollout %s (MachineDeployment with %d revisions)\n\n", strings.Join(args[:4], " "), o.revisions)
	fmt.Fprintln(out, "| run | discovery cache | API requests | of which discovery | lists of RolloutRevisions | other requests | wall ms | rows printed |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|")
	var warm []time.Duration
	hist := &historyFig{Revisions: o.revisions}
	for run := 0; run <= o.historyRuns; run++ {
		cnt := &counter{}
		flags := genericclioptions.NewConfigFlags(true)
		flags.CacheDir = &cacheDir
		flags.WrapConfigFn = func(c *rest.Config) *rest.Config {
			c = rest.CopyConfig(c)
			c.Wrap(cnt.wrap)
			return c
		}
		var stdout, stderr bytes.Buffer
		start := time.Now()
		code := rollout.Execute(ctx, rollout.Options{
			IOStreams:   genericiooptions.IOStreams{In: strings.NewReader(""), Out: &stdout, ErrOut: &stderr},
			ConfigFlags: flags,
		}, args)
		wall := time.Since(start)
		if code != 0 {
			return fmt.Errorf("rollout %s exited %d: %s", strings.Join(args, " "), code, stderr.String())
		}
		rows := strings.Count(stdout.String(), "\n") - 1 // minus the header
		if rows != o.revisions {
			return fmt.Errorf("rollout history printed %d revisions, want %d:\n%s", rows, o.revisions, stdout.String())
		}
		var discovery, lists int
		other := 0
		for _, r := range cnt.requests {
			switch {
			case isDiscovery(r):
				discovery++
			case strings.HasPrefix(r, "GET /apis/rollout-guard.io/v1alpha1/namespaces/"+md.Namespace+"/rolloutrevisions"):
				lists++
			default:
				other++
			}
		}
		cache := "warm"
		if run == 0 {
			cache = "cold"
		} else {
			warm = append(warm, wall)
		}
		fmt.Fprintf(out, "| %d | %s | %d | %d | %d | %d | %.1f | %d |\n", run+1, cache, len(cnt.requests), discovery, lists, other, ms(wall), rows)
		if run == 0 {
			hist.RequestsCold = len(cnt.requests)
		} else {
			hist.RequestsWarm, hist.ListsWarm = max(hist.RequestsWarm, len(cnt.requests)), max(hist.ListsWarm, lists)
		}
		if run == 0 || run == o.historyRuns {
			fmt.Fprintf(out, "\nrequests of run %d:\n", run+1)
			for _, r := range cnt.requests {
				fmt.Fprintf(out, "    %s\n", r)
			}
			fmt.Fprintln(out)
		}
	}
	slices.Sort(warm)
	fmt.Fprintf(out, "history in-process, warm cache: %d runs, wall min %.1f ms, median %.1f ms, max %.1f ms\n",
		len(warm), ms(warm[0]), ms(warm[len(warm)/2]), ms(warm[len(warm)-1]))
	// What a user waits for: the binary, from its start to its exit.
	binDir := o.binDir
	if binDir == "" {
		binDir = env.BinDir
	}
	var procs []time.Duration
	for range o.historyRuns {
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "rollout"), append(slices.Clone(args), "--cache-dir", cacheDir)...)
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w: %s", cmd, err, stderr.String())
		}
		procs = append(procs, time.Since(start))
	}
	slices.Sort(procs)
	hist.InProcessMS = minMedianMax(warm)
	hist.ProcessMS = minMedianMax(procs)
	sum.History = hist
	fmt.Fprintf(out, "history as a process (%s), warm cache: %d runs, wall min %.1f ms, median %.1f ms, max %.1f ms\n",
		filepath.Join(binDir, "rollout"), len(procs), ms(procs[0]), ms(procs[len(procs)/2]), ms(procs[len(procs)-1]))
	for _, w := range warm {
		fmt.Fprintf(out, "BenchmarkCLIHistory/revisions=%d/run=in-process 1 %d ns/op\n", o.revisions, w.Nanoseconds())
	}
	for _, w := range procs {
		fmt.Fprintf(out, "BenchmarkCLIHistory/revisions=%d/run=process 1 %d ns/op\n", o.revisions, w.Nanoseconds())
	}
	return nil
}

// isDiscovery reports whether a request line is API discovery.
func isDiscovery(r string) bool {
	_, path, _ := strings.Cut(r, " ")
	path, _, _ = strings.Cut(path, "?")
	if path == "/api" || path == "/apis" || strings.HasPrefix(path, "/openapi") || path == "/version" {
		return true
	}
	// /apis/GROUP/VERSION and /api/v1 (resource lists), not resources.
	parts := strings.Split(strings.Trim(path, "/"), "/")
	return (parts[0] == "apis" && len(parts) <= 3) || (parts[0] == "api" && len(parts) <= 2)
}

// createWorld creates a namespace with a Cluster, its KubeadmControlPlane
// at v1.36.0 and a MachineDeployment at v1.35.0, and returns the latter.
func createWorld(ctx context.Context, c client.Client) (*clusterv1.MachineDeployment, error) {
	const ns, name = "bench-cli", "c1"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	cluster := builder.Cluster(ns, name).WithControlPlane(name + "-cp").WithInfrastructure(name).Build()
	kcp := builder.KubeadmControlPlane(ns, name+"-cp").WithClusterName(name).WithReplicas(1).WithVersion("v1.36.0").
		WithInfrastructureTemplate(name + "-cp").Build()
	md := builder.MachineDeployment(ns, name+"-md-0").WithClusterName(name).WithReplicas(3).
		WithSelector(map[string]string{"pool": "md-0"}).WithVersion("v1.35.0").
		WithBootstrapTemplate(name + "-md-0").WithInfrastructureTemplate(name + "-md-0").Build()
	for _, obj := range []client.Object{cluster, kcp, md} {
		if err := c.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return md, nil
}

// waitRevisions waits until md's history holds n RolloutRevisions.
func waitRevisions(ctx context.Context, c client.Client, md *clusterv1.MachineDeployment, n int) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("RolloutRevisionList"))
		if err := c.List(ctx, list, client.InNamespace(md.Namespace), client.MatchingLabels{revisions.LabelOwnerUID: string(md.UID)}); err != nil {
			return fmt.Errorf("listing the RolloutRevisions of MachineDeployment %s: %w", md.Name, err)
		}
		if len(list.Items) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("MachineDeployment %s has %d RolloutRevisions after 60s, want %d", md.Name, len(list.Items), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// benchStatus starts the sandbox and measures rollout status on real rollouts.
func benchStatus(ctx context.Context, o options, out io.Writer, log io.Writer) (retErr error) {
	begin := time.Now()
	sb, err := sandbox.Start(ctx, sandbox.Options{
		Environment:          framework.Options{BinDir: o.binDir, Log: log},
		ControlPlaneMachines: int32(o.cpMachines),
		WorkerMachines:       int32(o.workers),
	})
	if err != nil {
		return fmt.Errorf("starting the sandbox: %w", err)
	}
	defer func() {
		if err := sb.Stop(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("stopping the sandbox: %w", err))
		}
	}()
	fmt.Fprintf(out, "\n# rollout status in the sandbox (%d control-plane + %d worker machines; ready after %s)\n\n",
		o.cpMachines, o.workers, time.Since(begin).Round(100*time.Millisecond))
	fmt.Fprintln(out, "| rollout | completed (API server), between | status exited after | delay (exit - completion), between | exit code |")
	fmt.Fprintln(out, "|---|---|---|---|---|")
	ns := sandbox.DefaultNamespace
	mdName, kcpName := "demo-md-0", "demo-control-plane"
	type delay struct {
		kind  string
		delay statusDelay
	}
	var delays []delay
	templates := []string{"demo-md-0-v2", "demo-md-0"}
	for i := range o.statusMD {
		patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"infrastructureRef":{"name":%q}}}}}`, templates[i%2])
		d, err := measureStatus(ctx, o, sb, out, fmt.Sprintf("md template -> %s", templates[i%2]),
			builder.MachineDeployment(ns, mdName).Build(), patch, "md/"+mdName)
		if err != nil {
			return err
		}
		delays = append(delays, delay{"rollout=md-template", d})
	}
	for i := range o.statusKCP {
		version := fmt.Sprintf("v1.36.%d", i+1)
		patch := fmt.Sprintf(`{"spec":{"version":%q}}`, version)
		d, err := measureStatus(ctx, o, sb, out, "kcp version -> "+version,
			builder.KubeadmControlPlane(ns, kcpName).Build(), patch, "kcp/"+kcpName)
		if err != nil {
			return err
		}
		delays = append(delays, delay{"rollout=kcp-version", d})
	}
	for _, d := range delays {
		// delay-min is negative when the command exited before this
		// program's next read saw the rollout complete (reads are 50 ms apart).
		fmt.Fprintf(out, "BenchmarkCLIStatus/%s 1 %.1f delay-max-ms %.1f delay-min-ms\n", d.kind, ms(d.delay.max), ms(d.delay.min))
		sum.Status = append(sum.Status, statusFig{Rollout: d.kind, DelayMinMS: report.Round3(ms(d.delay.min)), DelayMaxMS: report.Round3(ms(d.delay.max))})
	}
	return nil
}

// measureStatus patches obj, runs bin/rollout status on it from right after
// the patch, and returns how long after the rollout completed (first seen
// complete by a read of the API server every 50 ms) the command exited.
func measureStatus(ctx context.Context, o options, sb *sandbox.Sandbox, out io.Writer, what string, obj client.Object, patch, target string) (statusDelay, error) {
	ctx, cancel := context.WithTimeout(ctx, o.statusWindow)
	defer cancel()
	binDir := o.binDir
	if binDir == "" {
		binDir = sb.Env.BinDir
	}
	if err := sb.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return statusDelay{}, fmt.Errorf("%s: patching %s: %w", what, obj.GetName(), err)
	}
	start := time.Now()
	generation := obj.GetGeneration()
	// Machine creation times have a resolution of one second.
	since := start.Add(-time.Second).Truncate(time.Second)
	args := append([]string{"status", target, "-n", obj.GetNamespace(), "--kubeconfig", sb.Kubeconfig}, strings.Fields(o.statusArgs)...)
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "rollout"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return statusDelay{}, fmt.Errorf("%s: starting rollout status: %w", what, err)
	}
	exited := make(chan time.Time, 1)
	var waitErr error
	go func() { waitErr = cmd.Wait(); exited <- time.Now() }()

	// The API server's view: poll every 50 ms until complete for the new generation.
	// The rollout completed after the start of the last read that found it
	// incomplete, and before the end of the first read that found it
	// complete: the delay lies between exit minus the latter and exit minus
	// the former.
	var complete time.Time
	lastIncomplete := start
	for complete.IsZero() {
		readStart := time.Now()
		done, err := rolloutComplete(ctx, sb.Client, obj, generation, since)
		if err != nil {
			return statusDelay{}, fmt.Errorf("%s: %w", what, err)
		}
		if done {
			complete = time.Now()
			break
		}
		lastIncomplete = readStart
		select {
		case <-ctx.Done():
			return statusDelay{}, fmt.Errorf("%s: not complete within %s", what, o.statusWindow)
		case <-time.After(50 * time.Millisecond):
		}
	}
	var exit time.Time
	select {
	case exit = <-exited:
	case <-ctx.Done():
		return statusDelay{}, fmt.Errorf("%s: rollout status did not exit within %s (complete %s after the patch); its output:\n%s%s", what, o.statusWindow, complete.Sub(start), stdout.String(), stderr.String())
	}
	code := 0
	var exitErr *exec.ExitError
	if errors.As(waitErr, &exitErr) {
		code = exitErr.ExitCode()
	} else if waitErr != nil {
		return statusDelay{}, fmt.Errorf("%s: rollout status: %w", what, waitErr)
	}
	d := statusDelay{min: exit.Sub(complete), max: exit.Sub(lastIncomplete)}
	fmt.Fprintf(out, "| %s | %.2f–%.2f s | %.2f s | %+.3f s … %+.3f s | %d |\n", what, lastIncomplete.Sub(start).Seconds(), complete.Sub(start).Seconds(),
		exit.Sub(start).Seconds(), d.min.Seconds(), d.max.Seconds(), code)
	if code != 0 {
		return statusDelay{}, fmt.Errorf("%s: rollout status exited %d:\n%s%s", what, code, stdout.String(), stderr.String())
	}
	// Leave the cluster fully settled (old machines gone) before the next rollout.
	if _, err := sb.WaitClusterReady(ctx, obj.GetNamespace(), "demo", nil); err != nil {
		return statusDelay{}, fmt.Errorf("%s: waiting for the cluster to settle: %w", what, err)
	}
	if d.max < 0 {
		return d, fmt.Errorf("%s: rollout status exited %s before a read that still found the rollout incomplete", what, -d.max)
	}
	return d, nil
}

// statusDelay bounds the time between a rollout completing and rollout
// status exiting.
type statusDelay struct{ min, max time.Duration }

// rolloutComplete reads obj and its machines: complete when its generation
// after the patch is observed, every desired machine exists and is ready,
// available and up to date, and no other machine of it remains. The
// rollouts measured replace every machine, so a machine created before the
// patch (since) is an old one: Cluster API keeps counting an old machine as
// up to date for a few seconds after the template changed.
func rolloutComplete(ctx context.Context, c client.Client, obj client.Object, generation int64, since time.Time) (bool, error) {
	var state sandbox.RolloutState
	var selector client.MatchingLabels
	switch o := obj.(type) {
	case *clusterv1.MachineDeployment:
		md := &clusterv1.MachineDeployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), md); err != nil {
			return false, fmt.Errorf("reading MachineDeployment %s: %w", o.Name, err)
		}
		if md.Status.ObservedGeneration < generation {
			return false, nil
		}
		state = sandbox.MachineDeploymentState(md)
		selector = client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: md.Name}
	case *controlplanev1.KubeadmControlPlane:
		kcp := &controlplanev1.KubeadmControlPlane{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), kcp); err != nil {
			return false, fmt.Errorf("reading KubeadmControlPlane %s: %w", o.Name, err)
		}
		if kcp.Status.ObservedGeneration < generation {
			return false, nil
		}
		state = sandbox.ControlPlaneState(kcp)
		selector = client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: kcp.Name}
	default:
		return false, fmt.Errorf("unexpected %T", obj)
	}
	if !state.Complete() {
		return false, nil
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(obj.GetNamespace()), selector); err != nil {
		return false, fmt.Errorf("listing the machines of %s: %w", obj.GetName(), err)
	}
	if len(machines.Items) != int(state.Desired) {
		return false, nil
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		if !sandbox.MachineReady(m) || m.CreationTimestamp.Time.Before(since) {
			return false, nil
		}
	}
	return true, nil
}

// minMedianMax of sorted durations, in ms.
func minMedianMax(sorted []time.Duration) [3]float64 {
	if len(sorted) == 0 {
		return [3]float64{}
	}
	return [3]float64{report.Round3(ms(sorted[0])), report.Round3(ms(sorted[len(sorted)/2])), report.Round3(ms(sorted[len(sorted)-1]))}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// binVersion is what binDir/name --version (or version) prints.
func binVersion(binDir, name string) string {
	if binDir == "" {
		root, err := framework.FindRepoRoot(".")
		if err != nil {
			return "unknown"
		}
		binDir = filepath.Join(root, "bin")
	}
	out, err := exec.Command(filepath.Join(binDir, name), "version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
