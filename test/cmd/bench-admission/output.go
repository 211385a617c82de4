package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rollout-guard/rollout-guard/test/bench/report"
)

// procs are the processes whose CPU time the report shows.
var procs = []string{"kube-apiserver", "etcd", "webhook", "noop-webhook", "watcher", "bench-admission"}

// report prints the pooled figures, the ratios with their spread, the
// targets, the CPU time per edit and the requests per recorded revision.
func (b *bench) report(configs []config, elapsed time.Duration) {
	w := b.out
	fmt.Fprintf(w, "\n# Pooled over %d rounds (run took %s)\n\n", b.o.rounds, elapsed.Round(time.Second))
	fmt.Fprintf(w, "p99 only from %d edits or more, pooled over rounds; n is the edits behind every percentile.\n\n", minP99Samples)
	fmt.Fprintln(w, "| regime | writers | edit | configuration | n | p50 ms | p90 ms | p99 ms | edits/s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	workloads := orderedWorkloads(configs)
	for _, wl := range workloads {
		for _, cf := range configs {
			c := b.results[cf.name][wl]
			if c == nil {
				continue
			}
			s := summarize(c.lat, c.wall)
			fmt.Fprintf(w, "| %s | %d | %s | %s | %d | %.2f | %.2f | %s | %.1f |\n", wl.regime, wl.writers, wl.edit, cf.name, s.n,
				ms(s.p50), ms(s.p90), p99Text(s), s.throughput)
		}
	}

	fmt.Fprintf(w, "\n# Ratios, pooled (min–max over the %d rounds)\n\n", b.o.rounds)
	fmt.Fprintln(w, "| ratio | n | pooled | min–max | target | |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range b.ratios() {
		if r.NA != "" {
			fmt.Fprintf(w, "| %s | %d | %s | | | |\n", r.Name, r.N, r.NA)
			continue
		}
		target, verdict := "", ""
		if r.Met != nil {
			op := "<="
			if r.AtLeast {
				op = ">="
			}
			target, verdict = fmt.Sprintf("%s %.2f", op, r.Target), "met"
			if !*r.Met {
				verdict = "MISSED"
			}
		}
		spread := fmt.Sprintf("%.3f–%.3f", r.Value.Min, r.Value.Max)
		if r.SpreadRounds == 0 {
			spread = "n/a (no round of " + strconv.Itoa(minP99Samples) + ")"
		}
		fmt.Fprintf(w, "| %s | %d | %.3f | %s | %s | %s |\n", r.Name, r.N, r.Value.Pooled, spread, target, verdict)
	}

	fmt.Fprintf(w, "\n# CPU time per edit (ms) of each process during the measured edits and the %s after them (every configuration alike), from %s\n\n", afterEdits, b.cpuInstruments())
	fmt.Fprintf(w, "| workload | configuration | %s |\n", strings.Join(procs, " | "))
	fmt.Fprintf(w, "|---|---|%s\n", strings.Repeat("---|", len(procs)))
	for _, wl := range workloads {
		for _, cf := range configs {
			c := b.results[cf.name][wl]
			if c == nil || len(c.lat) == 0 {
				continue
			}
			var cells []string
			for _, p := range procs {
				cells = append(cells, fmt.Sprintf("%.3f", ms(c.cpu[p])/float64(len(c.lat))))
			}
			fmt.Fprintf(w, "| %s | %s | %s |\n", wl, cf.name, strings.Join(cells, " | "))
		}
	}

	fmt.Fprintf(w, "\n# Time the API server spent calling webhooks per edit (apiserver_admission_webhook_admission_duration_seconds during the measured edits): mutating (admit) and validating, ms per call and calls per edit; and the webhook server's own time per call (controller_runtime_webhook_latency_seconds), the rest being the API server's and the connection's\n\n")
	fmt.Fprintln(w, "| workload | configuration | mutating ms/call | mutating calls/edit | validating ms/call | validating calls/edit | server's own mutating ms/call | server's own validating ms/call |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, wl := range workloads {
		for _, cf := range configs {
			c := b.results[cf.name][wl]
			if c == nil || len(c.lat) == 0 || len(c.webhooks) == 0 {
				continue
			}
			var cells []string
			for _, typ := range []string{"admit", "validating"} {
				t := c.webhooks[typ]
				perCall := 0.0
				if t.calls > 0 {
					perCall = 1000 * t.seconds / t.calls
				}
				cells = append(cells, fmt.Sprintf("%.3f", perCall), fmt.Sprintf("%.2f", t.calls/float64(len(c.lat))))
			}
			for _, typ := range []string{"admit", "validating"} {
				cell := "-"
				if t := c.server[typ]; t.calls > 0 {
					cell = fmt.Sprintf("%.3f", 1000*t.seconds/t.calls)
				}
				cells = append(cells, cell)
			}
			fmt.Fprintf(w, "| %s | %s | %s |\n", wl, cf.name, strings.Join(cells, " | "))
		}
	}

	b.reportEvents(w, configs)

	for _, cfg := range []string{cfgGuard, cfgNoopRec} {
		edits := b.revisionEdits[cfg]
		if edits == 0 {
			continue
		}
		fmt.Fprintf(w, "\n# RolloutRevision requests, and GETs of the edited kinds, during the %s slices (apiserver_request_total), for %d edits that made a new revision\n\n", cfg, edits)
		fmt.Fprintln(w, "| verb | requests | per recorded revision |")
		fmt.Fprintln(w, "|---|---|---|")
		var total float64
		for _, verb := range sortedKeys(b.revisionReqs[cfg]) {
			v := b.revisionReqs[cfg][verb]
			total += v
			fmt.Fprintf(w, "| %s | %.0f | %.2f |\n", verb, v, v/float64(edits))
		}
		fmt.Fprintf(w, "| all | %.0f | %.2f |\n", total, total/float64(edits))
	}
}

// cpuInstruments says how each process's CPU time was read: one
// instrument for all, or each process's.
func (b *bench) cpuInstruments() string {
	by := map[string][]string{}
	for _, p := range procs {
		in := b.cpu.instrumentOf(p)
		by[in] = append(by[in], p)
	}
	if len(by) == 1 {
		for in := range by {
			if in == instrumentProc {
				return in + " of each process (no writable cgroup)"
			}
			return in + " of a cgroup per process (" + strings.Join(procs, ", ") + ")"
		}
	}
	var parts []string
	for _, in := range sortedKeys(by) {
		parts = append(parts, in+" for "+strings.Join(by[in], ", "))
	}
	return strings.Join(parts, "; ")
}

// admissionSummary is the admission section of bench/summary.json.
type admissionSummary struct {
	Command   string         `json:"command"`
	Started   string         `json:"started"`
	Took      string         `json:"took"`
	Machine   report.Machine `json:"machine"`
	Guard     string         `json:"guard"`
	APIServer string         `json:"kube_apiserver"`
	Rounds    int            `json:"rounds"`
	PaceEdits int            `json:"pace_edits_per_round"`
	PaceRate  float64        `json:"pace_rate"`
	SatEdits  int            `json:"saturation_edits_per_round"`
	Writers   []int          `json:"writers"`
	Watcher   string         `json:"background_watcher_events,omitempty"`
	Workloads []workloadFig  `json:"workloads"`
	// CPUInstrument says how cpu_ms_per_edit was read.
	CPUInstrument string `json:"cpu_instrument,omitempty"`
	// Pool is how many objects of each kind the edits rotated over;
	// Edits and Regimes the workloads run (empty: all).
	Pool    int      `json:"pool"`
	Edits   []string `json:"edits,omitempty"`
	Regimes []string `json:"regimes,omitempty"`
	// MinP99Samples is the fewest samples a p99 is given from.
	MinP99Samples int `json:"min_p99_samples"`
	// FloorRatios are the ratios of the guard to the floor of the design,
	// noop-record (also among Ratios).
	FloorRatios []ratio `json:"guard_vs_noop_record,omitempty"`
	// Events are, per edit, each webhook server's reconciles, API
	// requests and CPU beside the watcher's.
	Events []eventFig `json:"events,omitempty"`
	// OwnTime is each webhook server's own answer time, by path and by
	// type; OwnTimeDiff the guard's minus each no-op floor's, by type.
	OwnTime       []ownTimeFig  `json:"webhook_own_time,omitempty"`
	OwnTimeByType []ownTimeFig  `json:"webhook_own_time_by_type,omitempty"`
	OwnTimeDiff   []ownTimeDiff `json:"webhook_own_time_guard_minus_floor,omitempty"`
	Ratios        []ratio       `json:"ratios"`
	Revisions     *revisionFig  `json:"revision_requests,omitempty"`
	// RecordRevisions is Revisions for the recording floor (noop-record):
	// one create per revision, by construction.
	RecordRevisions *revisionFig `json:"revision_requests_noop_record,omitempty"`
}

// workloadFig is one configuration's figures on one workload.
type workloadFig struct {
	Workload string  `json:"workload"`
	Config   string  `json:"config"`
	N        int     `json:"n"`
	P50ms    float64 `json:"p50_ms"`
	// P99ms is there only from minP99Samples edits; P99NA says so
	// otherwise.
	P99ms   *float64 `json:"p99_ms,omitempty"`
	P99NA   string   `json:"p99_na,omitempty"`
	EditsPS float64  `json:"edits_per_s"`
	// CPUms is each process's CPU time per edit.
	CPUms map[string]float64 `json:"cpu_ms_per_edit"`
	// WebhookMSPerCall is the API server's time per webhook call, by
	// type (admit, validating), for the types it called.
	WebhookMSPerCall map[string]float64 `json:"webhook_ms_per_call,omitempty"`
	// WebhookCallsPerEdit is how many calls of each type an edit made.
	WebhookCallsPerEdit map[string]float64 `json:"webhook_calls_per_edit,omitempty"`
	// ServerMSPerCall is the webhook server's own time per call, by type,
	// as it counts it (controller_runtime_webhook_latency_seconds): the
	// rest of WebhookMSPerCall is the API server's and the connection's.
	ServerMSPerCall map[string]float64 `json:"server_ms_per_call,omitempty"`
}

// revisionFig is the API server's count of RolloutRevision requests
// during the guard's slices.
type revisionFig struct {
	Edits       int                `json:"edits_making_a_revision"`
	Requests    map[string]float64 `json:"requests"`
	PerRevision map[string]float64 `json:"per_revision"`
	Total       float64            `json:"per_revision_all"`
}

// summary is the run as JSON.
func (b *bench) summary(configs []config, m report.Machine, begin time.Time, took time.Duration, events string) admissionSummary {
	s := admissionSummary{
		Command: strings.Join(append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...), " "), Started: begin.UTC().Format(time.RFC3339), Took: took.Round(time.Second).String(),
		Machine: m, Guard: guardVersion(b.env.BinDir), APIServer: apiServerVersion(b.env.BinDir),
		Rounds: b.o.rounds, PaceEdits: b.o.paceEdits, PaceRate: b.o.paceRate, SatEdits: b.o.satEdits, Writers: b.o.writers,
		Watcher: events, Ratios: b.ratios(), CPUInstrument: b.cpuInstruments(),
		Pool: b.o.pool, Edits: b.o.edits, Regimes: b.o.regimes, MinP99Samples: minP99Samples, Events: b.eventFigures(configs),
	}
	for _, r := range s.Ratios {
		if r.Of == cfgGuard && r.To == cfgNoopRec {
			s.FloorRatios = append(s.FloorRatios, r)
		}
	}
	s.OwnTime, s.OwnTimeByType, s.OwnTimeDiff = b.ownTimeFigures(configs)
	for _, wl := range orderedWorkloads(configs) {
		for _, cf := range configs {
			c := b.results[cf.name][wl]
			if c == nil || len(c.lat) == 0 {
				continue
			}
			sm := summarize(c.lat, c.wall)
			fig := workloadFig{Workload: wl.String(), Config: cf.name, N: sm.n, P50ms: report.Round3(ms(sm.p50)),
				EditsPS: report.Round3(sm.throughput), CPUms: map[string]float64{}}
			if sm.n >= minP99Samples {
				fig.P99ms = new(report.Round3(ms(sm.p99)))
			} else {
				fig.P99NA = p99Text(sm)
			}
			for _, p := range procs {
				if t, ok := c.cpu[p]; ok {
					fig.CPUms[p] = report.Round3(ms(t) / float64(sm.n))
				}
			}
			for typ, t := range c.webhooks {
				if t.calls <= 0 {
					continue
				}
				if fig.WebhookMSPerCall == nil {
					fig.WebhookMSPerCall, fig.WebhookCallsPerEdit = map[string]float64{}, map[string]float64{}
				}
				fig.WebhookMSPerCall[typ] = report.Round3(1000 * t.seconds / t.calls)
				fig.WebhookCallsPerEdit[typ] = report.Round3(t.calls / float64(len(c.lat)))
			}
			for typ, t := range c.server {
				if t.calls <= 0 {
					continue
				}
				if fig.ServerMSPerCall == nil {
					fig.ServerMSPerCall = map[string]float64{}
				}
				fig.ServerMSPerCall[typ] = report.Round3(1000 * t.seconds / t.calls)
			}
			s.Workloads = append(s.Workloads, fig)
		}
	}
	s.Revisions = b.revisionFigures(cfgGuard)
	s.RecordRevisions = b.revisionFigures(cfgNoopRec)
	return s
}

// revisionFigures are cfg's RolloutRevision requests per revision, nil
// when cfg made none.
func (b *bench) revisionFigures(cfg string) *revisionFig {
	edits := b.revisionEdits[cfg]
	if edits == 0 {
		return nil
	}
	r := &revisionFig{Edits: edits, Requests: b.revisionReqs[cfg], PerRevision: map[string]float64{}}
	var total float64
	for verb, v := range b.revisionReqs[cfg] {
		total += v
		r.PerRevision[verb] = report.Round3(v / float64(edits))
	}
	r.Total = report.Round3(total / float64(edits))
	return r
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
