// Command sandbox runs a local Cluster API management cluster with the guard
// and demo clusters whose machines are simulated in memory (package
// test/sandbox): etcd and kube-apiserver from the repository's bin/, the
// Cluster API CRDs with Cluster API's conversion and admission webhooks,
// bin/webhook registered from config/webhook/manifests.yaml, the Cluster API
// controllers (with ClusterClass and the topology controllers) and the
// in-memory infrastructure provider in this process, a demo cluster "demo"
// (plus "demo-2"… with --clusters) and the ClusterClass-based demo cluster
// "demo-cc" on ClusterClass "demo-class" (plus "demo-cc-2"… with
// --class-clusters; none with --class-clusters 0 or --class-cluster=false).
// With --runtime-sdk, Cluster API's core controllers run instead as Cluster
// API's own core manager, bin/capi-core, with the RuntimeSDK feature gate on,
// logging to <dir>/capi-core.log. With --in-place-updates (which implies
// --runtime-sdk), Cluster API updates machines in place: its kubeadm
// control plane manager runs as bin/capi-kcp (log <dir>/capi-kcp.log), the
// InPlaceUpdates feature gate is on everywhere, and Cluster API's test
// extension (in-place update and upgrade plan handlers) is served and
// registered as ExtensionConfig test-extension. It writes an admin kubeconfig to
// <dir>/kubeconfig, logs to <dir>/sandbox.log, prints a tour of commands to
// try once every machine is ready, and runs until SIGINT or SIGTERM, then
// stops everything it started.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

func run() (retErr error) {
	dir := flag.String("dir", ".sandbox", "state directory: kubeconfig, logs")
	binDir := flag.String("bin-dir", "", "directory holding etcd, kube-apiserver, kubectl and webhook (default: the repository's bin/)")
	clusters := flag.Int("clusters", 1, `number of demo clusters: "demo", then "demo-2", "demo-3"…; 0 for none (with --class-clusters 0, an empty management cluster to move clusters to)`)
	cpMachines := flag.Int("control-plane-machines", sandbox.DefaultControlPlaneMachines, "control-plane machines of each demo cluster")
	workerMachines := flag.Int("worker-machines", sandbox.DefaultWorkerMachines, "worker machines of each demo cluster")
	classClusters := flag.Int("class-clusters", 1, `number of ClusterClass-based demo clusters on ClusterClass "`+sandbox.DefaultClassName+`": "`+
		sandbox.ClassClusterName(0)+`", then "`+sandbox.ClassClusterName(1)+`", "`+sandbox.ClassClusterName(2)+`"…; 0 for none`)
	classCluster := flag.Bool("class-cluster", true, `--class-cluster=false is the same as --class-clusters 0 (kept from before --class-clusters)`)
	classCPMachines := flag.Int("class-control-plane-machines", sandbox.DefaultClassControlPlaneMachines, "control-plane machines of each ClusterClass-based demo cluster")
	classWorkerMachines := flag.Int("class-worker-machines", sandbox.DefaultClassWorkerMachines, "worker machines of each ClusterClass-based demo cluster")
	classVersion := flag.String("class-kubernetes-version", sandbox.DefaultClassKubernetesVersion,
		"Kubernetes version of the ClusterClass-based demo clusters, one of "+strings.Join(sandbox.ClassKubernetesVersions, ", "))
	startup := flag.Duration("machine-startup", sandbox.DefaultMachineStartup, "how long each simulated start-up step of a machine takes (VM, node, API server, etcd)")
	readyTimeout := flag.Duration("ready-timeout", sandbox.DefaultReadyTimeout, "how long to wait for every demo machine to be ready")
	runtimeSDK := flag.Bool("runtime-sdk", false, "run Cluster API's core controllers (Cluster, Machine, MachineSet, MachineDeployment, ClusterClass, topology…) as Cluster API's own core manager,\n"+
		"bin/capi-core (build it with: make capi-core), with the RuntimeSDK feature gate on, instead of in this process: Runtime Extensions\n"+
		"registered with an ExtensionConfig (runtime.cluster.x-k8s.io/v1beta2) are called, e.g. the topology controller's BeforeClusterUpgrade hook;\n"+
		"its log is <dir>/capi-core.log")
	inPlace := flag.Bool("in-place-updates", false, "let Cluster API update machines in place (implies --runtime-sdk): the InPlaceUpdates feature gate on, Cluster API's kubeadm control plane\n"+
		"manager as bin/capi-kcp (build it with: make capi-kcp; its log is <dir>/capi-kcp.log) instead of in this process, and Cluster API's test\n"+
		"extension's in-place update and upgrade plan handlers served here and registered as ExtensionConfig "+sandbox.TestExtensionName)
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s [flags]\n\nRuns a local Cluster API management cluster with rollout-guard and demo clusters until interrupted.\n\nFlags:\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", flag.Args())
	}
	if *clusters < 0 {
		return errors.New("--clusters must be 0 or more")
	}
	nClassClusters, err := classClusterCount(*classClusters, *classCluster, flagSet("class-clusters"))
	if err != nil {
		return err
	}
	if *cpMachines < 1 || *workerMachines < 1 || *classCPMachines < 1 || *classWorkerMachines < 1 {
		return errors.New("the machine counts must be at least 1")
	}
	// Cluster API's KubeadmControlPlane webhook refuses an even number of
	// machines with stacked etcd: say so before starting anything.
	if *cpMachines%2 == 0 || *classCPMachines%2 == 0 {
		return errors.New("--control-plane-machines and --class-control-plane-machines must be odd (etcd quorum; Cluster API refuses an even number)")
	}
	if !slices.Contains(sandbox.ClassKubernetesVersions, *classVersion) {
		return fmt.Errorf("--class-kubernetes-version %s is not one of the ClusterClass's versions %s", *classVersion, strings.Join(sandbox.ClassKubernetesVersions, ", "))
	}
	if *startup <= 0 {
		return errors.New("--machine-startup must be positive")
	}

	stateDir, err := filepath.Abs(*dir)
	if err != nil {
		return fmt.Errorf("resolving --dir: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return fmt.Errorf("creating the state directory: %w", err)
	}
	logPath := filepath.Join(stateDir, "sandbox.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("creating the log file: %w", err)
	}
	defer func() {
		if err := logFile.Close(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("closing the log file: %w", err))
		}
	}()
	sandbox.LogTo(logFile)

	// Signals are caught until the end, so a second Ctrl-C cannot cut the
	// stop short and leave etcd or kube-apiserver behind. SIGHUP (the
	// terminal or tmux session closed) stops the sandbox the same way.
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stopSignals()

	fmt.Printf("starting the sandbox in %s (log: %s)\n", stateDir, logPath)
	begin := time.Now()
	sb, err := sandbox.Start(ctx, sandbox.Options{
		Environment: framework.Options{
			BinDir:  *binDir,
			Log:     logFile,
			WorkDir: stateDir,
			// As docs/client-certificates.md turns it on: the API server presents a
			// client certificate, and the guard accepts no other client.
			GuardClientAuth: true,
		},
		Clusters:                  demoClusters(*clusters),
		ControlPlaneMachines:      int32(*cpMachines),
		WorkerMachines:            int32(*workerMachines),
		ClassClusters:             nClassClusters,
		ClassControlPlaneMachines: int32(*classCPMachines),
		ClassWorkerMachines:       int32(*classWorkerMachines),
		ClassKubernetesVersion:    *classVersion,
		MachineStartup:            *startup,
		ReadyTimeout:              *readyTimeout,
		RuntimeSDK:                *runtimeSDK || *inPlace,
		InPlaceUpdates:            *inPlace,
		Progress: func(s sandbox.ClusterState) {
			fmt.Printf("  %5.1fs  %s: %s\n", time.Since(begin).Seconds(), s.Name, s.Summary())
		},
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while starting; everything started was stopped again")
		}
		return fmt.Errorf("starting (everything started was stopped again; see %s): %w", logPath, err)
	}
	defer func() {
		fmt.Println("stopping the sandbox...")
		if err := sb.Stop(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("stopping: %w", err))
			return
		}
		fmt.Println("sandbox stopped: the controllers, etcd, kube-apiserver and the guard are down")
	}()

	printTour(sb, time.Since(begin), logPath, stateDir)
	<-ctx.Done()
	fmt.Println()
	return nil
}

// printTour prints what runs and a few commands to try, with paths
// relative to the repository's root, where a user types them.
func printTour(sb *sandbox.Sandbox, took time.Duration, logPath, stateDir string) {
	if len(sb.Clusters) == 0 {
		printManagementTour(sb, took, logPath)
		return
	}
	root := sb.Env.RepoRoot
	demo := sb.Clusters[0]
	var names []string
	for _, c := range sb.Clusters {
		names = append(names, c.Name)
	}
	tour := strings.NewReplacer(
		"{took}", took.Round(100*time.Millisecond).String(),
		"{envTook}", sb.EnvironmentReadyAfter.Round(100*time.Millisecond).String(),
		"{clusters}", fmt.Sprintf("%d cluster(s): %s", len(sb.Clusters), strings.Join(names, ", ")),
		"{cp}", fmt.Sprint(demo.ControlPlaneMachines),
		"{workers}", fmt.Sprint(demo.WorkerMachines),
		"{version}", demo.KubernetesVersion,
		"{root}", root,
		"{kubeconfig}", sb.Kubeconfig,
		"{kubectl}", relativeTo(root, filepath.Join(sb.Env.BinDir, "kubectl")),
		"{rollout}", relativeTo(root, filepath.Join(sb.Env.BinDir, "rollout")),
		"{md}", demo.MachineDeploymentName(),
		"{spare}", demo.SpareWorkerTemplate(),
		"{kcp}", demo.ControlPlaneName(),
		"{cluster}", demo.Name,
		"{workloadKubeconfig}", relativeTo(root, filepath.Join(stateDir, demo.Name+".kubeconfig")),
		"{log}", logPath,
		"{apiserverLog}", filepath.Join(stateDir, "kube-apiserver.log"),
		"{etcdLog}", filepath.Join(stateDir, "etcd.log"),
		"{classTour}", classTour(sb, relativeTo(root, filepath.Join(sb.Env.BinDir, "kubectl"))),
		"{runtimeSDKTour}", runtimeSDKTour(sb, relativeTo(root, filepath.Join(sb.Env.BinDir, "kubectl"))),
	)
	fmt.Print(tour.Replace(`
sandbox ready in {took}: {clusters}, each with {cp} control-plane and {workers} worker
machines at {version}, the Cluster API controllers, the in-memory infrastructure and
rollout-guard (API server and guard were up after {envTook}).

Try, in another shell, from {root}:

  export KUBECONFIG={kubeconfig}
  {kubectl} get cluster,kcp,md,machines -A

  # Roll the workers to the spare template and watch every machine being replaced:
  {kubectl} patch md {md} --type merge -p '{"spec":{"template":{"spec":{"infrastructureRef":{"name":"{spare}"}}}}}'
  {kubectl} get machines -w

  # Upgrade the control plane by one minor; its machines are replaced one by one:
  {kubectl} patch kcp {kcp} --type merge -p '{"spec":{"version":"v1.36.1"}}'

  # A downgrade is refused by the guard, naming the rule and the way out:
  {kubectl} patch kcp {kcp} --type merge -p '{"spec":{"version":"v1.34.2"}}'

  # Who changed what, and when: the guard's stamps and its recorded revisions
  {kubectl} get md {md} -o jsonpath='{.metadata.annotations}'; echo
  {kubectl} get rolloutrevisions
  {rollout} history kcp/{kcp}

  # The simulated workload cluster itself (nodes and control-plane pods, in memory):
  {kubectl} get secret {cluster}-kubeconfig -o jsonpath='{.data.value}' | base64 -d > {workloadKubeconfig}
  {kubectl} --kubeconfig {workloadKubeconfig} get nodes
{classTour}{runtimeSDKTour}
Logs: {log} (controllers and guard),
      {apiserverLog}, {etcdLog}
Press Ctrl-C to stop.
`))
}

// printManagementTour prints the tour of a sandbox without demo clusters
// (--clusters 0): a management cluster to move clusters to or restore them
// into, and, unless --class-clusters 0, the ClusterClass-based clusters.
func printManagementTour(sb *sandbox.Sandbox, took time.Duration, logPath string) {
	root := sb.Env.RepoRoot
	kubectl := relativeTo(root, filepath.Join(sb.Env.BinDir, "kubectl"))
	tour := strings.NewReplacer(
		"{took}", took.Round(100*time.Millisecond).String(),
		"{root}", root,
		"{kubeconfig}", sb.Kubeconfig,
		"{kubectl}", kubectl,
		"{log}", logPath,
		"{classTour}", classTour(sb, kubectl),
		"{runtimeSDKTour}", runtimeSDKTour(sb, kubectl),
	)
	fmt.Print(tour.Replace(`
sandbox ready in {took}: a management cluster with the Cluster API controllers, the
in-memory infrastructure and rollout-guard, its providers recorded in clusterctl's
inventory as clusterctl init leaves them.

Try, in another shell, from {root}:

  {kubectl} --kubeconfig {kubeconfig} get providers -A

  # Move the clusters of another management cluster here, or restore a backup:
  clusterctl move --kubeconfig SOURCE-KUBECONFIG --to-kubeconfig {kubeconfig}
  clusterctl move --from-directory DIR --to-kubeconfig {kubeconfig}
{classTour}{runtimeSDKTour}
Logs: {log} (controllers and guard)
Press Ctrl-C to stop.
`))
}

// classTour returns the part of the tour about the ClusterClass-based demo
// clusters, or "" when there is none.
func classTour(sb *sandbox.Sandbox, kubectl string) string {
	if len(sb.ClassClusters) == 0 {
		return ""
	}
	cc := sb.ClassClusters[0]
	text := `
ClusterClass-based cluster {cc} on ClusterClass {class} (kubernetesVersions {versions}),
with {cp} control-plane and {workers} worker machine(s) at {version}. The topology controller
owns KubeadmControlPlane {kcp} and MachineDeployment {md}: change them through the Cluster.

  {kubectl} get clusterclass,cluster -o wide
`
	// The neighbours of the version in the class's list: one minor up, one down.
	versions := cc.Class.KubernetesVersions
	if i := slices.Index(versions, cc.KubernetesVersion); i >= 0 {
		if i+1 < len(versions) {
			text += `
  # Upgrade the whole cluster by one minor: control plane first, then the workers:
  {kubectl} patch cluster {cc} --type merge -p '{"spec":{"topology":{"version":"` + versions[i+1] + `"}}}'
`
		}
		if i > 0 {
			text += `
  # Going back a minor is refused (Cluster API's Cluster webhook and the guard both say no):
  {kubectl} patch cluster {cc} --type merge -p '{"spec":{"topology":{"version":"` + versions[i-1] + `"}}}'
`
		}
	}
	if len(sb.ClassClusters) > 1 {
		// A variable change rolls one cluster of the fleet: a merge patch
		// replaces the whole variables list, so it repeats the port.
		last := sb.ClassClusters[len(sb.ClassClusters)-1]
		var names []string
		for _, c := range sb.ClassClusters {
			names = append(names, c.Name)
		}
		text += fmt.Sprintf(`
A fleet of %d clusters on ClusterClass {class}: %s, alike but for their ports.
Class variable %s (default %s) is the image of a cluster's worker machines; a new
value rotates that cluster's worker template and replaces its workers, the others keep theirs:

  {kubectl} patch cluster %s --type merge -p '{"spec":{"topology":{"variables":[{"name":"%s","value":%d},{"name":"%s","value":"sandbox-worker:v2"}]}}}'
  {kubectl} get machines -l cluster.x-k8s.io/cluster-name -L cluster.x-k8s.io/cluster-name -w
  {rollout} status clusterclass/{class}    # the fleet, a line per cluster, until every one is rolled out
`, len(names), strings.Join(names, ", "), sandbox.WorkerImageVariable, sandbox.DefaultWorkerImage,
			last.Name, sandbox.PortVariable, last.Port, sandbox.WorkerImageVariable)
	}
	return strings.NewReplacer(
		"{cc}", cc.Name,
		"{class}", cc.Class.Name,
		"{versions}", strings.Join(cc.Class.KubernetesVersions, ", "),
		"{cp}", fmt.Sprint(cc.ControlPlaneMachines),
		"{workers}", fmt.Sprint(cc.WorkerMachines),
		"{version}", cc.KubernetesVersion,
		"{kcp}", cc.ControlPlaneName(),
		"{md}", cc.MachineDeploymentName(),
		"{kubectl}", kubectl,
		"{rollout}", filepath.Join(filepath.Dir(kubectl), "rollout"),
	).Replace(text)
}

// runtimeSDKTour returns the part of the tour about the Runtime SDK
// (--runtime-sdk), or "" without it.
func runtimeSDKTour(sb *sandbox.Sandbox, kubectl string) string {
	if sb.Core == nil {
		return ""
	}
	return strings.NewReplacer("{kubectl}", kubectl, "{log}", sb.Core.Log).Replace(`
Runtime SDK: Cluster API's core controllers run as its core manager, bin/capi-core, with the
RuntimeSDK feature gate on (log: {log}). Register a Runtime Extension — an HTTPS
server of yours, e.g. on sigs.k8s.io/cluster-api/exp/runtime/server — and Cluster API calls it:

  {kubectl} apply -f - <<'EOF'
  apiVersion: runtime.cluster.x-k8s.io/v1beta2
  kind: ExtensionConfig
  metadata:
    name: my-extension
  spec:
    clientConfig:
      url: https://127.0.0.1:PORT
      caBundle: BASE64-PEM-OF-ITS-CA
  EOF
  {kubectl} get extensionconfig my-extension -o jsonpath='{.status.handlers}'; echo
`) + inPlaceTour(sb, kubectl)
}

// inPlaceTour returns the part of the tour about in-place updates
// (--in-place-updates), or "" without them.
func inPlaceTour(sb *sandbox.Sandbox, kubectl string) string {
	if sb.ControlPlane == nil {
		return ""
	}
	return strings.NewReplacer("{kubectl}", kubectl, "{log}", sb.ControlPlane.Log, "{ext}", sandbox.TestExtensionName).Replace(`
In-place updates: the InPlaceUpdates feature gate is on, Cluster API's kubeadm control plane
manager runs as bin/capi-kcp (log: {log}), and Cluster API's test extension is registered
as ExtensionConfig {ext}: a control plane with maxSurge 0 whose version changes keeps
its machines, each updated in place (Machine condition Updating) in 15-20 s:

  {kubectl} get extensionconfig {ext} -o jsonpath='{.status.handlers[*].name}'; echo
`)
}

// relativeTo returns path relative to dir when it lies below dir, else path.
func relativeTo(dir, path string) string {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return path
	}
	return rel
}

// classClusterCount is the number of ClusterClass-based demo clusters for
// --class-clusters n and --class-cluster enabled; explicit says whether
// --class-clusters was given. --class-cluster=false predates
// --class-clusters and still means none, so scripts written for it keep
// working; with an explicit non-zero --class-clusters it is a contradiction.
func classClusterCount(n int, enabled, explicit bool) (int, error) {
	switch {
	case n < 0:
		return 0, errors.New("--class-clusters must be 0 or more")
	case !enabled && explicit && n > 0:
		return 0, fmt.Errorf("--class-cluster=false contradicts --class-clusters %d: give one of them", n)
	case !enabled:
		return 0, nil
	}
	return n, nil
}

// flagSet reports whether flag name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// demoClusters is the sandbox's Options.Clusters for --clusters n: there,
// 0 means the default and a negative number none.
func demoClusters(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
