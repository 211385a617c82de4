// Command soak runs the guard for a long time under a mixed load and checks
// that it does not leak: a sandbox (real etcd, kube-apiserver and Cluster
// API controllers, machines simulated in memory, the guard as its own
// process with the shipped RBAC and webhook registration) with one demo
// cluster of 1 control-plane and 2 worker machines, and for --duration:
//
//   - 4 writers editing two empty worker pools of the demo cluster (template
//     switches, patch-level version changes, labels of the machine template
//     — each a new revision the guard judges and records — and object
//     labels, which never reach it), and every --kcp-every the demo's
//     control plane (template switch or patch version, which rolls its
//     machine), each write a read-modify-update retried on conflicts;
//   - `rollout restart` every --restart-every (the CLI in-process) of a third
//     empty pool, and every fourth time of the demo's worker pool;
//   - a kube-apiserver restart every --apiserver-every (which ends every watch
//     of the guard and of the controllers) and a rotation of the guard's
//     serving certificate and CA every --rotate-every.
//
// Every --sample-every it reads the guard's resident memory and open file
// descriptors (/proc), its goroutines and heap (its metrics endpoint, with a
// token bound to the shipped metrics-reader role) and the API server's
// request counts. It writes under --out-dir: soak-samples.csv,
// soak-edits.csv (every edit and how it ended), soak.png (memory,
// goroutines and descriptors over time) and soak-summary.txt, and exits 1
// unless every pass criterion holds (see verdicts).
//
// Usage (from the test module): go run ./cmd/soak --duration 30m --out-dir ../bench
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/bench/report"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

type options struct {
	duration, sampleEvery                time.Duration
	warmup                               float64
	writers                              int
	editPause, kcpEvery, restartEvery    time.Duration
	apiEvery, apiDown, restartGrace      time.Duration
	trendSettle                          time.Duration
	rotateEvery, rotateSettle            time.Duration
	rssBound, goroutineBound, fdBound    Bound
	settleTimeout                        time.Duration
	outDir, binDir                       string
	seed                                 uint64
	workerMachines, controlPlaneMachines int
	machineStartup                       time.Duration
	plotWidth, plotHeight                int
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 30*time.Minute, "how long the load runs (after the sandbox is ready)")
	flag.DurationVar(&o.sampleEvery, "sample-every", 5*time.Second, "how often the guard and the API server are sampled")
	flag.Float64Var(&o.warmup, "warmup", 0.2, "fraction of the run left out of the trends (caches filling, heap reaching its working size)")
	flag.IntVar(&o.writers, "writers", 4, "concurrent writers")
	flag.DurationVar(&o.editPause, "edit-pause", time.Second, "mean pause of each writer between two edits (uniform between half and one and a half of it)")
	flag.DurationVar(&o.kcpEvery, "kcp-every", 90*time.Second, "how often a writer edits the demo's control plane instead of a pool (each edit rolls its machine)")
	flag.DurationVar(&o.restartEvery, "restart-every", 45*time.Second, "how often `rollout restart` runs")
	flag.DurationVar(&o.apiEvery, "apiserver-every", 4*time.Minute, "how often kube-apiserver is restarted (at most a third of --duration apart)")
	flag.DurationVar(&o.apiDown, "apiserver-down", 5*time.Second, "how long kube-apiserver stays down at each restart")
	flag.DurationVar(&o.restartGrace, "restart-grace", 5*time.Second, "how long after kube-apiserver is ready again failures still count as the restart's")
	flag.DurationVar(&o.trendSettle, "trend-settle", time.Minute, "samples from a kube-apiserver restart until this long after it is ready are left out of the trends (client-go's reflectors back off up to 30s, jittered up to twice that)")
	flag.DurationVar(&o.rotateEvery, "rotate-every", 6*time.Minute, "how often the guard's serving certificate is rotated (at most a third of --duration apart)")
	flag.DurationVar(&o.rotateSettle, "rotate-settle", 5*time.Second, "wait after each caBundle change of a rotation, for the API server to read it")
	flag.Float64Var(&o.rssBound.Fraction, "rss-bound", 0.05, "RSS may rise at most this fraction of its mean over the measured span...")
	flag.Float64Var(&o.rssBound.Floor, "rss-floor-mib", 4, "...or this many MiB, whichever is larger")
	flag.Float64Var(&o.goroutineBound.Fraction, "goroutine-bound", 0.05, "goroutines may rise at most this fraction of their mean...")
	flag.Float64Var(&o.goroutineBound.Floor, "goroutine-floor", 10, "...or this many, whichever is larger")
	flag.Float64Var(&o.fdBound.Fraction, "fd-bound", 0.05, "open file descriptors may rise at most this fraction of their mean...")
	flag.Float64Var(&o.fdBound.Floor, "fd-floor", 5, "...or this many, whichever is larger")
	flag.DurationVar(&o.settleTimeout, "settle-timeout", 2*time.Minute, "how long history may take to catch up after the load")
	flag.StringVar(&o.outDir, "out-dir", "../bench", "directory of the output files")
	flag.StringVar(&o.binDir, "bin-dir", "", "directory of etcd, kube-apiserver and webhook (default: the repository's bin/)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the writers' choices")
	flag.IntVar(&o.workerMachines, "worker-machines", 2, "machines of the demo's worker pool")
	flag.IntVar(&o.controlPlaneMachines, "control-plane-machines", 1, "machines of the demo's control plane (odd)")
	flag.DurationVar(&o.machineStartup, "machine-startup", time.Second, "each simulated start-up step of a machine")
	flag.IntVar(&o.plotWidth, "plot-width", 960, "width of soak.png")
	flag.IntVar(&o.plotHeight, "plot-height", 720, "height of soak.png")
	flag.Parse()
	if flag.NArg() > 0 || o.duration <= 0 || o.sampleEvery <= 0 || o.writers < 1 || o.warmup < 0 || o.warmup >= 1 {
		fmt.Fprintln(os.Stderr, "soak: bad arguments (see -help)")
		os.Exit(2)
	}
	o.apiEvery = min(o.apiEvery, o.duration/3)
	o.rotateEvery = min(o.rotateEvery, o.duration/3)

	// Ctrl-C or SIGTERM ends the load early; the deferred clean-up then
	// stops the controllers, the guard, kube-apiserver and etcd. A run cut
	// short is reported like a full one (and fails: it is not a soak).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	pass, err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if !pass {
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (pass bool, retErr error) {
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return false, err
	}
	logFile, err := os.CreateTemp("", "rollout-guard-soak-*.log")
	if err != nil {
		return false, fmt.Errorf("creating the log file: %w", err)
	}
	defer logFile.Close()
	fmt.Printf("soak: sandbox logs (controllers, guard) in %s\n", logFile.Name())
	sandbox.LogTo(logFile)
	loadAtStart := report.LoadAverage()

	startCtx, cancelStart := context.WithTimeout(ctx, 10*time.Minute)
	defer cancelStart()
	sb, err := sandbox.Start(startCtx, sandbox.Options{
		Environment:          framework.Options{BinDir: o.binDir, Log: logFile, GuardMetrics: true},
		ControlPlaneMachines: int32(o.controlPlaneMachines),
		WorkerMachines:       int32(o.workerMachines),
		MachineStartup:       o.machineStartup,
	})
	if err != nil {
		return false, fmt.Errorf("starting the sandbox: %w", err)
	}
	defer func() {
		if err := sb.Stop(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("stopping the sandbox: %w", err))
		}
	}()
	fmt.Printf("soak: sandbox ready after %s (%d control-plane + %d worker machines)\n", sb.ReadyAfter.Round(100*time.Millisecond), o.controlPlaneMachines, o.workerMachines)

	demo := sb.Clusters[0]
	s := &soak{o: o, sb: sb, demo: demo, ns: demo.Namespace,
		pools: []string{demo.Name + "-soak-a", demo.Name + "-soak-b"}, restartPool: demo.Name + "-soak-restart",
		seen: map[string][]Seen{}}
	if err := s.createPools(ctx); err != nil {
		return false, err
	}
	gs, err := newGuardScraper(ctx, sb.Client, sb.Env.GuardMetricsURL(), o.duration+time.Hour)
	if err != nil {
		return false, err
	}
	as := newAPIServerScraper(sb.Config)
	watcher, err := client.NewWithWatch(sb.Config, client.Options{Scheme: sb.Scheme})
	if err != nil {
		return false, err
	}
	cacheDir, err := os.MkdirTemp("", "rollout-guard-soak-cli-*")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(cacheDir)

	// The watches start before the load, and stop after history settled.
	watchCtx, stopWatches := context.WithCancel(context.Background())
	var watches sync.WaitGroup
	for _, newList := range []func() client.ObjectList{
		func() client.ObjectList { return &clusterv1.MachineDeploymentList{} },
		func() client.ObjectList { return &controlplanev1.KubeadmControlPlaneList{} },
	} {
		watches.Add(1)
		go func() {
			defer watches.Done()
			s.watchPersisted(watchCtx, watcher, newList)
		}()
	}
	defer func() {
		stopWatches()
		watches.Wait()
	}()

	s.begin = time.Now()
	s.end = s.begin.Add(o.duration)
	guardPID := sb.Env.GuardPID()
	fmt.Printf("soak: load for %s from %s: %d writers, control-plane edit every %s, rollout restart every %s, kube-apiserver restart every %s, certificate rotation every %s; sampling every %s (guard pid %d)\n",
		o.duration, s.begin.Format(time.TimeOnly), o.writers, o.kcpEvery, o.restartEvery, o.apiEvery, o.rotateEvery, o.sampleEvery, guardPID)

	loadCtx, stopLoad := context.WithDeadline(ctx, s.end)
	defer stopLoad()
	var load sync.WaitGroup
	for i := range o.writers {
		c, err := sb.ClientAs(fmt.Sprintf("soak-writer-%d@example.com", i), "system:masters")
		if err != nil {
			return false, err
		}
		load.Add(1)
		go func() {
			defer load.Done()
			s.writer(loadCtx, i, c)
		}()
	}
	load.Add(2)
	go func() {
		defer load.Done()
		s.restarter(loadCtx, cacheDir)
	}()
	go func() {
		defer load.Done()
		s.faults(loadCtx)
	}()

	sm := &sampler{s: s, guard: gs, api: as, webhookPort: portOf(sb.Env.GuardURL()), apiServerPort: portOf(sb.Config.Host)}
	samples := []Sample{sm.sample(ctx)}
	next := s.begin.Add(o.sampleEvery)
	lastPrint := time.Now()
	for loadCtx.Err() == nil {
		select {
		case <-loadCtx.Done():
			continue
		case <-time.After(time.Until(next)):
		}
		next = next.Add(o.sampleEvery)
		smp := sm.sample(ctx)
		samples = append(samples, smp)
		if time.Since(lastPrint) >= time.Minute {
			lastPrint = time.Now()
			fmt.Printf("  %7s  guard rss %.1f MiB, %s goroutines, %.0f fds; edits %d ok (%d policed), %d failed\n",
				smp.At.Round(time.Second), smp.RSSBytes/mib, num(smp.Goroutines, 0), smp.FDs, smp.Edits, smp.PolicedEdits, smp.Failed)
		}
	}
	interrupted := ctx.Err() != nil
	fmt.Println("soak: load over; waiting for the writers and any fault in progress")
	load.Wait()
	samples = append(samples, sm.sample(context.Background()))
	loadAtEnd := report.LoadAverage()

	// History: the guard's reconciler records the live revisions a moment
	// after the last edits; give it settleTimeout.
	var histories []objectHistory
	settleBegin := time.Now()
	for {
		histories, err = s.checkHistories(context.Background())
		complete := err == nil
		for _, h := range histories {
			complete = complete && len(h.check.Problems) == 0
		}
		if complete || time.Since(settleBegin) > o.settleTimeout {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if err != nil {
		return false, fmt.Errorf("checking history: %w", err)
	}
	settled := time.Since(settleBegin)

	res := s.evaluate(samples, histories, guardPID, interrupted)
	res.loadAtStart, res.loadAtEnd, res.settled = loadAtStart, loadAtEnd, settled
	res.readyAfter = sb.ReadyAfter
	return res.pass, s.writeOutputs(samples, res)
}

// sampler reads the guard and the API server.
type sampler struct {
	s                                  *soak
	webhookPort, apiServerPort         int
	guard                              *guardScraper
	api                                *apiServerScraper
	apiRequests, crRequests, hookCalls Counter
	guardErrs, apiErrs                 int
	lastGuardErr, lastAPIErr           string
}

func (m *sampler) sample(ctx context.Context) Sample {
	s := m.s
	smp := Sample{At: time.Since(s.begin), PID: s.sb.Env.GuardPID()}
	smp.RSSBytes, smp.RSSAnonBytes, smp.RSSFileBytes, smp.FDs = nanOf(), nanOf(), nanOf(), nanOf()
	smp.WebhookConns, smp.APIConns = nanOf(), nanOf()
	if smp.PID != 0 {
		if st, err := processStats(smp.PID); err == nil {
			smp.RSSBytes, smp.RSSAnonBytes, smp.RSSFileBytes, smp.FDs = st.rss, st.rssAnon, st.rssFile, st.fds
		}
		if socks, err := socketStats(smp.PID, m.webhookPort, m.apiServerPort); err == nil {
			smp.WebhookConns, smp.APIConns = float64(socks.WebhookIn), float64(socks.APIServerOut)
		}
	}
	smp.Goroutines, smp.HeapInuseBytes, smp.GuardRequests, smp.LiveDecisions = nanOf(), nanOf(), nanOf(), nanOf()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if v, err := m.guard.scrape(sctx); err == nil {
		smp.Goroutines, smp.HeapInuseBytes, smp.GuardRequests, smp.LiveDecisions = v[0], v[1], v[2], zeroIfNaN(v[3])
	} else {
		m.guardErrs++
		m.lastGuardErr = err.Error()
	}
	smp.APIRequests, smp.CRRequests, smp.WebhookCalls = nanOf(), nanOf(), nanOf()
	if v, err := m.api.scrape(sctx); err == nil {
		smp.APIRequests, smp.CRRequests, smp.WebhookCalls = m.apiRequests.Observe(v[0]), m.crRequests.Observe(zeroIfNaN(v[1])), m.hookCalls.Observe(zeroIfNaN(v[2]))
	} else {
		m.apiErrs++
		m.lastAPIErr = err.Error()
	}
	smp.Edits, smp.PolicedEdits, smp.Failed = int(s.okEdits.Load()), int(s.okPoliced.Load()), int(s.failedEdits.Load())
	s.mu.Lock()
	smp.Event = strings.Join(s.pending, ";")
	s.pending = nil
	s.mu.Unlock()
	return smp
}

// portOf returns the port of a URL such as https://127.0.0.1:8443, 0 if none.
func portOf(rawURL string) int {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}

// writeOutputs writes the CSV files, the plot and the summary.
func (s *soak) writeOutputs(samples []Sample, res result) error {
	write := func(name string, fill func(io.Writer) error) error {
		f, err := os.Create(filepath.Join(s.o.outDir, name))
		if err != nil {
			return err
		}
		if err := fill(f); err != nil {
			f.Close()
			return fmt.Errorf("writing %s: %w", f.Name(), err)
		}
		return f.Close()
	}
	if err := write("soak-samples.csv", func(w io.Writer) error { return WriteCSV(w, samples) }); err != nil {
		return err
	}
	if err := write("soak-edits.csv", func(w io.Writer) error { return writeOutcomes(w, s.begin, res.outcomes) }); err != nil {
		return err
	}
	if err := write("soak.png", func(w io.Writer) error { return s.plot(samples, res).WritePNG(w) }); err != nil {
		return err
	}
	out, closeOut, err := report.Output(filepath.Join(s.o.outDir, "soak-summary.txt"))
	if err != nil {
		return err
	}
	res.print(out, s)
	fmt.Fprintf(out, "\nfiles: %s\n", strings.Join([]string{
		filepath.Join(s.o.outDir, "soak-samples.csv"), filepath.Join(s.o.outDir, "soak-edits.csv"),
		filepath.Join(s.o.outDir, "soak.png"), filepath.Join(s.o.outDir, "soak-summary.txt")}, ", "))
	return closeOut()
}
