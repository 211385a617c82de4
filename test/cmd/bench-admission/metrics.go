package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// benchResources are the resources whose watch-cache waits the report shows:
// the ones the edits and the guard touch.
var benchResources = []string{"rolloutrevisions", "machinedeployments", "kubeadmcontrolplanes", "clusters", "machines"}

// apiServerMetrics prints, from the API server's own metrics over the
// whole run, the time it spent calling each webhook and checking the
// policy, and the requests the guard made for RolloutRevisions, the
// writes it adds to an edit.
func (b *bench) apiServerMetrics(ctx context.Context, cfg *rest.Config) error {
	samples, err := framework.APIServerMetrics(ctx, cfg)
	if err != nil {
		return err
	}
	w := b.out
	fmt.Fprintf(w, "\n# The API server's metrics over the whole run (probes and warm-up included)\n\n")
	fmt.Fprintln(w, "| webhook (apiserver_admission_webhook_admission_duration_seconds) | type | calls | mean ms |")
	fmt.Fprintln(w, "|---|---|---|---|")
	sums := framework.SumBy(samples, "apiserver_admission_webhook_admission_duration_seconds_sum", nil, "name", "type")
	counts := framework.SumBy(samples, "apiserver_admission_webhook_admission_duration_seconds_count", nil, "name", "type")
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		name, typ, _ := strings.Cut(k, " ")
		fmt.Fprintf(w, "| %s | %s | %.0f | %.2f |\n", name, typ, counts[k], 1000*sums[k]/counts[k])
	}
	fmt.Fprintln(w)
	// The API server observes an admitted check only when it fails to
	// evaluate: these are the probes' refusals, a sample of the CEL cost.
	fmt.Fprintln(w, "| ValidatingAdmissionPolicy (apiserver_validating_admission_policy_check_duration_seconds; refusals only) | checks | mean ms |")
	fmt.Fprintln(w, "|---|---|---|")
	sums = framework.SumBy(samples, "apiserver_validating_admission_policy_check_duration_seconds_sum", nil, "policy")
	counts = framework.SumBy(samples, "apiserver_validating_admission_policy_check_duration_seconds_count", nil, "policy")
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(w, "| %s | %.0f | %.3f |\n", k, counts[k], 1000*sums[k]/counts[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| RolloutRevision requests (apiserver_request_duration_seconds) | verb | requests | mean ms |")
	fmt.Fprintln(w, "|---|---|---|---|")
	where := map[string]string{"resource": "rolloutrevisions"}
	sums = framework.SumBy(samples, "apiserver_request_duration_seconds_sum", where, "verb")
	counts = framework.SumBy(samples, "apiserver_request_duration_seconds_count", where, "verb")
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(w, "| rolloutrevisions | %s | %.0f | %.2f |\n", k, counts[k], 1000*sums[k]/counts[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| watch cache: consistent reads waiting for freshness (apiserver_watch_cache_read_wait_seconds) | resource | reads | mean ms |")
	fmt.Fprintln(w, "|---|---|---|---|")
	sums = framework.SumBy(samples, "apiserver_watch_cache_read_wait_seconds_sum", nil, "resource", "group")
	counts = framework.SumBy(samples, "apiserver_watch_cache_read_wait_seconds_count", nil, "resource", "group")
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		if resource, _, _ := strings.Cut(k, " "); counts[k] == 0 || !slices.Contains(benchResources, resource) {
			continue
		}
		fmt.Fprintf(w, "| watch cache | %s | %.0f | %.2f |\n", k, counts[k], 1000*sums[k]/counts[k])
	}
	return nil
}

// webhookTime is the time the API server spent calling webhooks of one
// type, and how many calls (apiserver_admission_webhook_admission_duration_seconds).
type webhookTime struct {
	seconds, calls float64
}

func (t webhookTime) add(o webhookTime) webhookTime {
	return webhookTime{t.seconds + o.seconds, t.calls + o.calls}
}

func (t webhookTime) minus(o webhookTime) webhookTime {
	return webhookTime{t.seconds - o.seconds, t.calls - o.calls}
}

// webhookTimes reads the API server's time calling webhooks so far, by
// type (admit: mutating; validating), the cheap way round a slice:
// subtracting two readings gives a workload's.
func (b *bench) webhookTimes(ctx context.Context) (map[string]webhookTime, error) {
	samples, err := framework.APIServerMetrics(ctx, b.cfg)
	if err != nil {
		return nil, err
	}
	sums := framework.SumBy(samples, "apiserver_admission_webhook_admission_duration_seconds_sum", nil, "type")
	counts := framework.SumBy(samples, "apiserver_admission_webhook_admission_duration_seconds_count", nil, "type")
	out := map[string]webhookTime{}
	for typ, n := range counts {
		out[typ] = webhookTime{seconds: sums[typ], calls: n}
	}
	return out, nil
}
