package main

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// labelRE matches one label of a Prometheus text-format sample.
var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// benchResources are the resources whose watch-cache waits the report shows:
// the ones the edits and the guard touch.
var benchResources = []string{"controllerrevisions", "machinedeployments", "kubeadmcontrolplanes", "clusters", "machines"}

// sample is one line of the API server's /metrics.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads the API server's /metrics (the admin may).
func scrape(ctx context.Context, cfg *rest.Config) ([]sample, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a clientset: %w", err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	var out []sample
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		head := line[:sp]
		s := sample{name: head, labels: map[string]string{}, value: v}
		if i := strings.IndexByte(head, '{'); i >= 0 {
			s.name = head[:i]
			for _, m := range labelRE.FindAllStringSubmatch(head[i:], -1) {
				s.labels[m[1]] = m[2]
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// sumBy adds the samples of metric whose labels match where, grouped by
// the values of the labels in by.
func sumBy(samples []sample, metric string, where map[string]string, by ...string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		if s.name != metric {
			continue
		}
		match := true
		for k, v := range where {
			if s.labels[k] != v {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		var key []string
		for _, l := range by {
			key = append(key, s.labels[l])
		}
		out[strings.Join(key, " ")] += s.value
	}
	return out
}

// apiServerMetrics prints, from the API server's own metrics over the
// whole run, the time it spent calling each webhook and checking the
// policy, and the requests the guard made for ControllerRevisions, the
// writes it adds to an edit.
func (b *bench) apiServerMetrics(ctx context.Context, cfg *rest.Config) error {
	samples, err := scrape(ctx, cfg)
	if err != nil {
		return err
	}
	w := b.out
	fmt.Fprintf(w, "\n# The API server's metrics over the whole run (probes and warm-up included)\n\n")
	fmt.Fprintln(w, "| webhook (apiserver_admission_webhook_admission_duration_seconds) | type | calls | mean ms |")
	fmt.Fprintln(w, "|---|---|---|---|")
	sums := sumBy(samples, "apiserver_admission_webhook_admission_duration_seconds_sum", nil, "name", "type")
	counts := sumBy(samples, "apiserver_admission_webhook_admission_duration_seconds_count", nil, "name", "type")
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		name, typ, _ := strings.Cut(k, " ")
		fmt.Fprintf(w, "| %s | %s | %.0f | %.2f |\n", name, typ, counts[k], 1000*sums[k]/counts[k])
	}
	fmt.Fprintln(w)
	// The API server observes an admitted check only when it fails to
	// evaluate: these are the probes' refusals, a sample of the CEL cost.
	fmt.Fprintln(w, "| ValidatingAdmissionPolicy (apiserver_validating_admission_policy_check_duration_seconds; refusals only) | checks | mean ms |")
	fmt.Fprintln(w, "|---|---|---|")
	sums = sumBy(samples, "apiserver_validating_admission_policy_check_duration_seconds_sum", nil, "policy")
	counts = sumBy(samples, "apiserver_validating_admission_policy_check_duration_seconds_count", nil, "policy")
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(w, "| %s | %.0f | %.3f |\n", k, counts[k], 1000*sums[k]/counts[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| ControllerRevision requests (apiserver_request_duration_seconds) | verb | requests | mean ms |")
	fmt.Fprintln(w, "|---|---|---|---|")
	where := map[string]string{"resource": "controllerrevisions"}
	sums = sumBy(samples, "apiserver_request_duration_seconds_sum", where, "verb")
	counts = sumBy(samples, "apiserver_request_duration_seconds_count", where, "verb")
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(w, "| controllerrevisions | %s | %.0f | %.2f |\n", k, counts[k], 1000*sums[k]/counts[k])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| watch cache: consistent reads waiting for freshness (apiserver_watch_cache_read_wait_seconds) | resource | reads | mean ms |")
	fmt.Fprintln(w, "|---|---|---|---|")
	sums = sumBy(samples, "apiserver_watch_cache_read_wait_seconds_sum", nil, "resource", "group")
	counts = sumBy(samples, "apiserver_watch_cache_read_wait_seconds_count", nil, "resource", "group")
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		if resource, _, _ := strings.Cut(k, " "); counts[k] == 0 || !slices.Contains(benchResources, resource) {
			continue
		}
		fmt.Fprintf(w, "| watch cache | %s | %.0f | %.2f |\n", k, counts[k], 1000*sums[k]/counts[k])
	}
	return nil
}
