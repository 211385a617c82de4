// Command bench-admission measures what admission costs an edit end to end:
// one real kube-apiserver (bin/) with the Cluster API CRDs, and the same
// edits of MachineDeployments and KubeadmControlPlanes under each
// configuration:
//
//   - none: no webhook and no policy for these kinds;
//   - vap: a ValidatingAdmissionPolicy (CEL in the API server) refusing a
//     same-object version downgrade;
//   - noop: the fair floor: test/cmd/noop-webhook, a validating + mutating
//     pair served by the guard's own stack (controller-runtime's webhook
//     server over TLS and HTTP/2) that allows everything, registered from
//     the guard's manifests (config/webhook/manifests.yaml: same paths,
//     rules, timeouts and matchConditions);
//   - noop-stamp: the same pair, its mutating webhooks answering with a
//     patch of six annotations the size of the guard's revision stamps
//     (noop-webhook's /stamp paths): the floor of any webhook that stamps
//     what it admits, so that guard/noop-stamp is the guard's own work;
//   - noop-record: the same pair, its mutating webhooks stamping as
//     noop-stamp's and, for every edit that makes a new revision (a
//     MachineDeployment's spec.template, a KubeadmControlPlane's
//     spec.version, spec.machineTemplate or spec.kubeadmConfigSpec changed;
//     never labels, annotations, replicas or status), creating one
//     RolloutRevision holding the replaced revision, owned by the object,
//     right after answering the mutating call, with the guard's identity
//     (noop-webhook's /record paths): the floor of the design, which
//     writes one record per revision off the edit's path as the guard
//     does (its history reconciler records a revision right after the edit
//     that made it live, from what its cache saw stored,
//     history/pending.go), so that guard/noop-record is the guard's own
//     cost;
//   - noop-nomc: the same pair without matchConditions;
//   - guard: bin/webhook registered from config/webhook/manifests.yaml, as
//     test/framework runs it (validating, mutating, recording revisions).
//
// Every configuration runs with the same background: a watcher process
// with informers on Cluster, MachineDeployment, MachineSet, Machine and
// KubeadmControlPlane, as Cluster API's controllers keep in a real
// management cluster (watcher.go), so that what the guard's own informers
// add is measured as the marginal cost it is.
//
// Two regimes, reported apart (workloads.go): an operator's pace (one
// writer at --pace-rate edits/s, --pace-edits per round) and saturation
// (--writers concurrent writers, as fast as answered), for template,
// version and label edits; and the bookkeeping edits Cluster API's
// controllers make (label, annotation, status, replicas of
// MachineDeployments and KubeadmControlPlanes, and status updates of
// worker Machines, the largest stream of events of a real management
// cluster) at saturation, which the guard's matchConditions leave out.
// Every workload's edits rotate over a pool of --pool objects of the
// edited kind (default 80), each writer editing its own share of the pool
// in turn, never one object back to back, as a GitOps sync spreads over
// many objects. The run is split into rounds; each round installs every
// configuration in turn (rotating the order), confirms with dry-run probes
// that exactly that configuration is in effect, and runs every workload
// once, so that drift of a shared machine hits every configuration alike
// and every ratio has a spread over rounds. The guard runs only during its
// own slices (its background reconciler would otherwise work during the
// others').
//
// --edits and --regimes restrict the workloads, so that a run can pool
// the 1,000 edits a p99 needs at an operator's pace in reasonable time
// (e.g. --edits md-template,kcp-template --regimes pace --pace-edits 250
// --rounds 4 --pace-rate 10). Latencies are pooled over the rounds per
// workload and configuration; a p99 is given only from 1,000 of them
// ("n/a (n=…)" otherwise), and n stands beside every percentile.
//
// Output: one Go benchmark line per round, workload and configuration
// (benchstat reads them; custom units p50-ns, p99-ns — only from 1,000
// edits —, edits/s), then the pooled figures, every ratio with its spread
// over rounds (min–max) and the issue's targets (guard/noop, and
// guard/noop-record, the guard's own cost); the CPU time each process
// spent per edit, read from a cgroup made for each process the run starts
// (cgroup v1 cpuacct.usage, or cgroup v2 cpu.stat, or, where neither is
// writable, /proc, the report saying which); the time the API server spent
// calling the webhooks; per edit of each kind, the webhook server's
// reconciles (controller_runtime_reconcile_total by controller) and
// requests to the API server (rest_client_requests_total by verb), read
// from its own /metrics around each workload, and its CPU time beside the
// watcher's; each webhook server's own time per call
// (controller_runtime_webhook_latency_seconds: mean, and p99 from 1,000
// calls, per path and per type) and the guard's minus each no-op floor's;
// the API server's count of RolloutRevision requests per recorded
// revision (guard and noop-record); and, with --summary, the same figures
// as JSON in one section of bench/summary.json.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/bench/report"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// namespace holds every object of the benchmark.
const namespace = "bench"

// Configuration names.
const (
	cfgNone      = "none"
	cfgVAP       = "vap"
	cfgNoop      = "noop"
	cfgNoopNoMC  = "noop-nomc"
	cfgNoopStamp = "noop-stamp"
	cfgNoopRec   = "noop-record"
	cfgGuard     = "guard"
)

type options struct {
	paceEdits, satEdits int
	paceRate            float64
	writers             []int
	rounds              int
	warmup              int
	settle              time.Duration
	clusters, mdsPer    int
	// machinesPer is the worker Machines of each MachineDeployment.
	machinesPer int
	// pool is how many objects of each kind the edits rotate over.
	pool       int
	noopBin    string
	binDir     string
	out        string
	summary    string
	profileDir string
	configs    string
	// edits and regimes restrict the workloads (nil: all).
	edits, regimes []string
	// watch runs the background watcher in every configuration.
	watch bool
	// watchKubeconfig makes this process the watcher (see watcher.go).
	watchKubeconfig string
}

func main() {
	var o options
	flag.IntVar(&o.paceEdits, "pace-edits", 25, "edits per round of each workload at an operator's pace (a p99 needs 1,000 pooled over the rounds: --pace-edits × --rounds)")
	flag.Float64Var(&o.paceRate, "pace-rate", 5, "edits per second at an operator's pace (one writer)")
	flag.IntVar(&o.satEdits, "sat-edits", 100, "edits per round of each workload at saturation (shared by its writers)")
	writers := flag.String("writers", "1,8", "concurrent writers of the saturation workloads, comma-separated")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds (each round runs every workload of every configuration once)")
	flag.IntVar(&o.warmup, "warmup", 5, "unmeasured sequential edits before each measured workload")
	flag.DurationVar(&o.settle, "settle", 3*time.Second, "pause after a configuration is confirmed, before its edits (for the guard, also until its reconcilers' queues are empty, at most a minute)")
	flag.IntVar(&o.clusters, "clusters", 80, "clusters (one KubeadmControlPlane each) to create")
	flag.IntVar(&o.pool, "pool", 80, "objects of each kind (MachineDeployments, KubeadmControlPlanes, Machines) the edits rotate over; each writer edits its own share of them in turn, never one object back to back (at most --clusters, --clusters × --mds-per-cluster and that × --machines-per-md)")
	flag.IntVar(&o.mdsPer, "mds-per-cluster", 2, "MachineDeployments per cluster")
	flag.IntVar(&o.machinesPer, "machines-per-md", 1, "worker Machines per MachineDeployment (whose status updates are the machine-status bookkeeping edits)")
	flag.StringVar(&o.noopBin, "noop-webhook", "", "path of the built test/cmd/noop-webhook (required)")
	flag.StringVar(&o.binDir, "bin-dir", "", "directory of etcd, kube-apiserver and webhook (default: the repository's bin/)")
	flag.StringVar(&o.out, "out", "", "also write the output to this file")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write CPU profiles of kube-apiserver under each configuration's saturation load in the last round, and of the guard under its own, here")
	flag.StringVar(&o.summary, "summary", "", "set the admission section of this JSON summary (e.g. bench/summary.json)")
	flag.StringVar(&o.configs, "configs", "none,vap,noop,noop-record,guard", "configurations to run, in the order of the first round (also: noop-stamp, the no-op pair whose mutating webhook stamps six annotations as the guard does; noop-nomc, the no-op pair without matchConditions)")
	flag.BoolVar(&o.watch, "watcher", true, "run a background watcher (informers on Cluster, MachineDeployment, MachineSet, Machine, KubeadmControlPlane, as Cluster API's controllers) through every configuration")
	flag.StringVar(&o.watchKubeconfig, "watch-kubeconfig", "", "internal: be the background watcher of the cluster of this kubeconfig")
	edits := flag.String("edits", "", "run only these edits, comma-separated (default: all; policed: "+strings.Join(policedEdits, ", ")+"; bookkeeping: "+strings.Join(bookkeepingEdits, ", ")+"), e.g. md-template,kcp-template to pool p99 samples quickly")
	regimes := flag.String("regimes", "", "run only these regimes, comma-separated: pace, saturation (policed edits), bookkeeping (default: all)")
	flag.Parse()
	var err error
	if o.edits, err = listFlag("edits", *edits, append(slices.Clone(policedEdits), bookkeepingEdits...)); err == nil {
		o.regimes, err = listFlag("regimes", *regimes, []string{regimePace, regimeSat, regimeBookkeeping})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-admission:", err)
		os.Exit(2)
	}
	for _, item := range strings.Split(*writers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(item))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench-admission: --writers: %q is not a count of writers\n", item)
			os.Exit(2)
		}
		o.writers = append(o.writers, n)
	}
	if o.watchKubeconfig != "" {
		if err := runWatcher(o.watchKubeconfig); err != nil {
			fmt.Fprintln(os.Stderr, "bench-admission watcher:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-admission:", err)
		os.Exit(1)
	}
}

// listFlag splits a comma-separated flag value, each item one of known;
// nil for "".
func listFlag(name, value string, known []string) ([]string, error) {
	if value == "" {
		return nil, nil
	}
	var out []string
	for item := range strings.SplitSeq(value, ",") {
		item = strings.TrimSpace(item)
		if !slices.Contains(known, item) {
			return nil, fmt.Errorf("--%s: unknown %q (known: %s)", name, item, strings.Join(known, ", "))
		}
		if !slices.Contains(out, item) {
			out = append(out, item)
		}
	}
	return out, nil
}

// config is one admission configuration of the API server.
type config struct {
	name      string
	workloads []workload
	// install makes the configuration effective; uninstall removes it.
	install, uninstall func(ctx context.Context) error
	// want is the outcome of each probe while this configuration, and only
	// it, is in effect.
	want map[string]string
}

// bench is the state of one run.
type bench struct {
	o       options
	env     *framework.Environment
	c       client.Client
	out     io.Writer
	noopURL string
	noopCmd *exec.Cmd
	// noopMetrics is the no-op webhook's metrics URL (plain HTTP);
	// metricsToken reads the guard's.
	noopMetrics  string
	metricsToken string
	watcher      *watcher
	mds          []types.NamespacedName
	kcps         []types.NamespacedName
	machines     []types.NamespacedName
	// cpu reads each process's CPU time from a cgroup of its own.
	cpu *cpuMeter
	// guardPprof is the guard's --pprof-bind-address, "" when it
	// serves no profiles (no --profile-dir).
	guardPprof string
	// cfg is the admin configuration of c, without client-side limits.
	cfg *rest.Config
	// seqMu guards patchSeq, which concurrent writers share, and turn.
	seqMu    sync.Mutex
	patchSeq map[types.NamespacedName]int
	// turn counts the edits of each kind ("md", "kcp") so far.
	turn map[string]int
	// results[config][workload] are the figures of the measured edits.
	results map[string]map[workload]*cell
	// revisionEdits counts, by configuration (the guard, the recording
	// floor), the edits that made a new revision (measured and warm-up);
	// revisionReqs the RolloutRevision requests the API server counted
	// meanwhile, by verb.
	revisionEdits map[string]int
	revisionReqs  map[string]map[string]float64
}

func run(o options) (retErr error) {
	if o.noopBin == "" {
		return errors.New("--noop-webhook is required (build it with: cd test && go build -o ../bench/noop-webhook ./cmd/noop-webhook)")
	}
	if o.rounds < 1 || o.paceEdits < 1 || o.satEdits < 1 || o.paceRate <= 0 || o.pool < 1 {
		return errors.New("--rounds, --pace-edits, --sat-edits, --pace-rate and --pool must be positive")
	}
	if o.pool > o.clusters || o.pool > o.clusters*o.mdsPer || o.pool > o.clusters*o.mdsPer*o.machinesPer {
		return fmt.Errorf("--pool %d needs at least %d clusters (--clusters), MachineDeployments (--clusters × --mds-per-cluster) and Machines (× --machines-per-md)", o.pool, o.pool)
	}
	out, closeOut, err := report.Output(o.out)
	if err != nil {
		return err
	}
	defer closeOut()
	// Ctrl-C or SIGTERM ends the run through its deferred clean-up, which
	// stops etcd, kube-apiserver and the webhooks it started.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	machine := report.ThisMachine()
	begin := time.Now()

	logFile, err := os.CreateTemp("", "bench-admission-*.log")
	if err != nil {
		return fmt.Errorf("creating the log file: %w", err)
	}
	defer logFile.Close()
	fmt.Fprintf(os.Stderr, "bench-admission: environment log in %s\n", logFile.Name())
	// controller-runtime's global logger (the conversion webhooks'
	// certificate watcher uses it) writes to the same file.
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))
	// The guard serves its metrics, so that its own answer times can be
	// set beside the API server's account of each call.
	// Each process's CPU time is read from a cgroup of its own, made for
	// the run and removed at its end (after the processes have stopped).
	cpu, err := newCPUMeter()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench-admission: no cgroup for CPU time, reading /proc instead: %v\n", err)
	}
	defer func() {
		if err := cpu.close(); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	cpu.track("bench-admission", os.Getpid())
	opts := framework.Options{BinDir: o.binDir, Log: logFile, GuardMetrics: true}
	guardPprof := ""
	if o.profileDir != "" {
		if guardPprof, err = framework.FreeLocalAddress(); err != nil {
			return fmt.Errorf("the guard's profiling address: %w", err)
		}
		opts.GuardArgs = []string{"--pprof-bind-address=" + guardPprof}
	}
	env, err := framework.Start(ctx, opts)
	if err != nil {
		return fmt.Errorf("starting the API server: %w", err)
	}
	for pid, cmdline := range framework.ChildProcesses() {
		if comm := filepath.Base(strings.Fields(cmdline + " ")[0]); comm == "kube-apiserver" || comm == "etcd" {
			cpu.track(comm, pid)
		}
	}
	b := &bench{o: o, env: env, out: out, cpu: cpu, patchSeq: map[types.NamespacedName]int{}, turn: map[string]int{},
		results: map[string]map[workload]*cell{}, revisionEdits: map[string]int{}, revisionReqs: map[string]map[string]float64{}, guardPprof: guardPprof}
	defer func() {
		b.stopNoop()
		b.stopWatcher()
		if err := env.Stop(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("stopping the environment: %w", err))
		}
	}()
	// A client without client-side rate limiting: the edits are sequential,
	// and client-go's default limiter (5 requests/s) would be what we measure.
	cfg := *env.Config
	cfg.QPS, cfg.Burst = -1, 0
	b.cfg = &cfg
	if b.c, err = client.New(&cfg, client.Options{Scheme: env.Scheme}); err != nil {
		return fmt.Errorf("creating the client: %w", err)
	}
	if b.metricsToken, err = framework.MetricsReaderToken(ctx, b.c, "bench-metrics", 12*time.Hour); err != nil {
		return fmt.Errorf("the guard's metrics reader: %w", err)
	}

	if err := b.createObjects(ctx); err != nil {
		return err
	}
	if o.watch {
		if err := b.startWatcher(ctx); err != nil {
			return err
		}
	}
	// Start the guard once to set up its identity and certificate, which the
	// no-op webhook serves too (the API server trusts its CA).
	if err := b.startGuard(ctx); err != nil {
		return err
	}
	if err := b.uninstallGuard(ctx); err != nil {
		return err
	}
	if err := b.startNoop(ctx); err != nil {
		return err
	}

	configs, err := b.configurations(o.configs)
	if err != nil {
		return err
	}
	b.header(machine.LoadAtStart, configs)
	for round := range o.rounds {
		for i := range configs {
			cf := configs[(round+i)%len(configs)]
			if err := b.runSlice(ctx, round, cf); err != nil {
				return fmt.Errorf("round %d, configuration %s: %w", round+1, cf.name, err)
			}
		}
	}
	machine.LoadAtEnd = report.LoadAverage()
	elapsed := time.Since(begin)
	b.report(configs, elapsed)
	var events string
	if o.watch {
		events = b.stopWatcher()
		fmt.Fprintf(b.out, "\n# The background watcher's events over the whole run: %s\n", events)
	}
	if err := b.apiServerMetrics(ctx, &cfg); err != nil {
		return err
	}
	fmt.Fprintf(b.out, "\nloadavg-at-end: %s\n", machine.LoadAtEnd)
	if o.summary != "" {
		if err := report.UpdateSummary(o.summary, "admission", b.summary(configs, machine, begin, elapsed, events)); err != nil {
			return err
		}
	}
	return nil
}

// header prints the machine and the run's parameters.
func (b *bench) header(load string, configs []config) {
	fmt.Fprintf(b.out, "goos: %s\ngoarch: %s\ncpu: %s\n", runtime.GOOS, runtime.GOARCH, report.CPUModel())
	fmt.Fprintf(b.out, "kube-apiserver: %s\n", apiServerVersion(b.env.BinDir))
	fmt.Fprintf(b.out, "guard: %s\n", guardVersion(b.env.BinDir))
	fmt.Fprintf(b.out, "vcpus: %d\n", runtime.NumCPU())
	fmt.Fprintf(b.out, "loadavg-at-start: %s\n", load)
	regimes := []string{fmt.Sprintf("%d edits at an operator's pace (1 writer, %g edits/s)", b.o.paceEdits, b.o.paceRate)}
	if b.o.regimes == nil || slices.Contains(b.o.regimes, regimeSat) || slices.Contains(b.o.regimes, regimeBookkeeping) {
		regimes = append(regimes, fmt.Sprintf("%d at saturation (writers %v)", b.o.satEdits, b.o.writers))
	}
	if b.o.regimes != nil && !slices.Contains(b.o.regimes, regimePace) {
		regimes = regimes[1:]
	}
	fmt.Fprintf(b.out, "# %d rounds; per round and workload %s; over %d clusters (%d MachineDeployments each, %d Machines each of those); background watcher %v; configurations %s\n",
		b.o.rounds, strings.Join(regimes, " and "), b.o.clusters, b.o.mdsPer, b.o.machinesPer, b.o.watch, strings.Join(configNames(configs), ", "))
	fmt.Fprintf(b.out, "# each workload's edits rotate over a pool of %d objects of the edited kind; each writer edits its own share of the pool in turn (%s), never one object back to back\n",
		b.o.pool, poolShares(b.o.pool, slices.Compact(slices.Sorted(slices.Values(append([]int{1}, b.o.writers...))))))
	if b.o.edits != nil || b.o.regimes != nil {
		fmt.Fprintf(b.out, "# only edits %s, regimes %s\n", orAll(b.o.edits), orAll(b.o.regimes))
	}
	fmt.Fprintf(b.out, "# p99 is given only from %d edits pooled over the rounds: at an operator's pace, --pace-edits × --rounds ≥ %d\n", minP99Samples, minP99Samples)
}

// poolShares says how many objects of the pool each writer edits, for
// each count of writers.
func poolShares(pool int, writers []int) string {
	var parts []string
	for _, n := range writers {
		n = min(n, pool)
		if n == 1 {
			parts = append(parts, fmt.Sprintf("1 writer: %d objects", pool))
			continue
		}
		parts = append(parts, fmt.Sprintf("%d writers: %d–%d objects each", n, pool/n, (pool+n-1)/n))
	}
	return strings.Join(parts, "; ")
}

// orAll is list, comma-separated, or "all".
func orAll(list []string) string {
	if list == nil {
		return "all"
	}
	return strings.Join(list, ",")
}

// createObjects creates the namespace, the clusters the edits rotate over,
// and the probe cluster.
func (b *bench) createObjects(ctx context.Context) error {
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	for i := range b.o.clusters {
		name := fmt.Sprintf("c%d", i)
		mds, kcp, err := b.createCluster(ctx, name, b.o.mdsPer, "v1.35.0")
		if err != nil {
			return err
		}
		b.mds = append(b.mds, mds...)
		b.kcps = append(b.kcps, kcp)
		for _, md := range mds {
			for k := range b.o.machinesPer {
				m, err := b.createMachine(ctx, name, md.Name, k, "v1.35.0")
				if err != nil {
					return err
				}
				b.machines = append(b.machines, m)
			}
		}
	}
	if _, _, err := b.createCluster(ctx, "probe", 1, probeVersion); err != nil {
		return err
	}
	return nil
}

// createMachine creates worker Machine k of MachineDeployment md of
// cluster, whose node runs version, labelled as Cluster API labels the
// Machines of a MachineDeployment, with a status (as its controller
// writes it).
func (b *bench) createMachine(ctx context.Context, cluster, md string, k int, version string) (types.NamespacedName, error) {
	name := fmt.Sprintf("%s-m%d", md, k)
	m := builder.Machine(namespace, name).WithClusterName(cluster).WithVersion(version).
		WithLabels(map[string]string{clusterv1.ClusterNameLabel: cluster, clusterv1.MachineDeploymentNameLabel: md, clusterv1.MachineSetNameLabel: md + "-abcde", "pool": md}).
		WithBootstrapDataSecret(name).WithInfrastructureRef("DevMachine", name).WithNodeVersion(version).Build()
	status := m.Status
	if err := b.c.Create(ctx, m); err != nil {
		return types.NamespacedName{}, fmt.Errorf("creating Machine %s: %w", name, err)
	}
	m.Status = status
	if err := b.c.Status().Update(ctx, m); err != nil {
		return types.NamespacedName{}, fmt.Errorf("writing the status of Machine %s: %w", name, err)
	}
	return client.ObjectKeyFromObject(m), nil
}

// createCluster creates a Cluster, its KubeadmControlPlane at v1.36.0 and
// mds MachineDeployments at mdVersion.
func (b *bench) createCluster(ctx context.Context, name string, mds int, mdVersion string) ([]types.NamespacedName, types.NamespacedName, error) {
	kcpName := name + "-cp"
	cluster := builder.Cluster(namespace, name).WithControlPlane(kcpName).WithInfrastructure(name).Build()
	if err := b.c.Create(ctx, cluster); err != nil {
		return nil, types.NamespacedName{}, fmt.Errorf("creating Cluster %s: %w", name, err)
	}
	kcp := builder.KubeadmControlPlane(namespace, kcpName).WithClusterName(name).WithReplicas(3).WithVersion("v1.36.0").
		WithInfrastructureTemplate(kcpName).Build()
	if err := b.c.Create(ctx, kcp); err != nil {
		return nil, types.NamespacedName{}, fmt.Errorf("creating KubeadmControlPlane %s: %w", kcpName, err)
	}
	var keys []types.NamespacedName
	for j := range mds {
		mdName := fmt.Sprintf("%s-md-%d", name, j)
		md := builder.MachineDeployment(namespace, mdName).WithClusterName(name).WithReplicas(3).
			WithSelector(map[string]string{"pool": mdName}).WithVersion(mdVersion).
			WithBootstrapTemplate(mdName).WithInfrastructureTemplate(mdName).Build()
		if err := b.c.Create(ctx, md); err != nil {
			return nil, types.NamespacedName{}, fmt.Errorf("creating MachineDeployment %s: %w", mdName, err)
		}
		keys = append(keys, client.ObjectKeyFromObject(md))
	}
	return keys, client.ObjectKeyFromObject(kcp), nil
}

// startNoop starts the no-op webhook server on a free port with the
// guard's serving certificate and waits until it answers.
func (b *bench) startNoop(ctx context.Context) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("finding a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	metricsAddr, err := framework.FreeLocalAddress()
	if err != nil {
		return fmt.Errorf("the no-op webhook's metrics address: %w", err)
	}
	b.noopMetrics = "http://" + metricsAddr + "/metrics"
	kubeconfig, err := b.guardIdentityKubeconfig()
	if err != nil {
		return err
	}
	b.noopCmd = exec.Command(b.o.noopBin, "--port", strconv.Itoa(port), "--cert-dir", b.env.GuardCertDir(), "--manifests", b.env.GuardManifests(),
		"--metrics-bind-address", metricsAddr, "--kubeconfig", kubeconfig)
	b.noopCmd.Stdout, b.noopCmd.Stderr = os.Stderr, os.Stderr
	if err := b.noopCmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", b.o.noopBin, err)
	}
	b.cpu.track("noop-webhook", b.noopCmd.Process.Pid)
	b.noopURL = "https://127.0.0.1:" + strconv.Itoa(port)
	// The API server checks the certificate; this wait only needs to know
	// that the port serves.
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: insecureTLS()}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Any answer will do (the server has no health path, as the
		// guard's webhook server has none).
		resp, err := hc.Get(b.noopURL + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the no-op webhook on %s did not answer within 30s: %w", b.noopURL, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// guardIdentityKubeconfig writes, beside the admin kubeconfig, a
// kubeconfig in which the admin impersonates the guard's ServiceAccount,
// as the guard runs (framework.GuardConfig): the no-op's recording floor
// writes its RolloutRevisions with the guard's identity and rights.
func (b *bench) guardIdentityKubeconfig() (string, error) {
	kc, err := clientcmd.LoadFromFile(b.env.Kubeconfig)
	if err != nil {
		return "", fmt.Errorf("reading the admin kubeconfig: %w", err)
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate = framework.GuardServiceAccount
		ai.ImpersonateGroups = framework.GuardGroups()
	}
	path := filepath.Join(filepath.Dir(b.env.Kubeconfig), "noop-webhook.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("writing the no-op webhook's kubeconfig: %w", err)
	}
	return path, nil
}

func (b *bench) stopNoop() {
	if b.noopCmd == nil || b.noopCmd.Process == nil {
		return
	}
	_ = b.noopCmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = b.noopCmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = b.noopCmd.Process.Kill()
		<-done
	}
}

// configurations returns the named configurations.
func (b *bench) configurations(list string) ([]config, error) {
	all := map[string]config{
		cfgNone: {
			name:      cfgNone,
			workloads: append(policedWorkloads(b.o), bookkeepingWorkloads(b.o)...),
			install:   func(context.Context) error { return nil },
			uninstall: func(context.Context) error { return nil },
			want:      map[string]string{probeDowngrade: allow, probeTooNew: allow, probeRefuse: allow, probeMutate: plain, probeLabelRefuse: allow},
		},
		cfgVAP: {
			name:      cfgVAP,
			workloads: policedWorkloads(b.o),
			install:   b.installVAP,
			uninstall: b.uninstallVAP,
			want:      map[string]string{probeDowngrade: vapPolicyName, probeTooNew: allow, probeRefuse: allow, probeMutate: plain, probeLabelRefuse: allow},
		},
		cfgNoop: {
			name:      cfgNoop,
			workloads: policedWorkloads(b.o),
			install:   func(ctx context.Context) error { return b.installNoop(ctx, true) },
			uninstall: func(ctx context.Context) error { return b.uninstallNoop(ctx, true) },
			want:      map[string]string{probeDowngrade: allow, probeTooNew: allow, probeRefuse: noopRefusal, probeMutate: mutated, probeLabelRefuse: allow},
		},
		cfgNoopStamp: {
			name:      cfgNoopStamp,
			workloads: policedWorkloads(b.o),
			install:   func(ctx context.Context) error { return b.installObjects(ctx, b.noopStampConfigurations) },
			uninstall: func(ctx context.Context) error { return b.uninstallObjects(ctx, b.noopStampConfigurations) },
			want:      map[string]string{probeDowngrade: allow, probeTooNew: allow, probeRefuse: noopRefusal, probeMutate: mutated, probeLabelRefuse: allow},
		},
		cfgNoopRec: {
			name:      cfgNoopRec,
			workloads: policedWorkloads(b.o),
			install: func(ctx context.Context) error {
				if err := b.checkRevisionCRD(ctx); err != nil {
					return err
				}
				return b.installObjects(ctx, b.noopRecordConfigurations)
			},
			uninstall: func(ctx context.Context) error {
				if err := b.uninstallObjects(ctx, b.noopRecordConfigurations); err != nil {
					return err
				}
				return b.deleteFloorRecords(ctx)
			},
			want: map[string]string{probeDowngrade: allow, probeTooNew: allow, probeRefuse: noopRefusal, probeMutate: recorded, probeLabelRefuse: allow},
		},
		cfgNoopNoMC: {
			name:      cfgNoopNoMC,
			workloads: b.o.only([]workload{{regime: regimeSat, writers: 1, edit: mdLabel}, {regime: regimeSat, writers: 1, edit: kcpLabel}}),
			install:   func(ctx context.Context) error { return b.installNoop(ctx, false) },
			uninstall: func(ctx context.Context) error { return b.uninstallNoop(ctx, false) },
			want:      map[string]string{probeDowngrade: allow, probeTooNew: allow, probeRefuse: noopRefusal, probeMutate: mutated, probeLabelRefuse: noopRefusal},
		},
		cfgGuard: {
			name:      cfgGuard,
			workloads: append(policedWorkloads(b.o), bookkeepingWorkloads(b.o)...),
			install:   b.startGuard,
			uninstall: b.uninstallGuard,
			// The guard allows a worker's patch downgrade (only minors matter to skew).
			want: map[string]string{probeDowngrade: allow, probeTooNew: "[rule WorkerNewerThanControlPlane]", probeRefuse: allow, probeMutate: stamped, probeLabelRefuse: allow},
		},
	}
	var out []config
	for _, name := range strings.Split(list, ",") {
		cf, ok := all[strings.TrimSpace(name)]
		if !ok {
			return nil, fmt.Errorf("--configs: unknown configuration %q (known: none, vap, noop, noop-stamp, noop-record, noop-nomc, guard)", name)
		}
		out = append(out, cf)
	}
	return out, nil
}

// startGuard starts the guard and moves it into its cgroup.
func (b *bench) startGuard(ctx context.Context) error {
	if err := b.env.StartGuard(ctx); err != nil {
		return fmt.Errorf("starting the guard: %w", err)
	}
	b.cpu.track("webhook", b.env.GuardPID())
	return nil
}

// uninstallGuard stops the guard and removes its webhook configurations
// (which StopGuard leaves registered, failing closed).
func (b *bench) uninstallGuard(ctx context.Context) error {
	if err := b.env.StopGuard(); err != nil {
		return fmt.Errorf("stopping the guard: %w", err)
	}
	return b.deleteAll(ctx,
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-validating"}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-mutating"}})
}

// noopConfigurations are the guard's webhook configurations pointed at the
// no-op webhook and renamed, with or without their matchConditions.
func (b *bench) noopConfigurations(withMC bool) ([]client.Object, error) {
	objs, err := framework.LocalWebhookConfigurations(b.env.GuardManifests(), b.noopURL, b.env.GuardCABundle())
	if err != nil {
		return nil, fmt.Errorf("reading the guard's webhook configurations: %w", err)
	}
	suffix := ""
	if !withMC {
		suffix = "-nomc"
	}
	for _, obj := range objs {
		switch cfg := obj.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			cfg.Name = "rollout-bench-noop-validating" + suffix
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].Name = "noop" + suffix + "-" + cfg.Webhooks[i].Name
				if !withMC {
					cfg.Webhooks[i].MatchConditions = nil
				}
			}
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			cfg.Name = "rollout-bench-noop-mutating" + suffix
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].Name = "noop" + suffix + "-" + cfg.Webhooks[i].Name
				if !withMC {
					cfg.Webhooks[i].MatchConditions = nil
				}
			}
		}
	}
	return objs, nil
}

// noopStampConfigurations are the no-op pair's configurations with the
// mutating webhooks calling the stamping floor (noop-webhook's /stamp
// paths): what any webhook that stamps objects costs, the guard's own
// work apart.
func (b *bench) noopStampConfigurations() ([]client.Object, error) {
	return b.noopFloorConfigurations(noopStampPrefix, "noop-stamp")
}

// noopRecordConfigurations are the no-op pair's configurations with the
// mutating webhooks calling the recording floor (noop-webhook's /record
// paths): stamps, and one RolloutRevision created per edit that makes a
// new revision, once the call is answered: what keeping the guard's
// history costs any webhook, the guard's own work apart.
func (b *bench) noopRecordConfigurations() ([]client.Object, error) {
	return b.noopFloorConfigurations(noopRecordPrefix, "noop-record")
}

// noopFloorConfigurations are the no-op pair's configurations renamed
// after tag, the mutating webhooks calling noop-webhook's paths under
// prefix.
func (b *bench) noopFloorConfigurations(prefix, tag string) ([]client.Object, error) {
	objs, err := b.noopConfigurations(true)
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		switch cfg := obj.(type) {
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			cfg.Name = "rollout-bench-" + tag + "-validating"
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].Name = strings.Replace(cfg.Webhooks[i].Name, "noop-", tag+"-", 1)
			}
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			cfg.Name = "rollout-bench-" + tag + "-mutating"
			for i := range cfg.Webhooks {
				w := &cfg.Webhooks[i]
				w.Name = strings.Replace(w.Name, "noop-", tag+"-", 1)
				if w.ClientConfig.URL == nil || !strings.HasPrefix(*w.ClientConfig.URL, b.noopURL+"/") {
					return nil, fmt.Errorf("mutating webhook %s does not call the no-op server at %s", w.Name, b.noopURL)
				}
				u := b.noopURL + prefix + strings.TrimPrefix(*w.ClientConfig.URL, b.noopURL)
				w.ClientConfig.URL = &u
			}
		}
	}
	return objs, nil
}

// checkRevisionCRD makes sure the RolloutRevision CRD (which the
// environment installs with the Cluster API CRDs) serves, so that the
// recording floor's creates can succeed.
func (b *bench) checkRevisionCRD(ctx context.Context) error {
	if err := b.c.List(ctx, &rgv1alpha1.RolloutRevisionList{}, client.InNamespace(namespace), client.Limit(1)); err != nil {
		return fmt.Errorf("the RolloutRevision CRD does not serve: %w", err)
	}
	return nil
}

// noopStampPrefix is noop-webhook's path prefix of its stamping floor.
const noopStampPrefix = "/stamp"

// floorRecordLabel is a label every RolloutRevision of the recording
// floor carries (noop-webhook's recordLabelHash).
const floorRecordLabel = "rollout-bench/hash"

// deleteFloorRecords deletes the recording floor's RolloutRevisions, so
// that the guard, in its own slices, never meets them.
func (b *bench) deleteFloorRecords(ctx context.Context) error {
	sel, err := labels.Parse(floorRecordLabel)
	if err != nil {
		return err
	}
	if err := b.c.DeleteAllOf(ctx, &rgv1alpha1.RolloutRevision{}, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("deleting the recording floor's RolloutRevisions: %w", err)
	}
	return nil
}

// noopRecordPrefix is noop-webhook's path prefix of its recording floor.
const noopRecordPrefix = "/record"

// installObjects creates the objects configurations gives.
func (b *bench) installObjects(ctx context.Context, configurations func() ([]client.Object, error)) error {
	objs, err := configurations()
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := b.c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// uninstallObjects deletes the objects configurations gives.
func (b *bench) uninstallObjects(ctx context.Context, configurations func() ([]client.Object, error)) error {
	objs, err := configurations()
	if err != nil {
		return err
	}
	return b.deleteAll(ctx, objs...)
}

func (b *bench) installNoop(ctx context.Context, withMC bool) error {
	return b.installObjects(ctx, func() ([]client.Object, error) { return b.noopConfigurations(withMC) })
}

func (b *bench) uninstallNoop(ctx context.Context, withMC bool) error {
	return b.uninstallObjects(ctx, func() ([]client.Object, error) { return b.noopConfigurations(withMC) })
}

// vapPolicyName names the ValidatingAdmissionPolicy and its binding.
const vapPolicyName = "rollout-bench-no-downgrade"

// vapVersion picks the version field of either kind.
const vapVersion = "(%[1]s.kind == 'MachineDeployment' ? %[1]s.spec.template.spec.?version.orValue('') : %[1]s.spec.?version.orValue(''))"

// installVAP creates a ValidatingAdmissionPolicy that refuses a version
// lower than the object's current one (Kubernetes' CEL semver library,
// normalising the leading "v"), and its binding.
func (b *bench) installVAP(ctx context.Context) error {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: vapPolicyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
					{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{"cluster.x-k8s.io"}, APIVersions: []string{"v1beta2"},
							Resources: []string{"machinedeployments"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
					}},
					{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{"controlplane.cluster.x-k8s.io"}, APIVersions: []string{"v1beta2"},
							Resources: []string{"kubeadmcontrolplanes"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
					}},
				},
			},
			Variables: []admissionregistrationv1.Variable{
				{Name: "newVersion", Expression: fmt.Sprintf(vapVersion, "object")},
				{Name: "oldVersion", Expression: fmt.Sprintf(vapVersion, "oldObject")},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "variables.newVersion == variables.oldVersion || !isSemver(variables.newVersion, true) || !isSemver(variables.oldVersion, true)" +
					" || !semver(variables.newVersion, true).isLessThan(semver(variables.oldVersion, true))",
				MessageExpression: "'" + vapPolicyName + ": ' + object.kind + ' ' + object.metadata.name + ': version ' + variables.newVersion + ' is lower than ' + variables.oldVersion + '; keep it at ' + variables.oldVersion + ' or later'",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: vapPolicyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        vapPolicyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := b.c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

func (b *bench) uninstallVAP(ctx context.Context) error {
	return b.deleteAll(ctx,
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: vapPolicyName}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: vapPolicyName}})
}

// deleteAll deletes objs and waits until they are gone.
func (b *bench) deleteAll(ctx context.Context, objs ...client.Object) error {
	for _, obj := range objs {
		if err := b.c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %T %s: %w", obj, obj.GetName(), err)
		}
	}
	for _, obj := range objs {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := b.c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%T %s still exists after 30s (last read: %v)", obj, obj.GetName(), err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// Probes: dry-run edits of the probe cluster's MachineDeployment whose
// outcomes tell the configurations apart.
const (
	probeDowngrade   = "downgrade"    // version below the current one
	probeTooNew      = "too-new"      // version newer than the control plane
	probeRefuse      = "refuse"       // version bump with the no-op's refuse marker
	probeMutate      = "mutate"       // version bump with the no-op's mutate marker
	probeLabelRefuse = "label-refuse" // label-only edit with the refuse marker

	// probeVersion is the probe MachineDeployment's version.
	probeVersion = "v1.35.5"
)

// Probe outcomes besides a refusal (which is named by a piece of its message).
const (
	allow   = "allowed"
	plain   = "allowed, unchanged"
	mutated = "allowed, mutated by the no-op webhook"
	// recorded is the probe's mutation by the recording floor (which
	// records nothing on a dry run).
	recorded = "allowed, mutated by the no-op webhook's recording floor"
	stamped  = "allowed, stamped by the guard"

	noopRefusal = "noop-webhook: refused the probe"
)

// confirm runs every probe until each gives cf's outcome (the API server
// picks up configuration changes asynchronously), for at most 60 s.
func (b *bench) confirm(ctx context.Context, cf config) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := b.probeAll(ctx, cf.want)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("configuration %s not in effect after 60s: %w (probes: %v)", cf.name, err, got)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// probeAll runs every probe and returns the outcomes, with an error naming
// the first probe whose outcome is not the wanted one.
func (b *bench) probeAll(ctx context.Context, want map[string]string) (map[string]string, error) {
	key := types.NamespacedName{Namespace: namespace, Name: "probe-md-0"}
	live := &clusterv1.MachineDeployment{}
	if err := b.c.Get(ctx, key, live); err != nil {
		return nil, fmt.Errorf("reading the probe MachineDeployment: %w", err)
	}
	patches := map[string]string{
		probeDowngrade:   `{"spec":{"template":{"spec":{"version":"v1.35.0"}}}}`,
		probeTooNew:      `{"spec":{"template":{"spec":{"version":"v1.99.0"}}}}`,
		probeRefuse:      `{"metadata":{"annotations":{"rollout-bench/probe":"refuse"}},"spec":{"template":{"spec":{"version":"v1.35.6"}}}}`,
		probeMutate:      `{"metadata":{"annotations":{"rollout-bench/probe":"mutate"}},"spec":{"template":{"spec":{"version":"v1.35.6"}}}}`,
		probeLabelRefuse: `{"metadata":{"labels":{"rollout-bench/probe":"x"},"annotations":{"rollout-bench/probe":"refuse"}}}`,
	}
	got := map[string]string{}
	var firstErr error
	for _, name := range slices.Sorted(maps.Keys(patches)) {
		md := builder.MachineDeployment(key.Namespace, key.Name).Build()
		err := b.c.Patch(ctx, md, client.RawPatch(types.MergePatchType, []byte(patches[name])), client.DryRunAll)
		switch {
		case err != nil:
			got[name] = err.Error()
		case name != probeMutate:
			got[name] = allow
		case md.Annotations["rollout-bench/mutated"] == "true":
			got[name] = mutated
		case md.Annotations["rollout-bench/mutated"] == "record":
			got[name] = recorded
		case md.Annotations["rollout-guard.io/revision"] != live.Annotations["rollout-guard.io/revision"]:
			got[name] = stamped
		default:
			got[name] = plain
		}
		w := want[name]
		ok := got[name] == w || (err != nil && w != allow && w != plain && w != mutated && w != recorded && w != stamped && strings.Contains(err.Error(), w))
		if !ok && firstErr == nil {
			firstErr = fmt.Errorf("probe %s: got %q, want %q", name, got[name], w)
		}
	}
	return got, firstErr
}

// minP99Samples is the fewest latencies a p99 is given from: below it,
// the 99th percentile is one of the few slowest edits, noise. Samples are
// pooled over rounds per workload and configuration.
const minP99Samples = 1000

// p99Text is s's p99 in ms, or "n/a (n=…)" below minP99Samples.
func p99Text(s summary) string {
	if s.n < minP99Samples {
		return fmt.Sprintf("n/a (n=%d)", s.n)
	}
	return fmt.Sprintf("%.2f", ms(s.p99))
}

// summary is the statistics of a set of latencies.
type summary struct {
	n                   int
	mean, p50, p90, p99 time.Duration
	throughput          float64
}

func summarize(lat []time.Duration, wall time.Duration) summary {
	if len(lat) == 0 {
		return summary{}
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	q := func(p float64) time.Duration {
		// Nearest rank.
		i := int(p*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return summary{n: len(s), mean: sum / time.Duration(len(s)), p50: q(0.50), p90: q(0.90), p99: q(0.99),
		throughput: float64(len(s)) / wall.Seconds()}
}

// processCPU returns the CPU time (user + system) of this process and of
// each of its child processes, by command name (kube-apiserver, etcd,
// webhook, noop-webhook), or by the name names gives its pid; this process
// is "bench-admission".
func processCPU(names map[int]string) map[string]time.Duration {
	out := map[string]time.Duration{}
	self := os.Getpid()
	if t, _, _, ok := readStat(self); ok {
		out["bench-admission"] = t
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		t, ppid, comm, ok := readStat(pid)
		if !ok || ppid != self {
			continue
		}
		if name, ok := names[pid]; ok {
			comm = name
		}
		out[comm] += t
	}
	return out
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat (100
// on every Linux architecture Go supports).
const clockTicks = 100

// readStat reads utime+stime, the parent pid and the command name of pid.
func readStat(pid int) (time.Duration, int, string, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, "", false
	}
	s := string(data)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return 0, 0, "", false
	}
	comm := s[open+1 : closing]
	fields := strings.Fields(s[closing+1:])
	// fields[0] is the state (field 3); ppid is field 4, utime 14, stime 15.
	if len(fields) < 13 {
		return 0, 0, "", false
	}
	ppid, _ := strconv.Atoi(fields[1])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks, ppid, comm, true
}

func apiServerVersion(binDir string) string {
	out, err := exec.Command(filepath.Join(binDir, "kube-apiserver"), "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes "))
}

// procNames names the child processes whose command name is not theirs
// alone: the watcher is this binary too.
func (b *bench) procNames() map[int]string {
	if pid := b.watcher.pid(); pid != 0 {
		return map[int]string{pid: "watcher"}
	}
	return nil
}

// insecureTLS is for the readiness wait only (see startNoop).
func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } //nolint:gosec // only asks whether the port serves

// guardVersion is what bin/webhook --version prints (git describe at build
// time, "-dirty" when built from a modified working tree).
func guardVersion(binDir string) string {
	out, err := exec.Command(filepath.Join(binDir, "webhook"), "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
