package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/bench/report"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// Regimes: how the edits are sent.
const (
	// regimePace is an operator's pace: one writer at a fixed rate well
	// below what the API server can take (--pace-rate), so that each edit
	// meets an idle system, as most edits in a management cluster do.
	regimePace = "pace"
	// regimeSat is saturation: every writer sends its next edit as soon as
	// the last one is answered, as a GitOps sync of many objects does.
	regimeSat = "saturation"
	// regimeBookkeeping names, for --regimes, the bookkeeping workloads
	// (which run at saturation, one writer).
	regimeBookkeeping = "bookkeeping"
)

// Edit kinds. Template, version and label edits are the policed regimes'
// (a template edit changes the infrastructure template, selected by the
// guard's mutating webhook only; a version edit is a patch-release bump,
// selected by its validating and mutating webhooks; a label edit by
// neither). Label, annotation, status and replicas edits, and Machine
// status updates, are the bookkeeping Cluster API's controllers do all
// day, which the guard's matchConditions leave out.
const (
	mdTemplate    = "md-template"
	mdVersion     = "md-version"
	mdLabel       = "md-label"
	mdAnnotation  = "md-annotation"
	mdStatus      = "md-status"
	mdReplicas    = "md-replicas"
	kcpTemplate   = "kcp-template"
	kcpVersion    = "kcp-version"
	kcpLabel      = "kcp-label"
	kcpAnnotation = "kcp-annotation"
	kcpStatus     = "kcp-status"
	kcpReplicas   = "kcp-replicas"
	// machineStatus is a status update of a worker Machine (a condition's
	// message and time), the largest stream of events in a real
	// management cluster.
	machineStatus = "machine-status"
)

var (
	policedEdits     = []string{mdTemplate, mdVersion, mdLabel, kcpTemplate, kcpVersion, kcpLabel}
	bookkeepingEdits = []string{mdLabel, mdAnnotation, mdStatus, mdReplicas, kcpLabel, kcpAnnotation, kcpStatus, kcpReplicas, machineStatus}
)

// makesRevision tells the edits that give the guard a new revision to
// record.
func makesRevision(edit string) bool {
	return strings.HasSuffix(edit, "-template") || strings.HasSuffix(edit, "-version")
}

// workload is one timed kind of load: a regime, its writers and an edit.
type workload struct {
	regime  string
	writers int
	edit    string
}

func (w workload) String() string {
	return fmt.Sprintf("regime=%s/writers=%d/edit=%s", w.regime, w.writers, w.edit)
}

// count is the number of edits of w in one round.
func (w workload) count(o options) int {
	if w.regime == regimePace {
		return o.paceEdits
	}
	return o.satEdits
}

// policedWorkloads are the policed edits in both regimes: at pace with one
// writer, and at saturation with each count of writers.
func policedWorkloads(o options) []workload {
	var out []workload
	for _, e := range policedEdits {
		out = append(out, workload{regime: regimePace, writers: 1, edit: e})
	}
	for _, n := range o.writers {
		for _, e := range policedEdits {
			out = append(out, workload{regime: regimeSat, writers: n, edit: e})
		}
	}
	return o.only(out)
}

// only keeps the workloads of --edits and --regimes (a bookkeeping edit's
// regime being regimeBookkeeping).
func (o options) only(ws []workload) []workload {
	return slices.DeleteFunc(slices.Clone(ws), func(w workload) bool {
		if o.edits != nil && !slices.Contains(o.edits, w.edit) {
			return true
		}
		regime := w.regime
		if !slices.Contains(policedEdits, w.edit) {
			regime = regimeBookkeeping
		}
		return o.regimes != nil && !slices.Contains(o.regimes, regime)
	})
}

// bookkeepingWorkloads are the bookkeeping edits at saturation, one writer
// (where a cost per edit shows most), but for label edits, which the
// policed workloads have already.
func bookkeepingWorkloads(o options) []workload {
	var out []workload
	for _, e := range bookkeepingEdits {
		if !slices.Contains(policedEdits, e) {
			out = append(out, workload{regime: regimeSat, writers: 1, edit: e})
		}
	}
	return o.only(out)
}

// cell is what one configuration's workload gave over the run.
type cell struct {
	lat  []time.Duration
	wall time.Duration
	cpu  map[string]time.Duration
	// webhooks is the time the API server spent calling the webhooks
	// during the measured edits, by type (admit, validating).
	webhooks map[string]webhookTime
	// server is the time the webhook server itself took to answer those
	// calls, by type, as it counts it (framework.WebhookLatencyMetric).
	server map[string]webhookTime
	// latency is the webhook server's histogram of those answer times,
	// by path.
	latency map[string]histogram
	// reconciles are the webhook server's reconciles during the edits
	// (and until its queues drained), by controller; requests its
	// requests to the API server, by verb.
	reconciles, requests map[string]float64
	// rounds are the figures of each round, in order.
	rounds []summary
}

// result returns the cell of cfg and w, made on first use.
func (b *bench) result(cfg string, w workload) *cell {
	if b.results[cfg] == nil {
		b.results[cfg] = map[workload]*cell{}
	}
	c := b.results[cfg][w]
	if c == nil {
		c = &cell{cpu: map[string]time.Duration{}, webhooks: map[string]webhookTime{}, server: map[string]webhookTime{},
			latency: map[string]histogram{}, reconciles: map[string]float64{}, requests: map[string]float64{}}
		b.results[cfg][w] = c
	}
	return c
}

// afterEdits is the pause after a workload's edits before its CPU time
// and counts are read: the guard's reconcilers catch up meanwhile.
const afterEdits = 300 * time.Millisecond

// runSlice installs cf, checks it took effect, runs every workload of cf
// once, and removes cf again.
func (b *bench) runSlice(ctx context.Context, round int, cf config) error {
	if err := cf.install(ctx); err != nil {
		return fmt.Errorf("installing: %w", err)
	}
	if err := b.confirm(ctx, cf); err != nil {
		return err
	}
	// A guard just started records the live revision of every object its
	// reconciler has not seen yet (edited in the other configurations'
	// slices); let that settle, in every configuration alike.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.o.settle):
	}
	// With many objects that can take longer: the guard's slice starts
	// once its queues are empty (at most a minute).
	if cf.name == cfgGuard {
		if _, err := b.drain(ctx, cf, time.Minute); err != nil {
			return err
		}
	}
	var before map[string]float64
	records := cf.name == cfgGuard || cf.name == cfgNoopRec
	if records {
		var err error
		if before, err = b.revisionRequests(ctx); err != nil {
			return err
		}
	}
	var profiled []chan error
	for _, w := range cf.workloads {
		if b.o.profileDir != "" && round == b.o.rounds-1 && w.regime == regimeSat && profiled == nil {
			profiled = append(profiled, b.profileAPIServer(ctx, cf.name))
			if cf.name == cfgGuard && b.guardPprof != "" {
				profiled = append(profiled, b.profileGuard(ctx))
			}
		}
		warm := workload{regime: regimeSat, writers: 1, edit: w.edit}
		if _, _, err := b.timeWorkload(ctx, warm, b.o.warmup); err != nil {
			return fmt.Errorf("warming up %s: %w", w, err)
		}
		n := w.count(b.o)
		calls0, err := b.webhookTimes(ctx)
		if err != nil {
			return err
		}
		served0, err := b.serverNow(ctx, cf)
		if err != nil {
			return err
		}
		cpu0 := b.cpu.read(b.procNames())
		lat, wall, err := b.timeWorkload(ctx, w, n)
		if err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
		// The guard's reconcilers work on the edits' events after the
		// edits: count that work with them. Every configuration waits
		// alike, and nothing is scraped before the CPU time is read (a
		// scrape costs the server CPU).
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(afterEdits):
		}
		cpu1 := b.cpu.read(b.procNames())
		calls1, err := b.webhookTimes(ctx)
		if err != nil {
			return err
		}
		served1, err := b.serverNow(ctx, cf)
		if err != nil {
			return err
		}
		if served1.queued > 0 {
			if served1, err = b.drain(ctx, cf, 5*time.Second); err != nil {
				return err
			}
		}
		c := b.result(cf.name, w)
		for typ, t := range calls1 {
			c.webhooks[typ] = c.webhooks[typ].add(t.minus(calls0[typ]))
		}
		byType, latency, reconciles, requests := served1.since(served0)
		for typ, t := range byType {
			c.server[typ] = c.server[typ].add(t)
		}
		for path, h := range latency {
			c.latency[path] = c.latency[path].add(h)
		}
		for k, v := range reconciles {
			c.reconciles[k] += v
		}
		for k, v := range requests {
			c.requests[k] += v
		}
		c.lat = append(c.lat, lat...)
		c.wall += wall
		for proc, t := range cpu1 {
			// A process that started during the slice counts from zero.
			c.cpu[proc] += t - cpu0[proc]
		}
		s := summarize(lat, wall)
		c.rounds = append(c.rounds, s)
		if records && makesRevision(w.edit) {
			b.revisionEdits[cf.name] += b.o.warmup + n
		}
		// A round's p99 is printed only from minP99Samples edits.
		p99 := ""
		if s.n >= minP99Samples {
			p99 = fmt.Sprintf(" %d p99-ns", s.p99.Nanoseconds())
		}
		fmt.Fprintf(b.out, "BenchmarkAdmission/%s/config=%s %d %d ns/op %d p50-ns%s %.1f edits/s\n",
			w, cf.name, len(lat), s.mean.Nanoseconds(), s.p50.Nanoseconds(), p99, s.throughput)
	}
	for _, done := range profiled {
		if err := <-done; err != nil {
			return err
		}
	}
	if records {
		// The guard's reconciler records and prunes right after the edits
		// it saw; count that work too (the recording floor, the same
		// wait, has none).
		time.Sleep(2 * time.Second)
		after, err := b.revisionRequests(ctx)
		if err != nil {
			return err
		}
		if b.revisionReqs[cf.name] == nil {
			b.revisionReqs[cf.name] = map[string]float64{}
		}
		for verb, v := range after {
			b.revisionReqs[cf.name][verb] += v - before[verb]
		}
	}
	if err := cf.uninstall(ctx); err != nil {
		return fmt.Errorf("uninstalling: %w", err)
	}
	return nil
}

// timeWorkload makes n edits of w: its writers share them and the pool
// of objects of the edit's kind (--pool; each object belongs to one
// writer, so that no two writers race on an object, and each writer edits
// its objects in turn, so that no object is edited back to back while
// the writer has another); at pace each writer waits for its next slot.
// It returns the latency of every edit and the wall time of all.
func (b *bench) timeWorkload(ctx context.Context, w workload, n int) ([]time.Duration, time.Duration, error) {
	objs := b.mds
	switch {
	case strings.HasPrefix(w.edit, "kcp-"):
		objs = b.kcps
	case strings.HasPrefix(w.edit, "machine-"):
		objs = b.machines
	}
	objs = objs[:min(b.o.pool, len(objs))]
	// Each workload goes on where the last one of its kind stopped, so
	// that every object of the pool is edited about as often.
	kind, _, _ := strings.Cut(w.edit, "-")
	b.seqMu.Lock()
	turn := b.turn[kind]
	b.turn[kind] += n
	b.seqMu.Unlock()
	writers := max(1, min(w.writers, len(objs), n))
	var interval time.Duration
	if w.regime == regimePace {
		interval = time.Duration(float64(time.Second) / b.o.paceRate)
	}
	var (
		mu       sync.Mutex
		lat      = make([]time.Duration, 0, n)
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for wi := range writers {
		var mine []types.NamespacedName
		for i, key := range objs {
			if i%writers == wi {
				mine = append(mine, key)
			}
		}
		count := share(n, writers, wi)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range count {
				if interval > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(time.Until(start.Add(time.Duration(i) * interval))):
					}
				}
				key := mine[(turn/writers+i)%len(mine)]
				obj, patch, status := b.editOf(w.edit, key)
				t0 := time.Now()
				var err error
				if status {
					err = b.c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
				} else {
					err = b.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
				}
				d := time.Since(t0)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("edit %s of %s (%s): %w", w.edit, key, patch, err)
				}
				lat = append(lat, d)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return lat, time.Since(start), firstErr
}

// share is writer's part of total edits split over writers.
func share(total, writers, writer int) int {
	n := total / writers
	if writer < total%writers {
		n++
	}
	return n
}

// editOf returns the object to patch, the merge patch of one edit of kind
// edit on key, and whether it goes to the status subresource. Every edit
// changes the object (a counter per object), so none is a no-op the API
// server would skip; template and version edits make new content every
// time, so each is a new revision for the guard.
func (b *bench) editOf(edit string, key types.NamespacedName) (client.Object, []byte, bool) {
	b.seqMu.Lock()
	b.patchSeq[key]++
	seq := b.patchSeq[key]
	b.seqMu.Unlock()
	var obj client.Object = &clusterv1.MachineDeployment{}
	switch {
	case strings.HasPrefix(edit, "kcp-"):
		obj = &controlplanev1.KubeadmControlPlane{}
	case strings.HasPrefix(edit, "machine-"):
		obj = &clusterv1.Machine{}
	}
	obj.SetNamespace(key.Namespace)
	obj.SetName(key.Name)
	switch edit {
	case mdTemplate:
		return obj, fmt.Appendf(nil, `{"spec":{"template":{"spec":{"infrastructureRef":{"name":"%s-t%d"}}}}}`, key.Name, seq), false
	case kcpTemplate:
		return obj, fmt.Appendf(nil, `{"spec":{"machineTemplate":{"spec":{"infrastructureRef":{"name":"%s-t%d"}}}}}`, key.Name, seq), false
	case mdVersion:
		// Below the control planes' v1.36: the skew allows it.
		return obj, fmt.Appendf(nil, `{"spec":{"template":{"spec":{"version":"v1.35.%d"}}}}`, seq), false
	case kcpVersion:
		return obj, fmt.Appendf(nil, `{"spec":{"version":"v1.36.%d"}}`, seq), false
	case mdLabel, kcpLabel:
		return obj, fmt.Appendf(nil, `{"metadata":{"labels":{"rollout-bench/seq":"%d"}}}`, seq), false
	case mdAnnotation, kcpAnnotation:
		return obj, fmt.Appendf(nil, `{"metadata":{"annotations":{"rollout-bench/seq":"%d"}}}`, seq), false
	case machineStatus:
		// The Ready condition's message and time change, as a Machine's
		// controller writes them on every node heartbeat it notices.
		at := time.Unix(1_800_000_000+int64(seq), 0).UTC().Format(time.RFC3339)
		return obj, fmt.Appendf(nil, `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Ready","message":"node heartbeat %d","lastTransitionTime":"%s"}]}}`, seq, at), true
	case mdReplicas, kcpReplicas:
		// 3 and 5 in turn: odd, as a control plane's must be.
		return obj, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, 3+2*(seq%2)), false
	default: // mdStatus, kcpStatus
		return obj, fmt.Appendf(nil, `{"status":{"replicas":%d}}`, seq), true
	}
}

// revisionRequests reads the API server's count of RolloutRevision
// requests, by verb, and of GETs of the edited kinds (as "GET
// kubeadmcontrolplanes" and "GET machinedeployments"): the guard's reads
// of an object whose stored copy its cache had not seen yet (the check of
// a request's old object, the reconciler's read of a whole object). The
// workloads write with patches and read nothing, so every such GET in a
// guard's slice is the guard's.
func (b *bench) revisionRequests(ctx context.Context) (map[string]float64, error) {
	samples, err := framework.APIServerMetrics(ctx, b.cfg)
	if err != nil {
		return nil, err
	}
	out := framework.SumBy(samples, "apiserver_request_total", map[string]string{"resource": "rolloutrevisions"}, "verb")
	for _, resource := range []string{"kubeadmcontrolplanes", "machinedeployments"} {
		for verb, v := range framework.SumBy(samples, "apiserver_request_total", map[string]string{"resource": resource, "verb": "GET"}, "verb") {
			out[verb+" "+resource] += v
		}
	}
	return out, nil
}

// errNoRounds is returned when a ratio has no round to compare.
var errNoRounds = errors.New("no round to compare")

// ratio is a comparison of two configurations on one workload.
type ratio struct {
	Name     string  `json:"name"`
	Workload string  `json:"workload"`
	Metric   string  `json:"metric"`
	Of       string  `json:"of"`
	To       string  `json:"to"`
	Target   float64 `json:"target,omitempty"`
	// AtLeast is true when the target is a floor (throughput), false
	// when it is a ceiling (latency).
	AtLeast bool `json:"at_least,omitempty"`
	// Value is the ratio pooled over every round, with the lowest and
	// highest single round.
	Value report.Spread `json:"value"`
	// Met is whether the pooled ratio meets the target.
	Met *bool `json:"met,omitempty"`
	// N is the smaller of the two configurations' pooled samples.
	N int `json:"n"`
	// SpreadRounds is how many rounds Value's min and max come from:
	// every round, but for p99, only rounds of minP99Samples edits in
	// both configurations (none: min and max are the pooled value).
	SpreadRounds int `json:"spread_rounds"`
	// NA says why there is no value: a p99 of fewer than minP99Samples
	// pooled edits, "n/a (n=…)".
	NA string `json:"na,omitempty"`
}

// compare computes metric of cfg over base on w, pooled and per round.
func (b *bench) compare(name, cfg, base string, w workload, metric string, target float64, atLeast bool) (ratio, error) {
	a, c := b.results[cfg][w], b.results[base][w]
	if a == nil || c == nil || len(a.rounds) == 0 || len(c.rounds) == 0 {
		return ratio{}, errNoRounds
	}
	pick := func(s summary) float64 {
		switch metric {
		case "p50":
			return float64(s.p50)
		case "p99":
			return float64(s.p99)
		default: // edits/s
			return s.throughput
		}
	}
	var per []float64
	for i := range min(len(a.rounds), len(c.rounds)) {
		if metric == "p99" && min(a.rounds[i].n, c.rounds[i].n) < minP99Samples {
			continue
		}
		per = append(per, pick(a.rounds[i])/pick(c.rounds[i]))
	}
	sa, sc := summarize(a.lat, a.wall), summarize(c.lat, c.wall)
	r := ratio{Name: name, Workload: w.String(), Metric: metric, Of: cfg, To: base, Target: target, AtLeast: atLeast,
		N: min(sa.n, sc.n), SpreadRounds: len(per)}
	if metric == "p99" && r.N < minP99Samples {
		r.NA = fmt.Sprintf("n/a (n=%d)", r.N)
		return r, nil
	}
	pooled := pick(sa) / pick(sc)
	if len(per) == 0 {
		per = []float64{pooled}
	}
	r.Value = report.NewSpread(pooled, per)
	if target > 0 {
		met := pooled <= target
		if atLeast {
			met = pooled >= target
		}
		r.Met = &met
	}
	return r, nil
}

// ratios are every comparison the report makes: the targets and
// the ratios that explain them.
func (b *bench) ratios() []ratio {
	var out []ratio
	add := func(name, cfg, base string, w workload, metric string, target float64, atLeast bool) {
		if r, err := b.compare(name, cfg, base, w, metric, target, atLeast); err == nil {
			out = append(out, r)
		}
	}
	for _, e := range policedEdits {
		w := workload{regime: regimePace, writers: 1, edit: e}
		add("operator pace "+e+": guard/noop p50", cfgGuard, cfgNoop, w, "p50", 1.10, false)
		add("operator pace "+e+": guard/noop p99", cfgGuard, cfgNoop, w, "p99", 1.10, false)
	}
	for _, n := range b.o.writers {
		for _, e := range policedEdits {
			w := workload{regime: regimeSat, writers: n, edit: e}
			add(fmt.Sprintf("saturation %d writers %s: guard/noop edits/s", n, e), cfgGuard, cfgNoop, w, "edits/s", 0.8, true)
			add(fmt.Sprintf("saturation %d writers %s: guard/noop p50", n, e), cfgGuard, cfgNoop, w, "p50", 0, false)
			add(fmt.Sprintf("saturation %d writers %s: guard/noop p99", n, e), cfgGuard, cfgNoop, w, "p99", 0, false)
		}
	}
	for _, e := range bookkeepingEdits {
		w := workload{regime: regimeSat, writers: 1, edit: e}
		add("bookkeeping "+e+": guard/none p50", cfgGuard, cfgNone, w, "p50", 1.02, false)
	}
	// The guard next to a floor that stamps as it does: its own work,
	// apart from the API server's work on any stamped edit.
	for _, e := range policedEdits {
		w := workload{regime: regimePace, writers: 1, edit: e}
		add("operator pace "+e+": guard/noop-stamp p50", cfgGuard, cfgNoopStamp, w, "p50", 0, false)
		add("operator pace "+e+": noop-stamp/noop p50", cfgNoopStamp, cfgNoop, w, "p50", 0, false)
	}
	// The guard next to the floor of the design (noop-record): a webhook
	// that stamps and creates one RolloutRevision per new revision, as the
	// guard must; what is left is the guard's own cost.
	for _, e := range policedEdits {
		w := workload{regime: regimePace, writers: 1, edit: e}
		add("operator pace "+e+": guard/noop-record p50", cfgGuard, cfgNoopRec, w, "p50", 0, false)
		add("operator pace "+e+": guard/noop-record p99", cfgGuard, cfgNoopRec, w, "p99", 0, false)
		add("operator pace "+e+": noop-record/noop p50", cfgNoopRec, cfgNoop, w, "p50", 0, false)
	}
	for _, n := range b.o.writers {
		for _, e := range policedEdits {
			w := workload{regime: regimeSat, writers: n, edit: e}
			add(fmt.Sprintf("saturation %d writers %s: guard/noop-record edits/s", n, e), cfgGuard, cfgNoopRec, w, "edits/s", 0, true)
			add(fmt.Sprintf("saturation %d writers %s: guard/noop-record p50", n, e), cfgGuard, cfgNoopRec, w, "p50", 0, false)
		}
	}
	// The floor itself, next to nothing and next to a policy in the API
	// server.
	for _, e := range policedEdits {
		w := workload{regime: regimePace, writers: 1, edit: e}
		add("operator pace "+e+": noop/none p50", cfgNoop, cfgNone, w, "p50", 0, false)
		add("operator pace "+e+": vap/none p50", cfgVAP, cfgNone, w, "p50", 0, false)
	}
	return out
}

// orderedWorkloads are the workloads of every configuration run, policed
// ones first, in a stable order.
func orderedWorkloads(configs []config) []workload {
	seen := map[workload]bool{}
	var out []workload
	for _, cf := range configs {
		for _, w := range cf.workloads {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b workload) int {
		if a.regime != b.regime {
			if a.regime == regimePace {
				return -1
			}
			return 1
		}
		if a.writers != b.writers {
			return a.writers - b.writers
		}
		return slices.Index(append(slices.Clone(policedEdits), bookkeepingEdits...), a.edit) -
			slices.Index(append(slices.Clone(policedEdits), bookkeepingEdits...), b.edit)
	})
	return out
}

// configNames are the names of configs.
func configNames(configs []config) []string {
	var out []string
	for _, c := range configs {
		out = append(out, c.name)
	}
	return out
}

// sortedKeys is maps.Keys, sorted.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// profileSeconds is the length of the API server's CPU profile: about the
// saturation workloads of one slice on this kind of machine.
const profileSeconds = 15

// profileAPIServer takes a CPU profile of kube-apiserver (its
// /debug/pprof, open to the admin) over the next profileSeconds, written
// to apiserver-CONFIG.pprof in --profile-dir; the channel gives the
// outcome once written. It shows where the API server's time goes under
// each configuration's saturation load (go tool pprof -top).
func (b *bench) profileAPIServer(ctx context.Context, cfg string) chan error {
	done := make(chan error, 1)
	go func() {
		cs, err := kubernetes.NewForConfig(b.cfg)
		if err != nil {
			done <- fmt.Errorf("profiling the API server: %w", err)
			return
		}
		raw, err := cs.RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", fmt.Sprint(profileSeconds)).
			Timeout(2 * profileSeconds * time.Second).DoRaw(ctx)
		if err != nil {
			done <- fmt.Errorf("profiling the API server: %w", err)
			return
		}
		path := filepath.Join(b.o.profileDir, "apiserver-"+cfg+".pprof")
		if err := os.MkdirAll(b.o.profileDir, 0o755); err != nil {
			done <- fmt.Errorf("creating %s: %w", b.o.profileDir, err)
			return
		}
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			done <- fmt.Errorf("writing the API server's profile: %w", err)
			return
		}
		fmt.Fprintf(b.out, "# kube-apiserver CPU profile under %s, %d s from its first saturation workload of the last round: %s\n", cfg, profileSeconds, path)
		done <- nil
	}()
	return done
}

// profileGuard takes a CPU profile of the guard (its --pprof-bind-address)
// over the next profileSeconds, as profileAPIServer does of the API
// server, written to guard-cpu.pprof in --profile-dir: where the guard's
// own time goes under the saturation load (go tool pprof -top).
func (b *bench) profileGuard(ctx context.Context) chan error {
	path := filepath.Join(b.o.profileDir, "guard-cpu.pprof")
	profiled := framework.StartCPUProfile(ctx, b.guardPprof, profileSeconds, path)
	done := make(chan error, 1)
	go func() {
		if err := <-profiled; err != nil {
			done <- fmt.Errorf("profiling the guard: %w", err)
			return
		}
		fmt.Fprintf(b.out, "# guard CPU profile, %d s from its first saturation workload of the last round: %s\n", profileSeconds, path)
		done <- nil
	}()
	return done
}
