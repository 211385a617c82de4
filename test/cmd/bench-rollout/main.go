// Command bench-rollout is the user's view of the guard's cost: one rollout
// of a whole demo cluster in the sandbox (its control plane and its worker
// pool restarted at once, every machine replaced), timed with the guard
// registered and without it, in the same sandbox, rounds alternating which
// arm goes first so that a drift of the machine does not favour one. With
// the guard it also counts, from kube-apiserver's own admission metrics,
// how many requests of the rollout (almost all Cluster API's controllers')
// went through the guard's webhooks, and how long the API server waited
// for them.
//
//	cd test && go run ./cmd/bench-rollout --rounds 3 --summary ../bench/summary.json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/bench/report"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

// guardWebhookSuffix ends the name of every webhook the guard registers
// (config/webhook/manifests.yaml), as kube-apiserver's metrics label it.
const guardWebhookSuffix = ".rollout-guard.io"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-rollout:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	rounds  int
	binDir  string
	out     string
	summary string
	timeout time.Duration
}

// arm is one way the sandbox runs a rollout.
type arm struct {
	name      string
	durations []time.Duration
	// through and waited are the requests that went through the guard's
	// webhooks during each rollout, and the API server's summed wait for
	// them (the guard arm only).
	through []float64
	waited  []time.Duration
	skipped []float64
}

// rolloutSummary is the rollout section of bench/summary.json.
type rolloutSummary struct {
	Machine report.Machine `json:"machine"`
	// Machines is how many machines each rollout replaced.
	Machines int `json:"machines"`
	// WithGuardS and WithoutGuardS are each round's rollout duration.
	WithGuardS    []float64 `json:"with_guard_s"`
	WithoutGuardS []float64 `json:"without_guard_s"`
	// Ratio is the median duration with the guard over the median without,
	// with the lowest and highest of the rounds' own ratios.
	Ratio report.Spread `json:"ratio"`
	// GuardRequests is the requests through the guard's webhooks per
	// rollout (min, median, max), and GuardWaitMeanMS the API server's mean
	// wait for one.
	GuardRequests   [3]float64 `json:"guard_requests"`
	GuardWaitMeanMS float64    `json:"guard_wait_mean_ms"`
	// SkippedByMatchConditions is the requests per rollout (min, median,
	// max) that the guard's rules matched and its matchConditions kept
	// from calling it: Cluster API's own writes, mostly.
	SkippedByMatchConditions [3]float64 `json:"skipped_by_match_conditions"`
}

func run() error {
	var o options
	flag.IntVar(&o.rounds, "rounds", 3, "rollouts per arm (with the guard, without it)")
	flag.StringVar(&o.binDir, "bin-dir", "", "directory holding etcd, kube-apiserver and webhook (default: the repository's bin/)")
	flag.StringVar(&o.out, "out", "", "also write the report to this file (e.g. bench/rollout.txt)")
	flag.StringVar(&o.summary, "summary", "", "set the rollout section of this JSON summary (e.g. bench/summary.json)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long one rollout may take")
	flag.Parse()
	if o.rounds < 1 {
		return errors.New("--rounds must be at least 1")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logFile, err := os.CreateTemp("", "bench-rollout-*.log")
	if err != nil {
		return fmt.Errorf("creating the log file: %w", err)
	}
	defer logFile.Close()
	sandbox.LogTo(logFile)

	out, closeOut, err := report.Output(o.out)
	if err != nil {
		return err
	}
	defer closeOut()
	machine := report.ThisMachine()
	fmt.Fprintf(out, "cpu: %s\nloadavg-at-start: %s\nlog: %s\n", machine.CPUModel, machine.LoadAtStart, logFile.Name())

	sb, err := sandbox.Start(ctx, sandbox.Options{Environment: framework.Options{BinDir: o.binDir, Log: logFile}})
	if err != nil {
		return fmt.Errorf("starting the sandbox: %w", err)
	}
	defer func() {
		if err := sb.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench-rollout: stopping the sandbox:", err)
		}
	}()
	fmt.Fprintf(out, "sandbox ready after %s: cluster %s, %d control-plane and %d worker machines\n",
		sb.ReadyAfter.Round(time.Second), sb.Clusters[0].Name, sandbox.DefaultControlPlaneMachines, sandbox.DefaultWorkerMachines)
	cacheDir, err := os.MkdirTemp("", "bench-rollout-cache-*")
	if err != nil {
		return fmt.Errorf("creating the CLI's cache directory: %w", err)
	}
	defer os.RemoveAll(cacheDir)

	guarded, bare := &arm{name: "with the guard"}, &arm{name: "without the guard"}
	guardOn := true
	for round := range o.rounds {
		order := []*arm{guarded, bare}
		if round%2 == 1 {
			order = []*arm{bare, guarded}
		}
		for _, a := range order {
			want := a == guarded
			if want != guardOn {
				if err := setGuard(ctx, sb, want); err != nil {
					return err
				}
				guardOn = want
			}
			before, err := guardAdmissions(ctx, sb.Config)
			if err != nil {
				return err
			}
			took, err := rollOut(ctx, sb, cacheDir, o.timeout)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, a.name, err)
			}
			after, err := guardAdmissions(ctx, sb.Config)
			if err != nil {
				return err
			}
			a.durations = append(a.durations, took)
			line := fmt.Sprintf("round %d %-18s rollout %6.1f s", round+1, a.name+":", took.Seconds())
			if want {
				n, wait := after.count-before.count, after.sum-before.sum
				a.through = append(a.through, n)
				a.waited = append(a.waited, wait)
				a.skipped = append(a.skipped, after.skipped-before.skipped)
				line += fmt.Sprintf("; %.0f requests through the guard, mean wait %.2f ms; %.0f matched its rules and skipped by its matchConditions",
					n, mean(wait, n), after.skipped-before.skipped)
			}
			fmt.Fprintln(out, line)
		}
	}
	if !guardOn {
		if err := setGuard(ctx, sb, true); err != nil {
			return err
		}
	}
	machine.LoadAtEnd = report.LoadAverage()
	sum := summarize(guarded, bare, machine)
	printSummary(out, sum)
	if o.summary != "" {
		return report.UpdateSummary(o.summary, "rollout", sum)
	}
	return nil
}

// setGuard registers the guard (starting it) or removes its webhook
// configurations (stopping it), as an installation with and without it.
func setGuard(ctx context.Context, sb *sandbox.Sandbox, on bool) error {
	if on {
		if err := sb.Env.StartGuard(ctx); err != nil {
			return fmt.Errorf("starting the guard: %w", err)
		}
		return nil
	}
	if err := sb.Env.StopGuard(); err != nil {
		return fmt.Errorf("stopping the guard: %w", err)
	}
	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-validating"}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rollout-guard-mutating"}},
	} {
		if err := sb.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing the guard's webhook configuration %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// rollOut restarts the demo cluster's control plane and worker pool at
// once (spec.rollout.after, as `rollout restart` sets it) and returns how
// long until `rollout status` says both are rolled out.
func rollOut(ctx context.Context, sb *sandbox.Sandbox, cacheDir string, timeout time.Duration) (time.Duration, error) {
	demo := sb.Clusters[0]
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: demo.Namespace, Name: name} }
	after := metav1.NewTime(time.Now().Add(time.Second).Truncate(time.Second))
	begin := time.Now()
	kcp := &controlplanev1.KubeadmControlPlane{}
	if err := sb.Client.Get(ctx, key(demo.ControlPlaneName()), kcp); err != nil {
		return 0, fmt.Errorf("reading the control plane: %w", err)
	}
	kcpPatch := client.MergeFrom(kcp.DeepCopy())
	kcp.Spec.Rollout.After = after
	if err := sb.Client.Patch(ctx, kcp, kcpPatch); err != nil {
		return 0, fmt.Errorf("restarting the control plane: %w", err)
	}
	md := &clusterv1.MachineDeployment{}
	if err := sb.Client.Get(ctx, key(demo.MachineDeploymentName()), md); err != nil {
		return 0, fmt.Errorf("reading the worker pool: %w", err)
	}
	mdPatch := client.MergeFrom(md.DeepCopy())
	md.Spec.Rollout.After = after
	if err := sb.Client.Patch(ctx, md, mdPatch); err != nil {
		return 0, fmt.Errorf("restarting the worker pool: %w", err)
	}
	for _, res := range []string{"kcp/" + demo.ControlPlaneName(), "md/" + demo.MachineDeploymentName()} {
		r := sb.RunCLI(cacheDir, demo.Namespace, "status", res, "--timeout", timeout.String())
		if r.Code != 0 {
			return 0, fmt.Errorf("rollout status %s: exit %d: %s", res, r.Code, strings.TrimSpace(r.Stderr))
		}
	}
	return time.Since(begin), nil
}

// admissions is kube-apiserver's count of admission calls to the guard's
// webhooks and their summed duration, and of the requests its rules matched
// that its matchConditions kept from calling it (skipped).
type admissions struct {
	count   float64
	sum     time.Duration
	skipped float64
}

// guardAdmissions reads apiserver_admission_webhook_admission_duration_seconds
// for the guard's webhooks from kube-apiserver's /metrics.
func guardAdmissions(ctx context.Context, cfg *rest.Config) (admissions, error) {
	samples, err := framework.APIServerMetrics(ctx, cfg)
	if err != nil {
		return admissions{}, err
	}
	return guardAdmissionsOf(samples), nil
}

// guardAdmissionsOf sums the admission-duration histograms and the
// matchConditions exclusions of the webhooks named *.rollout-guard.io.
// A metric is absent until its first sample: no webhook called yet.
func guardAdmissionsOf(samples []framework.Sample) admissions {
	var a admissions
	for _, sample := range samples {
		if !strings.HasSuffix(sample.Labels["name"], guardWebhookSuffix) {
			continue
		}
		switch sample.Name {
		case "apiserver_admission_webhook_admission_duration_seconds_count":
			a.count += sample.Value
		case "apiserver_admission_webhook_admission_duration_seconds_sum":
			a.sum += time.Duration(sample.Value * float64(time.Second))
		case "apiserver_admission_match_condition_exclusions_total":
			a.skipped += sample.Value
		}
	}
	return a
}

// mean is sum/n in milliseconds, 0 for no request.
func mean(sum time.Duration, n float64) float64 {
	if n == 0 {
		return 0
	}
	return float64(sum.Milliseconds()) / n
}

// summarize turns the arms' rounds into the summary's figures.
func summarize(guarded, bare *arm, machine report.Machine) rolloutSummary {
	s := rolloutSummary{Machine: machine, Machines: sandbox.DefaultControlPlaneMachines + sandbox.DefaultWorkerMachines}
	for i := range guarded.durations {
		s.WithGuardS = append(s.WithGuardS, report.Round3(guarded.durations[i].Seconds()))
		s.WithoutGuardS = append(s.WithoutGuardS, report.Round3(bare.durations[i].Seconds()))
	}
	perRound := make([]float64, len(s.WithGuardS))
	for i := range s.WithGuardS {
		perRound[i] = s.WithGuardS[i] / s.WithoutGuardS[i]
	}
	s.Ratio = report.NewSpread(median(s.WithGuardS)/median(s.WithoutGuardS), perRound)
	s.GuardRequests = minMedianMax(guarded.through)
	s.SkippedByMatchConditions = minMedianMax(guarded.skipped)
	var n float64
	var wait time.Duration
	for i := range guarded.through {
		n += guarded.through[i]
		wait += guarded.waited[i]
	}
	s.GuardWaitMeanMS = report.Round3(mean(wait, n))
	return s
}

// minMedianMax is the lowest, middle and highest of vs (zeros for none).
func minMedianMax(vs []float64) [3]float64 {
	if len(vs) == 0 {
		return [3]float64{}
	}
	sorted := slices.Clone(vs)
	slices.Sort(sorted)
	return [3]float64{sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1]}
}

// median is the middle of vs (the upper one of an even count).
func median(vs []float64) float64 {
	sorted := slices.Clone(vs)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// printSummary writes the run's figures.
func printSummary(out io.Writer, s rolloutSummary) {
	fmt.Fprintf(out, "rollout of %d machines, with/without the guard: %.3f× (rounds %.3f–%.3f)\n", s.Machines, s.Ratio.Pooled, s.Ratio.Min, s.Ratio.Max)
	fmt.Fprintf(out, "requests through the guard per rollout: %.0f (min %.0f, max %.0f); the API server's mean wait for one: %.3f ms\n",
		s.GuardRequests[1], s.GuardRequests[0], s.GuardRequests[2], s.GuardWaitMeanMS)
	fmt.Fprintf(out, "matched by the guard's rules and skipped by its matchConditions per rollout: %.0f (min %.0f, max %.0f)\n",
		s.SkippedByMatchConditions[1], s.SkippedByMatchConditions[0], s.SkippedByMatchConditions[2])
	fmt.Fprintf(out, "loadavg-at-end: %s\n", s.Machine.LoadAtEnd)
}
