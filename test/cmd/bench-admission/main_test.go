package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		// 100 ms down to 1 ms: summarize must sort.
		hundred[i] = ms(100 - i)
	}
	tests := []struct {
		name               string
		lat                []time.Duration
		wall               time.Duration
		p50, p90, p99, avg time.Duration
		throughput         float64
	}{
		{name: "one sample", lat: []time.Duration{ms(7)}, wall: ms(10), p50: ms(7), p90: ms(7), p99: ms(7), avg: ms(7), throughput: 100},
		{name: "nearest rank of 1..100 ms", lat: hundred, wall: time.Second, p50: ms(50), p90: ms(90), p99: ms(99), avg: ms(50) + 500*time.Microsecond, throughput: 100},
		{name: "two samples", lat: []time.Duration{ms(30), ms(10)}, wall: ms(40), p50: ms(10), p90: ms(30), p99: ms(30), avg: ms(20), throughput: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := summarize(tt.lat, tt.wall)
			if s.n != len(tt.lat) || s.p50 != tt.p50 || s.p90 != tt.p90 || s.p99 != tt.p99 || s.mean != tt.avg {
				t.Errorf("summarize = n %d, p50 %s, p90 %s, p99 %s, mean %s; want n %d, p50 %s, p90 %s, p99 %s, mean %s",
					s.n, s.p50, s.p90, s.p99, s.mean, len(tt.lat), tt.p50, tt.p90, tt.p99, tt.avg)
			}
			if s.throughput != tt.throughput {
				t.Errorf("throughput = %v, want %v", s.throughput, tt.throughput)
			}
		})
	}
}

func TestShare(t *testing.T) {
	tests := []struct {
		total, rounds int
		want          []int
	}{
		{total: 2000, rounds: 10, want: []int{200, 200, 200, 200, 200, 200, 200, 200, 200, 200}},
		{total: 10, rounds: 4, want: []int{3, 3, 2, 2}},
		{total: 3, rounds: 3, want: []int{1, 1, 1}},
	}
	for _, tt := range tests {
		sum := 0
		for round, want := range tt.want {
			got := share(tt.total, tt.rounds, round)
			if got != want {
				t.Errorf("share(%d, %d, %d) = %d, want %d", tt.total, tt.rounds, round, got, want)
			}
			sum += got
		}
		if sum != tt.total {
			t.Errorf("shares of %d over %d rounds add up to %d", tt.total, tt.rounds, sum)
		}
	}
}

func TestReadStatOfThisProcess(t *testing.T) {
	cpu := processCPU(nil)
	if _, ok := cpu["bench-admission"]; !ok {
		t.Fatalf("processCPU() = %v, want an entry for this process", cpu)
	}
	_, ppid, comm, ok := readStat(1)
	if !ok || comm == "" || ppid != 0 {
		t.Errorf("readStat(1) = ppid %d, comm %q, ok %v; want ppid 0 and a command name", ppid, comm, ok)
	}
}

// TestCompareSpread: a ratio is pooled over every round's edits, with the
// lowest and highest single round beside it, and judged on the pooled one.
func TestCompareSpread(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	w := workload{regime: regimePace, writers: 1, edit: mdTemplate}
	b := &bench{results: map[string]map[workload]*cell{}}
	for cfg, rounds := range map[string][][]time.Duration{
		cfgNoop:  {{ms(10), ms(10), ms(10)}, {ms(20), ms(20), ms(20)}},
		cfgGuard: {{ms(11), ms(11), ms(11)}, {ms(30), ms(30), ms(30)}},
	} {
		c := b.result(cfg, w)
		for _, lat := range rounds {
			c.lat = append(c.lat, lat...)
			c.wall += time.Second
			c.rounds = append(c.rounds, summarize(lat, time.Second))
		}
	}
	r, err := b.compare("x", cfgGuard, cfgNoop, w, "p50", 1.10, false)
	if err != nil {
		t.Fatal(err)
	}
	// Pooled p50: guard 11 ms of {11,11,11,30,30,30}, noop 10 ms.
	if r.Value.Pooled != 1.1 || r.Value.Min != 1.1 || r.Value.Max != 1.5 {
		t.Errorf("spread = %+v, want pooled 1.1, min 1.1, max 1.5", r.Value)
	}
	if r.Met == nil || !*r.Met {
		t.Errorf("met = %v, want met (1.1 <= 1.10)", r.Met)
	}
	tp, err := b.compare("x", cfgGuard, cfgNoop, w, "edits/s", 0.8, true)
	if err != nil || tp.Value.Pooled != 1 || tp.Met == nil || !*tp.Met {
		t.Errorf("throughput ratio = %+v, %v; want 1, met", tp, err)
	}
	if _, err := b.compare("x", cfgGuard, cfgNone, w, "p50", 0, false); err == nil {
		t.Error("compare against a configuration that did not run: want an error")
	}
}

// TestWorkloadsOrder: the report lists the operator's pace first, then
// saturation by writers.
func TestWorkloadsOrder(t *testing.T) {
	o := options{writers: []int{1, 8}}
	ws := orderedWorkloads([]config{{name: cfgGuard, workloads: append(policedWorkloads(o), bookkeepingWorkloads(o)...)}})
	if ws[0].regime != regimePace || ws[len(ws)-1].writers != 8 {
		t.Errorf("order: first %s, last %s; want pace first and 8 writers last", ws[0], ws[len(ws)-1])
	}
	if got, want := len(ws), 3*len(policedEdits)+len(bookkeepingEdits)-2; got != want {
		t.Errorf("%d workloads, want %d", got, want)
	}
}

// TestOnly: --edits and --regimes restrict the workloads, a bookkeeping
// edit's regime being "bookkeeping".
func TestOnly(t *testing.T) {
	o := options{writers: []int{1, 8}, edits: []string{mdTemplate, kcpTemplate}, regimes: []string{regimePace}}
	ws := append(policedWorkloads(o), bookkeepingWorkloads(o)...)
	if len(ws) != 2 || ws[0].edit != mdTemplate || ws[1].edit != kcpTemplate || ws[0].regime != regimePace {
		t.Errorf("md-template,kcp-template at pace: %v", ws)
	}
	o = options{writers: []int{1}, regimes: []string{regimeBookkeeping}}
	ws = append(policedWorkloads(o), bookkeepingWorkloads(o)...)
	if len(ws) != len(bookkeepingWorkloads(options{})) || len(ws) == 0 {
		t.Errorf("bookkeeping only: %v", ws)
	}
	for _, w := range ws {
		if slices.Contains(policedEdits, w.edit) {
			t.Errorf("bookkeeping only: %s is policed", w)
		}
	}
}

// TestP99OnlyFromAThousand: a p99 ratio is given only when both
// configurations pooled at least minP99Samples edits; its spread only
// from rounds that had as many.
func TestP99OnlyFromAThousand(t *testing.T) {
	w := workload{regime: regimePace, writers: 1, edit: mdTemplate}
	fill := func(b *bench, cfg string, perRound []int, d time.Duration) {
		c := b.result(cfg, w)
		for _, n := range perRound {
			lat := make([]time.Duration, n)
			for i := range lat {
				lat[i] = d
			}
			c.lat = append(c.lat, lat...)
			c.wall += time.Second
			c.rounds = append(c.rounds, summarize(lat, time.Second))
		}
	}
	b := &bench{results: map[string]map[workload]*cell{}}
	fill(b, cfgGuard, []int{400, 400}, 2*time.Millisecond)
	fill(b, cfgNoop, []int{400, 400}, time.Millisecond)
	r, err := b.compare("x", cfgGuard, cfgNoop, w, "p99", 0, false)
	if err != nil || r.NA != "n/a (n=800)" || r.N != 800 {
		t.Errorf("800 edits: %+v, %v; want n/a (n=800)", r, err)
	}
	if got := p99Text(summarize(make([]time.Duration, 999), time.Second)); got != "n/a (n=999)" {
		t.Errorf("p99Text of 999 = %q", got)
	}
	fill(b, cfgGuard, []int{400}, 2*time.Millisecond)
	fill(b, cfgNoop, []int{400}, time.Millisecond)
	r, err = b.compare("x", cfgGuard, cfgNoop, w, "p99", 0, false)
	if err != nil || r.NA != "" || r.N != 1200 || r.Value.Pooled != 2 || r.SpreadRounds != 0 {
		t.Errorf("1200 edits over 3 rounds: %+v, %v; want 2, no round spread", r, err)
	}
}

// TestHistogramQuantile: the p99 of a histogram is interpolated inside
// the bucket that holds its rank, as histogram_quantile does.
func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	h := histogram{count: 1000, sum: 2, buckets: map[float64]float64{0.001: 900, 0.01: 1000, inf: 1000}}
	// Rank 990 is 90 of the 100 observations in (1 ms, 10 ms].
	if got := h.quantile(0.99); math.Abs(got-0.0091) > 1e-9 {
		t.Errorf("p99 = %v, want 0.0091", got)
	}
	if got := h.quantile(0.5); math.Abs(got-0.000555555) > 1e-6 {
		t.Errorf("p50 = %v, want 0.000556", got)
	}
	tail := histogram{count: 100, buckets: map[float64]float64{0.001: 50, 0.01: 90, inf: 100}}
	if got := tail.quantile(0.99); got != 0.01 {
		t.Errorf("p99 in +Inf = %v, want the highest finite bound 0.01", got)
	}
	d := h.minus(histogram{count: 100, sum: 1, buckets: map[float64]float64{0.001: 100, 0.01: 100, inf: 100}})
	if d.count != 900 || d.sum != 1 || d.buckets[0.001] != 800 || d.buckets[inf] != 900 {
		t.Errorf("minus = %+v", d)
	}
}

// TestParseServerMetrics reads a controller-runtime /metrics page.
func TestParseServerMetrics(t *testing.T) {
	page := `# TYPE controller_runtime_webhook_latency_seconds histogram
controller_runtime_webhook_latency_seconds_bucket{webhook="/mutate-x",le="0.001"} 3
controller_runtime_webhook_latency_seconds_bucket{webhook="/mutate-x",le="0.01"} 4
controller_runtime_webhook_latency_seconds_bucket{webhook="/mutate-x",le="+Inf"} 4
controller_runtime_webhook_latency_seconds_sum{webhook="/mutate-x"} 0.006
controller_runtime_webhook_latency_seconds_count{webhook="/mutate-x"} 4
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="history-md",result="success"} 5
controller_runtime_reconcile_total{controller="history-md",result="error"} 1
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="201",host="x",method="POST"} 7
rest_client_requests_total{code="200",host="x",method="GET"} 2
# TYPE workqueue_depth gauge
workqueue_depth{name="history-md"} 2
`
	m, err := parseServerMetrics(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	h := m.latency["/mutate-x"]
	if h.count != 4 || h.sum != 0.006 || h.buckets[0.001] != 3 || h.buckets[0.01] != 4 {
		t.Errorf("latency = %+v", h)
	}
	if m.reconciles["history-md"] != 6 || m.requests["POST"] != 7 || m.requests["GET"] != 2 || m.queued != 2 {
		t.Errorf("reconciles %v, requests %v, queued %v", m.reconciles, m.requests, m.queued)
	}
	byType, _, rec, req := m.since(serverMetrics{})
	if byType["admit"].calls != 4 || rec["history-md"] != 6 || req["POST"] != 7 {
		t.Errorf("since zero: %v %v %v", byType, rec, req)
	}
}
