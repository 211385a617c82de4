package framework

import (
	"bytes"
	"context"
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Sample is one sample of a Prometheus text exposition: the value of a
// counter, gauge or untyped metric under its name, and a histogram's or
// summary's sum and count under NAME_sum and NAME_count (their buckets and
// quantiles are left out).
type Sample struct {
	// Name is the metric's name, with _sum or _count for a histogram or
	// summary.
	Name string
	// Labels are the sample's labels.
	Labels map[string]string
	// Value is its value.
	Value float64
}

// APIServerMetrics reads the /metrics page of the API server cfg points at
// (its user must be allowed to GET /metrics; an environment's admin is).
func APIServerMetrics(ctx context.Context, cfg *rest.Config) ([]Sample, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a client for the API server's /metrics: %w", err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	samples, err := ParseMetrics(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's /metrics: %w", err)
	}
	return samples, nil
}

// ParseMetrics reads a /metrics page in the Prometheus text format with
// Prometheus's own parser.
func ParseMetrics(r io.Reader) ([]Sample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing a /metrics page: %w", err)
	}
	var out []Sample
	for name, family := range families {
		for _, m := range family.GetMetric() {
			labels := make(map[string]string, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			add := func(name string, v float64) { out = append(out, Sample{Name: name, Labels: labels, Value: v}) }
			switch family.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m.GetGauge().GetValue())
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				add(name+"_sum", m.GetHistogram().GetSampleSum())
				add(name+"_count", float64(m.GetHistogram().GetSampleCount()))
			case dto.MetricType_SUMMARY:
				add(name+"_sum", m.GetSummary().GetSampleSum())
				add(name+"_count", float64(m.GetSummary().GetSampleCount()))
			default:
				add(name, m.GetUntyped().GetValue())
			}
		}
	}
	return out, nil
}

// Select returns the samples named name whose labels include where (nil
// or empty where: every sample of that name).
func Select(samples []Sample, name string, where map[string]string) []Sample {
	var out []Sample
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		match := true
		for k, v := range where {
			match = match && s.Labels[k] == v
		}
		if match {
			out = append(out, s)
		}
	}
	return out
}

// SumBy adds the samples named name whose labels include where, grouped by
// the values of the labels in by (joined by a space; "" with no by).
func SumBy(samples []Sample, name string, where map[string]string, by ...string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range Select(samples, name, where) {
		key := ""
		for i, l := range by {
			if i > 0 {
				key += " "
			}
			key += s.Labels[l]
		}
		out[key] += s.Value
	}
	return out
}
