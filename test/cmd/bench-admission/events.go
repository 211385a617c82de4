package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/rollout-guard/rollout-guard/test/bench/report"
)

// serverProc is the process (procs) of cf's webhook server, "" without
// one.
func serverProc(cfg string) string {
	switch cfg {
	case cfgGuard:
		return "webhook"
	case cfgNoop, cfgNoopStamp, cfgNoopRec, cfgNoopNoMC:
		return "noop-webhook"
	}
	return ""
}

// eventFig is what one kind of edit (event) cost a webhook server,
// per edit: its reconciles and API requests, from its own metrics, and
// its CPU time beside the watcher's (a plain typed-informer process on
// the same kinds), from the cgroups.
type eventFig struct {
	Workload string `json:"workload"`
	Config   string `json:"config"`
	Edits    int    `json:"edits"`
	// ReconcilesPerEdit is controller_runtime_reconcile_total by
	// controller, per edit.
	ReconcilesPerEdit map[string]float64 `json:"reconciles_per_edit"`
	Reconciles        float64            `json:"reconciles_per_edit_all"`
	// RequestsPerEdit is rest_client_requests_total (the server's
	// requests to the API server) by verb, per edit.
	RequestsPerEdit map[string]float64 `json:"api_requests_per_edit"`
	Requests        float64            `json:"api_requests_per_edit_all"`
	// ServerCPUms and WatcherCPUms are CPU ms per edit.
	ServerCPUms  float64 `json:"server_cpu_ms_per_edit"`
	WatcherCPUms float64 `json:"watcher_cpu_ms_per_edit"`
}

// eventFigures are the eventFigs of every configuration with a webhook
// server, in the report's order.
func (b *bench) eventFigures(configs []config) []eventFig {
	var out []eventFig
	for _, wl := range orderedWorkloads(configs) {
		for _, cf := range configs {
			c := b.results[cf.name][wl]
			proc := serverProc(cf.name)
			if c == nil || len(c.lat) == 0 || proc == "" {
				continue
			}
			n := float64(len(c.lat))
			f := eventFig{Workload: wl.String(), Config: cf.name, Edits: len(c.lat),
				ReconcilesPerEdit: map[string]float64{}, RequestsPerEdit: map[string]float64{},
				ServerCPUms: report.Round3(ms(c.cpu[proc]) / n), WatcherCPUms: report.Round3(ms(c.cpu["watcher"]) / n)}
			var rec, req float64
			for k, v := range c.reconciles {
				f.ReconcilesPerEdit[k] = report.Round3(v / n)
				rec += v
			}
			for k, v := range c.requests {
				f.RequestsPerEdit[k] = report.Round3(v / n)
				req += v
			}
			f.Reconciles, f.Requests = report.Round3(rec/n), report.Round3(req/n)
			out = append(out, f)
		}
	}
	return out
}

// ownTimeFig is a webhook server's own answer time
// (controller_runtime_webhook_latency_seconds) for one path or type over
// the measured edits of a configuration: mean, and p99 only from
// minP99Samples calls, estimated from the histogram's buckets.
type ownTimeFig struct {
	Config string  `json:"config"`
	Path   string  `json:"path,omitempty"`
	Type   string  `json:"type,omitempty"`
	Calls  int     `json:"calls"`
	MeanMS float64 `json:"mean_ms"`
	// P99MS is there only from minP99Samples calls; P99NA says so
	// otherwise.
	P99MS *float64 `json:"p99_ms,omitempty"`
	P99NA string   `json:"p99_na,omitempty"`
}

// ownTimeDiff is the guard's own answer time minus a no-op floor's, per
// call of a type.
type ownTimeDiff struct {
	Type       string   `json:"type"`
	Of         string   `json:"of"`
	To         string   `json:"to"`
	MeanMS     float64  `json:"mean_ms"`
	P99MS      *float64 `json:"p99_ms,omitempty"`
	P99NA      string   `json:"p99_na,omitempty"`
	Calls, Ref int      `json:"-"`
}

// ownTimes pools cfg's webhook server's answer-time histograms over every
// measured workload, by path.
func (b *bench) ownTimes(cfg string) map[string]histogram {
	out := map[string]histogram{}
	for _, c := range b.results[cfg] {
		for path, h := range c.latency {
			out[path] = out[path].add(h)
		}
	}
	return out
}

// byType merges histograms by path into histograms by type (admit,
// validating).
func byType(paths map[string]histogram) map[string]histogram {
	out := map[string]histogram{}
	for path, h := range paths {
		out[pathType(path)] = out[pathType(path)].add(h)
	}
	return out
}

// ownFig is h's figure.
func ownFig(cfg, path, typ string, h histogram) ownTimeFig {
	f := ownTimeFig{Config: cfg, Path: path, Type: typ, Calls: int(h.count), MeanMS: report.Round3(1000 * h.sum / h.count)}
	if h.count >= minP99Samples {
		f.P99MS = new(report.Round3(1000 * h.quantile(0.99)))
	} else {
		f.P99NA = fmt.Sprintf("n/a (n=%d)", int(h.count))
	}
	return f
}

// ownTimeFigures are the own answer times of every configuration with a
// webhook server, by path and by type, and the guard's difference to each
// no-op floor that ran, by type.
func (b *bench) ownTimeFigures(configs []config) (byPath, types []ownTimeFig, diffs []ownTimeDiff) {
	typed := map[string]map[string]histogram{}
	for _, cf := range configs {
		if serverProc(cf.name) == "" {
			continue
		}
		paths := b.ownTimes(cf.name)
		for _, path := range sortedKeys(paths) {
			if paths[path].count > 0 {
				byPath = append(byPath, ownFig(cf.name, path, "", paths[path]))
			}
		}
		typed[cf.name] = byType(paths)
		for _, typ := range sortedKeys(typed[cf.name]) {
			types = append(types, ownFig(cf.name, "", typ, typed[cf.name][typ]))
		}
	}
	guard := typed[cfgGuard]
	for _, floor := range []string{cfgNoop, cfgNoopStamp, cfgNoopRec} {
		base := typed[floor]
		for _, typ := range sortedKeys(guard) {
			g, f := guard[typ], base[typ]
			if g.count <= 0 || f.count <= 0 {
				continue
			}
			d := ownTimeDiff{Type: typ, Of: cfgGuard, To: floor, MeanMS: report.Round3(1000 * (g.sum/g.count - f.sum/f.count)),
				Calls: int(g.count), Ref: int(f.count)}
			if n := int(math.Min(g.count, f.count)); n >= minP99Samples {
				d.P99MS = new(report.Round3(1000 * (g.quantile(0.99) - f.quantile(0.99))))
			} else {
				d.P99NA = fmt.Sprintf("n/a (n=%d)", n)
			}
			diffs = append(diffs, d)
		}
	}
	return byPath, types, diffs
}

// typeName is how the report names a webhook type.
func typeName(typ string) string {
	if typ == "admit" {
		return "mutating"
	}
	return typ
}

// p99Cell is a figure's p99 in ms or why there is none.
func p99Cell(v *float64, na string) string {
	if v == nil {
		return na
	}
	return fmt.Sprintf("%.3f", *v)
}

// perKey prints a map of per-edit figures as "k=v, …".
func perKey(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%.2f", k, m[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// reportEvents prints the per-event counts and the servers' own times.
func (b *bench) reportEvents(w io.Writer, configs []config) {
	events := b.eventFigures(configs)
	if len(events) > 0 {
		fmt.Fprintf(w, "\n# Per edit, by event kind: the webhook server's reconciles (controller_runtime_reconcile_total, by controller) and requests to the API server (rest_client_requests_total, by verb), from its own /metrics before each workload and %s after its edits (later if the guard's queues had not drained); its CPU over the same time, beside the watcher's (a plain typed-informer process on the same kinds), from %s\n\n", afterEdits, b.cpuInstruments())
		fmt.Fprintln(w, "| workload | configuration | edits | reconciles/edit | by controller | API requests/edit | by verb | server CPU ms/edit | watcher CPU ms/edit | server/watcher CPU |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
		for _, f := range events {
			ratio := "-"
			if f.WatcherCPUms > 0 {
				ratio = fmt.Sprintf("%.2f", f.ServerCPUms/f.WatcherCPUms)
			}
			fmt.Fprintf(w, "| %s | %s | %d | %.2f | %s | %.2f | %s | %.3f | %.3f | %s |\n", f.Workload, f.Config, f.Edits,
				f.Reconciles, perKey(f.ReconcilesPerEdit), f.Requests, perKey(f.RequestsPerEdit), f.ServerCPUms, f.WatcherCPUms, ratio)
		}
	}
	byPath, types, diffs := b.ownTimeFigures(configs)
	if len(byPath) == 0 {
		return
	}
	fmt.Fprintf(w, "\n# The webhook servers' own time per call (controller_runtime_webhook_latency_seconds over the measured edits, pooled over rounds and workloads): mean, and p99 only from %d calls, estimated from the histogram's buckets (controller-runtime's are decades: 1 ms, 10 ms, …; interpolated inside the bucket as histogram_quantile does)\n\n", minP99Samples)
	fmt.Fprintln(w, "| configuration | path | calls | mean ms | p99 ms |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, f := range byPath {
		fmt.Fprintf(w, "| %s | %s | %d | %.3f | %s |\n", f.Config, f.Path, f.Calls, f.MeanMS, p99Cell(f.P99MS, f.P99NA))
	}
	for _, f := range types {
		fmt.Fprintf(w, "| %s | all %s | %d | %.3f | %s |\n", f.Config, typeName(f.Type), f.Calls, f.MeanMS, p99Cell(f.P99MS, f.P99NA))
	}
	if len(diffs) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| own time per call | guard calls | floor calls | mean ms | p99 ms |")
		fmt.Fprintln(w, "|---|---|---|---|---|")
		for _, d := range diffs {
			p99 := d.P99NA
			if d.P99MS != nil {
				p99 = fmt.Sprintf("%+.3f", *d.P99MS)
			}
			fmt.Fprintf(w, "| guard − %s, %s | %d | %d | %+.3f | %s |\n", d.To, typeName(d.Type), d.Calls, d.Ref, d.MeanMS, p99)
		}
	}
}
