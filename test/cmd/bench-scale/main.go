// Command bench-scale measures the guard (bin/webhook, run as test/framework
// runs it: its own process, the shipped RBAC and webhook manifests) against
// a management cluster of many clusters: its resident memory once its caches
// have synced, once its boot work is done and during a burst of policed
// updates, and the latency of those updates, next to the same burst against
// a small management cluster. Each world gets an API server of its own.
//
// Every cluster is: a Cluster, a KubeadmControlPlane (3 replicas), 3
// MachineDeployments, 10 Machines (3 control-plane, 7 workers) and 5
// RolloutRevisions per MachineDeployment and KubeadmControlPlane, owned by
// it and shaped like the guard's own (the live one among them), so 2,000
// clusters are 2,000 KCPs, 6,000 MDs, 20,000 Machines and 40,000
// RolloutRevisions. The objects are realistic (realistic.go): each
// KubeadmControlPlane has the kubeadmConfigSpec of Cluster API's quick
// start with files and commands, and the control planes, MachineDeployments
// and Machines have the status their controllers write, conditions
// included (--bare leaves specs minimal and statuses empty, the shape of
// the runs before).
//
// The burst is --burst policed updates (4 MachineDeployment version
// changes for every KubeadmControlPlane one) from --writers writers; the
// boot reconciliation (the guard recording the live revision of every
// MachineDeployment and KubeadmControlPlane after it starts) is timed from
// the guard's readiness to an empty work queue. With --summary the figures
// go into the scale section of a JSON summary.
//
// Usage (from the test module): go run ./cmd/bench-scale --clusters 2000 --small 100
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/bench/report"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

const (
	namespaces       = 20
	mdsPerCluster    = 3
	cpMachines       = 3
	workerMachines   = 7
	revisionsPerObj  = 5
	cpVersion        = "v1.35.0"
	workerVersion    = "v1.34.0"
	settleTimeout    = 20 * time.Minute
	rssSamplePeriod  = 100 * time.Millisecond
	guardStartBudget = 10 * time.Minute
)

type options struct {
	clusters, small, burst, writers, createWorkers int
	burstRounds                                    int
	out, summary, binDir, profileDir               string
	bare                                           bool
	variants                                       []variant
}

// variant is one environment the guard runs with in the large world, such
// as a Go garbage-collector setting ("GOGC=50"); "default" sets nothing.
type variant struct {
	name string
	env  map[string]string
}

func parseVariants(s string) ([]variant, error) {
	var out []variant
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		v := variant{name: item, env: map[string]string{}}
		if item != "default" {
			for _, kv := range strings.Split(item, "+") {
				k, val, ok := strings.Cut(kv, "=")
				if !ok {
					return nil, fmt.Errorf("variant %q: want default or NAME=VALUE[+NAME=VALUE]", item)
				}
				v.env[k] = val
			}
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("no variant")
	}
	return out, nil
}

func main() {
	var o options
	flag.IntVar(&o.clusters, "clusters", 2000, "clusters of the large world")
	flag.IntVar(&o.small, "small", 100, "clusters of the small world (the latency reference)")
	flag.IntVar(&o.burst, "burst", 500, "policed updates in the burst (4 MachineDeployment version changes for every KubeadmControlPlane one)")
	flag.IntVar(&o.writers, "writers", 8, "concurrent writers of the burst")
	flag.IntVar(&o.burstRounds, "burst-rounds", 3, "bursts per guard, one after the other; the large/small ratios are given per round, as their median and spread")
	flag.IntVar(&o.createWorkers, "create-workers", 32, "concurrent writers creating the world")
	flag.StringVar(&o.out, "out", "", "file the results are appended to (besides stdout)")
	flag.StringVar(&o.summary, "summary", "", "set the scale section of this JSON summary (e.g. bench/summary.json)")
	flag.StringVar(&o.binDir, "bin-dir", "", "directory of etcd, kube-apiserver and webhook (default: the repository's bin/)")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write the guard's CPU profile of its first 15 s after ready (guard-cpu-boot-CLUSTERS-VARIANT.pprof: the boot reconciliation) and its heap profile after the bursts (guard-heap-CLUSTERS-VARIANT.pprof; go tool pprof -sample_index=inuse_space -top FILE says where its live heap is) here")
	flag.BoolVar(&o.bare, "bare", false, "minimal objects without status (the shape of earlier runs) instead of realistic ones")
	variants := flag.String("variants", "default", "comma-separated environments the guard is run with, one after the other, in the large world: default, or NAME=VALUE[+NAME=VALUE] (e.g. GOGC=50)")
	flag.Parse()
	if o.burstRounds < 1 {
		fmt.Fprintln(os.Stderr, "--burst-rounds must be at least 1")
		os.Exit(2)
	}
	var err error
	if o.variants, err = parseVariants(*variants); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.SetLogger(logr.Discard())
	var out io.Writer = os.Stdout
	if o.out != "" {
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		f, err := os.OpenFile(o.out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		out = io.MultiWriter(os.Stdout, f)
	}
	// Ctrl-C or SIGTERM ends the run through its deferred clean-up, which
	// stops the worlds' etcd, kube-apiserver and guard.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o, out)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	machine := report.ThisMachine()
	begin := time.Now()
	shape := "realistic"
	if o.bare {
		shape = "bare"
	}
	fmt.Fprintf(out, "# bench-scale %s: load average at start %s; %s objects; cpu %s, %d cores\n", begin.UTC().Format(time.RFC3339),
		machine.LoadAtStart, shape, machine.CPUModel, machine.Cores)
	sum := scaleSummary{Command: strings.Join(append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...), " "), Started: begin.UTC().Format(time.RFC3339), Shape: shape,
		Burst: o.burst, Writers: o.writers}
	small, err := measureWorld(ctx, o, o.small, o.variants[:1], out)
	if err != nil {
		return fmt.Errorf("small world (%d clusters): %w", o.small, err)
	}
	sum.Worlds = append(sum.Worlds, small.fig)
	large, err := measureWorld(ctx, o, o.clusters, o.variants, out)
	if err != nil {
		return fmt.Errorf("large world (%d clusters): %w", o.clusters, err)
	}
	sum.Worlds = append(sum.Worlds, large.fig)
	for r := range min(len(large.rounds), len(small.rounds)) {
		sum.RatioP50Rounds = append(sum.RatioP50Rounds, report.Round3(large.rounds[r].p(0.50).Seconds()/small.rounds[r].p(0.50).Seconds()))
		sum.RatioP99Rounds = append(sum.RatioP99Rounds, report.Round3(large.rounds[r].p(0.99).Seconds()/small.rounds[r].p(0.99).Seconds()))
	}
	sum.RatioP50, sum.RatioP99 = median(sum.RatioP50Rounds), median(sum.RatioP99Rounds)
	machine.LoadAtEnd = report.LoadAverage()
	fmt.Fprintf(out, "ratio p50 large/small %.2f (rounds %v)\n", sum.RatioP50, sum.RatioP50Rounds)
	fmt.Fprintf(out, "ratio p99 large/small %.2f (rounds %v)\n", sum.RatioP99, sum.RatioP99Rounds)
	fmt.Fprintf(out, "# load average at end %s; took %s\n", machine.LoadAtEnd, time.Since(begin).Round(time.Second))
	sum.Machine, sum.Took = machine, time.Since(begin).Round(time.Second).String()
	if o.summary != "" {
		return report.UpdateSummary(o.summary, "scale", sum)
	}
	return nil
}

// scaleSummary is the scale section of bench/summary.json.
type scaleSummary struct {
	Command string         `json:"command"`
	Started string         `json:"started"`
	Took    string         `json:"took"`
	Machine report.Machine `json:"machine"`
	// Shape is realistic or bare (see the package comment).
	Shape   string     `json:"shape"`
	Burst   int        `json:"burst_updates"`
	Writers int        `json:"burst_writers"`
	Worlds  []worldFig `json:"worlds"`
	// RatioP50Rounds and RatioP99Rounds compare the large world's burst
	// with the small one's, round by round (first variant each); RatioP50
	// and RatioP99 are their medians.
	RatioP50       float64   `json:"burst_p50_ratio_large_small"`
	RatioP99       float64   `json:"burst_p99_ratio_large_small"`
	RatioP50Rounds []float64 `json:"burst_p50_ratios_per_round,omitempty"`
	RatioP99Rounds []float64 `json:"burst_p99_ratios_per_round,omitempty"`
}

// median is the middle of xs (the mean of the middle two for an even
// count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	if n := len(sorted); n%2 == 0 {
		return report.Round3((sorted[n/2-1] + sorted[n/2]) / 2)
	}
	return sorted[len(sorted)/2]
}

// worldFig is one world and what each guard variant did in it.
type worldFig struct {
	Clusters  int        `json:"clusters"`
	Guard     string     `json:"guard"`
	Objects   string     `json:"objects"`
	CreatedS  float64    `json:"created_s"`
	Guards    []guardFig `json:"guards"`
	Reference latFig     `json:"reference_label_only_burst"`
}

// guardFig is one guard variant in one world.
type guardFig struct {
	Variant     string  `json:"variant"`
	ReadyS      float64 `json:"ready_s"`
	ReadyRSSMiB float64 `json:"rss_ready_mib"`
	BootS       float64 `json:"boot_reconciliation_s"`
	BootRSSMiB  float64 `json:"rss_after_boot_mib"`
	PeakRSSMiB  float64 `json:"rss_peak_burst_mib"`
	HWMMiB      float64 `json:"vmhwm_after_burst_mib"`
	Burst       latFig  `json:"burst"`
	// BurstRounds are the bursts one by one; Burst is the first.
	BurstRounds   []latFig `json:"burst_rounds,omitempty"`
	LastGC        string   `json:"last_gc"`
	AnswerTimesMS string   `json:"guard_answer_times"`
}

// latFig is a burst's latencies.
type latFig struct {
	N     int     `json:"n"`
	P50ms float64 `json:"p50_ms"`
	P90ms float64 `json:"p90_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

func newLatFig(l latencies) latFig {
	if len(l) == 0 {
		return latFig{}
	}
	f := func(d time.Duration) float64 { return report.Round3(float64(d) / float64(time.Millisecond)) }
	return latFig{N: len(l), P50ms: f(l.p(0.50)), P90ms: f(l.p(0.90)), P99ms: f(l.p(0.99)), MaxMS: f(l[len(l)-1])}
}

// worldResult is a world's figures and the first variant's bursts, round
// by round.
type worldResult struct {
	fig    worldFig
	rounds []latencies
}

// latencies are the durations of the burst's updates, sorted.
type latencies []time.Duration

func (l latencies) p(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(q*float64(len(l))+0.5) - 1
	i = max(0, min(i, len(l)-1))
	return l[i]
}

// measureWorld starts an API server, creates the world, then for each
// variant (re)starts the guard and measures it; it stops everything before
// returning. It returns the world's figures and the latencies of the first
// variant's burst.
func measureWorld(ctx context.Context, o options, clusters int, variants []variant, out io.Writer) (worldResult, error) {
	logFile, err := os.CreateTemp("", fmt.Sprintf("rollout-guard-bench-scale-%d-*.log", clusters))
	if err != nil {
		return worldResult{}, fmt.Errorf("creating the log file: %w", err)
	}
	defer logFile.Close()
	fmt.Fprintf(os.Stderr, "world of %d clusters: logs in %s\n", clusters, logFile.Name())
	opts := framework.Options{BinDir: o.binDir, Log: logFile, GuardMetrics: true}
	pprofAddr := ""
	if o.profileDir != "" {
		if pprofAddr, err = framework.FreeLocalAddress(); err != nil {
			return worldResult{}, err
		}
		opts.GuardArgs = []string{"--pprof-bind-address=" + pprofAddr}
	}
	env, err := framework.Start(ctx, opts)
	if err != nil {
		return worldResult{}, fmt.Errorf("starting the API server: %w", err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the environment:", err)
		}
	}()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the API server is the limit
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return worldResult{}, fmt.Errorf("creating the client: %w", err)
	}

	prefix := fmt.Sprintf("world %d clusters:", clusters)
	begin := time.Now()
	counts, err := createWorld(ctx, c, clusters, o.createWorkers, !o.bare)
	if err != nil {
		return worldResult{}, err
	}
	created := time.Since(begin)
	fmt.Fprintf(out, "%s created %s in %s (%.0f objects/s)\n", prefix, counts, created.Round(time.Second),
		float64(counts.total())/created.Seconds())
	res := worldResult{fig: worldFig{Clusters: clusters, Guard: guardVersion(env.BinDir), Objects: counts.String(), CreatedS: report.Round3(created.Seconds())}}

	token, err := metricsToken(ctx, c)
	if err != nil {
		return worldResult{}, err
	}
	for n, v := range variants {
		rounds, g, err := measureGuard(ctx, env, c, o, clusters, n, v, logFile.Name(), token, pprofAddr, out)
		if err != nil {
			return worldResult{}, fmt.Errorf("guard with %s: %w", v.name, err)
		}
		res.fig.Guards = append(res.fig.Guards, g)
		if n == 0 {
			res.rounds = rounds
			// The same objects and writers, with changes the guard's
			// matchConditions leave out: the API server's own latency.
			base, _, err := burst(ctx, c, clusters, o, env.GuardPID(), 0, true)
			if err != nil {
				return worldResult{}, err
			}
			fmt.Fprintf(out, "%s reference burst of %d label-only updates of the same objects (no webhook called): p50 %s p90 %s p99 %s max %s\n",
				fmt.Sprintf("world %d clusters:", clusters), len(base), ms(base.p(0.50)), ms(base.p(0.90)), ms(base.p(0.99)), ms(base[len(base)-1]))
			res.fig.Reference = newLatFig(base)
		}
	}
	return res, nil
}

// measureGuard (re)starts the guard with variant v's environment and
// measures its memory after its caches sync, after its boot work and during
// a burst; n numbers the variant, so each burst sets versions of its own.
func measureGuard(ctx context.Context, env *framework.Environment, c client.Client, o options, clusters, n int, v variant, logPath, token, pprofAddr string, out io.Writer) ([]latencies, guardFig, error) {
	g := guardFig{Variant: v.name}
	// The guard inherits this process's environment.
	for k, val := range v.env {
		prev, had := os.LookupEnv(k)
		if err := os.Setenv(k, val); err != nil {
			return nil, g, err
		}
		defer func() {
			if had {
				_ = os.Setenv(k, prev)
			} else {
				_ = os.Unsetenv(k)
			}
		}()
	}
	// gctrace: the heap the garbage collector found live, in the guard's log.
	godebug, hadDebug := os.LookupEnv("GODEBUG")
	if err := os.Setenv("GODEBUG", strings.Trim(godebug+",gctrace=1", ",")); err != nil {
		return nil, g, err
	}
	defer func() {
		if hadDebug {
			_ = os.Setenv("GODEBUG", godebug)
		} else {
			_ = os.Unsetenv("GODEBUG")
		}
	}()

	prefix := fmt.Sprintf("world %d clusters, guard %s:", clusters, v.name)
	startCtx, cancel := context.WithTimeout(ctx, guardStartBudget)
	defer cancel()
	begin := time.Now()
	if err := env.StartGuard(startCtx); err != nil {
		return nil, g, err
	}
	pid := env.GuardPID()
	g.ReadyS, g.ReadyRSSMiB = report.Round3(time.Since(begin).Seconds()), rssMiB(pid)
	fmt.Fprintf(out, "%s ready (caches synced) after %s: %s\n", prefix, time.Since(begin).Round(100*time.Millisecond), memory(pid))

	var bootProfile chan error
	if pprofAddr != "" {
		bootProfile = saveBootProfile(ctx, pprofAddr, o.profileDir, clusters, v.name, out, prefix)
	}
	settled, err := waitReconciled(ctx, env.GuardMetricsURL(), token, clusters*(1+mdsPerCluster), settleTimeout)
	if err != nil {
		return nil, g, err
	}
	if bootProfile != nil {
		// Its seconds may outlast the reconciliation: the bursts wait, so
		// that the profile is of the start alone.
		if err := <-bootProfile; err != nil {
			return nil, g, err
		}
	}
	g.BootS, g.BootRSSMiB = report.Round3(settled.Seconds()), rssMiB(pid)
	fmt.Fprintf(out, "%s boot reconciliation of the %d MachineDeployments and KubeadmControlPlanes over after %s more: %s; %s\n",
		prefix, clusters*(1+mdsPerCluster), settled.Round(time.Second), memory(pid), lastGC(logPath))

	before, err := framework.ScrapeWebhookLatencies(ctx, env.GuardMetricsURL(), token)
	if err != nil {
		return nil, g, err
	}
	var rounds []latencies
	var peakRSS int64
	for r := range o.burstRounds {
		lat, peak, err := burst(ctx, c, clusters, o, pid, n*o.burstRounds+r, false)
		if err != nil {
			return nil, g, err
		}
		rounds, peakRSS = append(rounds, lat), max(peakRSS, peak)
		fmt.Fprintf(out, "%s burst %d of %d updates with %d writers: p50 %s p90 %s p99 %s max %s; peak VmRSS during the burst %s; after: %s; %s\n",
			prefix, r+1, len(lat), o.writers, ms(lat.p(0.50)), ms(lat.p(0.90)), ms(lat.p(0.99)), ms(lat[len(lat)-1]), mib(peak), memory(pid), lastGC(logPath))
		g.BurstRounds = append(g.BurstRounds, newLatFig(lat))
	}
	after, err := framework.ScrapeWebhookLatencies(ctx, env.GuardMetricsURL(), token)
	if err != nil {
		return nil, g, err
	}
	fmt.Fprintf(out, "%s the guard's own answer time during the bursts (%s): %s\n", prefix, framework.WebhookLatencyMetric, meanLatencies(before, after))
	g.Burst, g.PeakRSSMiB, g.LastGC, g.AnswerTimesMS = g.BurstRounds[0], report.Round3(float64(peakRSS)/(1<<20)), lastGC(logPath), meanLatencies(before, after)
	if st, err := readStatus(pid); err == nil {
		g.HWMMiB = report.Round3(float64(st.hwm) / (1 << 20))
	}
	if pprofAddr != "" {
		path, err := saveHeapProfile(ctx, pprofAddr, o.profileDir, clusters, v.name)
		if err != nil {
			return nil, g, err
		}
		fmt.Fprintf(out, "%s heap profile after the bursts: %s\n", prefix, path)
	}
	return rounds, g, nil
}

// lastGC returns the heap figures of the last garbage collection the guard
// traced in its log (GODEBUG=gctrace=1): heap before, after and live, and
// the goal of the next one.
func lastGC(logPath string) string {
	raw, err := os.ReadFile(logPath)
	if err != nil {
		return "no gctrace: " + err.Error()
	}
	lines := strings.Split(string(raw), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		if !strings.HasPrefix(line, "gc ") {
			continue
		}
		// gc N @Ts P%: ... ms clock, ... ms cpu, A->B->C MB, D MB goal, ...
		for _, part := range strings.Split(line, ", ") {
			if strings.HasSuffix(part, " MB") && strings.Contains(part, "->") {
				goal := ""
				if j := strings.Index(line, " MB goal"); j > 0 {
					k := strings.LastIndex(line[:j], " ")
					goal = line[k+1 : j]
				}
				return fmt.Sprintf("last GC: heap %s (before->after->live), next goal %s MB", part, goal)
			}
		}
	}
	return "no gctrace line in the log"
}

// counts are the objects of a world.
type counts struct{ clusters, kcps, mds, machines, revisions atomic.Int64 }

func (c *counts) total() int64 {
	return c.clusters.Load() + c.kcps.Load() + c.mds.Load() + c.machines.Load() + c.revisions.Load()
}

func (c *counts) String() string {
	return fmt.Sprintf("%d Clusters, %d KubeadmControlPlanes, %d MachineDeployments, %d Machines, %d RolloutRevisions",
		c.clusters.Load(), c.kcps.Load(), c.mds.Load(), c.machines.Load(), c.revisions.Load())
}

func namespaceOf(i int) string { return fmt.Sprintf("scale-%02d", i%namespaces) }
func clusterName(i int) string { return fmt.Sprintf("c%04d", i) }
func kcpName(i int) string     { return clusterName(i) + "-cp" }
func mdName(i, j int) string   { return fmt.Sprintf("%s-md-%d", clusterName(i), j) }

// createWorld creates the clusters with workers writers in parallel,
// realistic (see realistic.go) or bare.
func createWorld(ctx context.Context, c client.Client, clusters, workers int, realistic bool) (*counts, error) {
	for n := range min(namespaces, clusters) {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceOf(n)}}); err != nil {
			return nil, fmt.Errorf("creating namespace %s: %w", namespaceOf(n), err)
		}
	}
	n := &counts{}
	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := createCluster(ctx, c, i, n, realistic); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var failed error
feed:
	for i := range clusters {
		select {
		case jobs <- i:
		case failed = <-errs:
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	if failed == nil {
		failed = <-errs
	}
	return n, failed
}

// createCluster creates cluster i; realistic, it gives the control plane
// its kubeadmConfigSpec and every KubeadmControlPlane, MachineDeployment
// and Machine the status its controller writes; bare, it leaves them as a
// management cluster holds them before any controller ran.
func createCluster(ctx context.Context, c client.Client, i int, n *counts, realistic bool) error {
	ns, name := namespaceOf(i), clusterName(i)
	create := func(obj client.Object) error {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
		return nil
	}
	setStatus := func(obj client.Object, status map[string]any) error {
		if !realistic {
			return nil
		}
		raw, err := json.Marshal(status)
		if err != nil {
			return fmt.Errorf("encoding the status of %s: %w", obj.GetName(), err)
		}
		if err := c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, raw)); err != nil {
			return fmt.Errorf("writing the status of %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
		return nil
	}
	cluster := builder.Cluster(ns, name).WithControlPlane(kcpName(i)).WithInfrastructure(name).Build()
	if err := create(cluster); err != nil {
		return err
	}
	n.clusters.Add(1)

	kcp, err := worldKCP(i, realistic)
	if err != nil {
		return err
	}
	if err := createWithHistory(ctx, c, kcp, kinds.KubeadmControlPlane, func(obj client.Object, k int) {
		obj.(*controlplanev1.KubeadmControlPlane).Spec.Version = fmt.Sprintf("v1.%d.0", 30+k)
	}, n); err != nil {
		return err
	}
	if err := setStatus(kcp, kcpStatus(name, cpMachines, cpVersion, kcp.Generation)); err != nil {
		return err
	}
	n.kcps.Add(1)

	for j := range mdsPerCluster {
		md := worldMD(i, j)
		if err := createWithHistory(ctx, c, md, kinds.MachineDeployment, func(obj client.Object, k int) {
			obj.(*clusterv1.MachineDeployment).Spec.Template.Spec.Version = fmt.Sprintf("v1.%d.0", 29+k)
		}, n); err != nil {
			return err
		}
		if err := setStatus(md, mdStatus(mdName(i, j), workerVersion, 2, md.Generation)); err != nil {
			return err
		}
		n.mds.Add(1)
	}

	for m := range cpMachines + workerMachines {
		machine := worldMachine(i, m)
		if err := create(machine); err != nil {
			return err
		}
		if err := setStatus(machine, machineStatus(machine.Name, machine.Spec.Version, m < cpMachines, i*(cpMachines+workerMachines)+m)); err != nil {
			return err
		}
		n.machines.Add(1)
	}
	return nil
}

// worldKCP is the KubeadmControlPlane of cluster i (with the quick start's
// kubeadmConfigSpec when realistic), before it is created.
func worldKCP(i int, realistic bool) (*controlplanev1.KubeadmControlPlane, error) {
	kcp := builder.KubeadmControlPlane(namespaceOf(i), kcpName(i)).WithClusterName(clusterName(i)).WithReplicas(cpMachines).WithVersion(cpVersion).
		WithInfrastructureTemplate(kcpName(i)).Build()
	if realistic {
		spec, err := kubeadmConfigSpec(clusterName(i))
		if err != nil {
			return nil, err
		}
		kcp.Spec.KubeadmConfigSpec = spec
	}
	return kcp, nil
}

// worldMD is MachineDeployment j of cluster i, before it is created.
func worldMD(i, j int) *clusterv1.MachineDeployment {
	return builder.MachineDeployment(namespaceOf(i), mdName(i, j)).WithLabels(map[string]string{clusterv1.ClusterNameLabel: clusterName(i)}).
		WithClusterName(clusterName(i)).WithReplicas(2).WithSelector(map[string]string{"pool": mdName(i, j)}).WithVersion(workerVersion).
		WithBootstrapTemplate(mdName(i, j)).WithInfrastructureTemplate(mdName(i, j)).Build()
}

// worldMachine is Machine m of cluster i, before it is created: the first
// cpMachines are its control plane's, the others its pools' in turn.
func worldMachine(i, m int) *clusterv1.Machine {
	name := clusterName(i)
	labels := map[string]string{clusterv1.ClusterNameLabel: name}
	version := cpVersion
	if m < cpMachines {
		labels[clusterv1.MachineControlPlaneLabel] = ""
	} else {
		labels[clusterv1.MachineDeploymentNameLabel] = mdName(i, m%mdsPerCluster)
		version = workerVersion
	}
	machineName := fmt.Sprintf("%s-m%d", name, m)
	return builder.Machine(namespaceOf(i), machineName).WithLabels(labels).WithClusterName(name).WithVersion(version).
		WithBootstrapDataSecret(machineName).WithInfrastructureRef("DevMachine", machineName).Build()
}

// createWithHistory creates obj stamped as its revisionsPerObj-th revision
// and its revisionsPerObj RolloutRevisions, as the guard would have
// recorded them: revision k (1-based) differs from the live one by the
// version older(obj, k) sets; the last is the live content.
func createWithHistory(ctx context.Context, c client.Client, obj client.Object, kind kinds.Kind, older func(client.Object, int), n *counts) error {
	obj.SetAnnotations(record(revisionsPerObj).Annotations())
	if err := c.Create(ctx, obj); err != nil {
		return fmt.Errorf("creating %s %s/%s: %w", kind.GVK.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	for k := 1; k <= revisionsPerObj; k++ {
		content := obj.DeepCopyObject().(client.Object)
		if k < revisionsPerObj {
			older(content, k)
		}
		snap, err := kind.Snapshot(content)
		if err != nil {
			return fmt.Errorf("revision %d of %s %s: %w", k, kind.GVK.Kind, obj.GetName(), err)
		}
		cr := revisions.RolloutRevision(obj, kind.GVK, snap, record(k))
		if err := c.Create(ctx, cr); err != nil {
			return fmt.Errorf("creating RolloutRevision %s/%s: %w", cr.Namespace, cr.Name, err)
		}
		n.revisions.Add(1)
	}
	return nil
}

// record is the record of revision k of every object of the world: its
// stamps on the object when it is the live one, its RolloutRevision's.
func record(k int) revisions.Record {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return revisions.Record{Revision: int64(k), History: []int64{int64(k)}, ChangedBy: "alice", ChangedAt: at.Add(time.Duration(k) * time.Hour),
		FieldManager: "kubectl-edit", ChangeCause: fmt.Sprintf("upgrade %d", k), ChangeType: revisions.ChangeRollout}
}

// burst sends o.burst policed updates with o.writers writers: every fifth a
// KubeadmControlPlane patch-version upgrade (the guard lists the cluster's
// workers), the others a MachineDeployment patch-version upgrade (the guard
// reads the Cluster and its control plane). Each object belongs to one
// writer, so no two writers race on an object. Each update goes through the
// guard's validating and mutating webhooks, and the mutating one records
// the replaced revision. It returns the sorted latencies and the peak VmRSS
// of the guard sampled during the burst.
func burst(ctx context.Context, c client.Client, clusters int, o options, pid, round int, labelsOnly bool) (latencies, int64, error) {
	type update struct {
		obj     client.Object
		version string
	}
	perWriter := make([][]update, o.writers)
	kcpUpdates, mdUpdates := map[int]int{}, map[[2]int]int{}
	kcps, mds := 0, 0
	for u := range o.burst {
		var up update
		if u%5 == 4 {
			i := kcps % clusters
			kcps++
			kcpUpdates[i]++
			kcp := &controlplanev1.KubeadmControlPlane{}
			kcp.Namespace, kcp.Name = namespaceOf(i), kcpName(i)
			up = update{obj: kcp, version: fmt.Sprintf("v1.35.%d", 100*round+kcpUpdates[i])}
		} else {
			key := [2]int{mds % clusters, (mds / clusters) % mdsPerCluster}
			mds++
			mdUpdates[key]++
			md := &clusterv1.MachineDeployment{}
			md.Namespace, md.Name = namespaceOf(key[0]), mdName(key[0], key[1])
			up = update{obj: md, version: fmt.Sprintf("v1.34.%d", 100*round+mdUpdates[key])}
		}
		w := int(hashName(up.obj.GetNamespace()+"/"+up.obj.GetName()) % uint32(o.writers))
		perWriter[w] = append(perWriter[w], up)
	}

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(rssSamplePeriod)
		defer t.Stop()
		for {
			if rss, _ := readStatus(pid); rss.rss > peak.Load() {
				peak.Store(rss.rss)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()

	var mu sync.Mutex
	var all latencies
	var errs []error
	var wg sync.WaitGroup
	for _, ups := range perWriter {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, up := range ups {
				_, isKCP := up.obj.(*controlplanev1.KubeadmControlPlane)
				var patch []byte
				switch {
				case labelsOnly:
					patch = []byte(fmt.Sprintf(`{"metadata":{"labels":{"bench-scale":%q}}}`, strings.ReplaceAll(up.version, ".", "-")))
				case isKCP:
					patch = []byte(fmt.Sprintf(`{"spec":{"version":%q}}`, up.version))
				default:
					patch = []byte(fmt.Sprintf(`{"spec":{"template":{"spec":{"version":%q}}}}`, up.version))
				}
				begin := time.Now()
				err := c.Patch(ctx, up.obj, client.RawPatch(types.MergePatchType, patch))
				took := time.Since(begin)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("updating %T %s/%s to %s: %w", up.obj, up.obj.GetNamespace(), up.obj.GetName(), up.version, err))
				} else {
					all = append(all, took)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	if len(errs) > 0 {
		return nil, 0, fmt.Errorf("%d of %d updates failed, first: %w", len(errs), o.burst, errors.Join(errs[0]))
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return all, peak.Load(), nil
}

func hashName(s string) uint32 {
	h := uint32(2166136261)
	for i := range len(s) {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// status is the memory of a process, in bytes: resident now (rss), of it
// anonymous (the Go heap, stacks, runtime) and file-backed (mostly the
// binary's own pages), and its high-water mark.
type status struct{ rss, anon, file, hwm int64 }

// readStatus reads VmRSS, RssAnon, RssFile and VmHWM from
// /proc/PID/status.
func readStatus(pid int) (status, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return status{}, fmt.Errorf("reading the guard's memory: %w", err)
	}
	defer f.Close()
	var s status
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmRSS":
			s.rss = kb * 1024
		case "RssAnon":
			s.anon = kb * 1024
		case "RssFile":
			s.file = kb * 1024
		case "VmHWM":
			s.hwm = kb * 1024
		}
	}
	return s, sc.Err()
}

func memory(pid int) string {
	s, err := readStatus(pid)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("VmRSS %s (RssAnon %s, RssFile %s) VmHWM %s", mib(s.rss), mib(s.anon), mib(s.file), mib(s.hwm))
}

// rssMiB is the resident memory of pid in MiB, or 0 if unreadable.
func rssMiB(pid int) float64 {
	st, err := readStatus(pid)
	if err != nil {
		return 0
	}
	return report.Round3(float64(st.rss) / (1 << 20))
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// guardVersion is what the webhook binary in binDir prints with --version
// (git describe at build time).
func guardVersion(binDir string) string {
	out, err := exec.Command(filepath.Join(binDir, "webhook"), "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
