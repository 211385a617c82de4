package main

import (
	"encoding/csv"
	"io"
	"math"
	"strconv"
	"time"
)

// Sample is one reading of the guard and the API server.
type Sample struct {
	// At is the time since the load started.
	At time.Duration
	// PID is the guard's process id (0: not running).
	PID int
	// RSSBytes is the guard's resident memory (/proc/PID/status VmRSS);
	// RSSAnonBytes and RSSFileBytes its parts (RssAnon: heap, stacks and
	// the runtime's own; RssFile: pages of the mapped binary).
	RSSBytes, RSSAnonBytes, RSSFileBytes float64
	// FDs is the number of the guard's open file descriptors (/proc/PID/fd).
	FDs float64
	// WebhookConns and APIConns are its established TCP connections to its
	// webhook port (from kube-apiserver) and to kube-apiserver
	// (/proc/PID/net/tcp): NaN when unreadable.
	WebhookConns, APIConns float64
	// Goroutines, HeapInuseBytes, GuardRequests and LiveDecisions are read
	// from the guard's metrics endpoint (go_goroutines,
	// go_memstats_heap_inuse_bytes, rest_client_requests_total,
	// rollout_guard_live_decisions_total: decisions made from live reads
	// because one of its watches was down): NaN when it could not be read.
	Goroutines, HeapInuseBytes, GuardRequests, LiveDecisions float64
	// APIRequests is the API server's apiserver_request_total summed over
	// every label, and CRRequests over resource rolloutrevisions, both
	// totalled across API server restarts (Counter); NaN when unreadable.
	APIRequests, CRRequests float64
	// WebhookCalls is the API server's calls to the guard's webhooks
	// (apiserver_admission_webhook_admission_duration_seconds_count),
	// totalled across restarts.
	WebhookCalls float64
	// Edits and PolicedEdits are the edits that succeeded so far, all and
	// policed only; Failed those that failed (any class).
	Edits, PolicedEdits, Failed int
	// Event names what started since the previous sample
	// ("apiserver-restart", "cert-rotation"), "" if nothing.
	Event string
}

// csvHeader are the CSV columns, in order.
var csvHeader = []string{
	"seconds", "guard_pid", "rss_mib", "rss_anon_mib", "rss_file_mib", "fds", "webhook_conns_in", "apiserver_conns_out", "goroutines", "heap_inuse_mib",
	"guard_api_requests", "guard_live_decisions", "apiserver_requests", "apiserver_controllerrevision_requests", "guard_webhook_calls",
	"edits_ok", "policed_edits_ok", "edits_failed", "event",
}

// WriteCSV writes the samples with a header; missing values are empty.
func WriteCSV(w io.Writer, samples []Sample) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	for _, s := range samples {
		row := []string{
			strconv.FormatFloat(s.At.Seconds(), 'f', 1, 64),
			strconv.Itoa(s.PID),
			num(s.RSSBytes/mib, 2),
			num(s.RSSAnonBytes/mib, 2),
			num(s.RSSFileBytes/mib, 2),
			num(s.FDs, 0),
			num(s.WebhookConns, 0),
			num(s.APIConns, 0),
			num(s.Goroutines, 0),
			num(s.HeapInuseBytes/mib, 2),
			num(s.GuardRequests, 0),
			num(s.LiveDecisions, 0),
			num(s.APIRequests, 0),
			num(s.CRRequests, 0),
			num(s.WebhookCalls, 0),
			strconv.Itoa(s.Edits),
			strconv.Itoa(s.PolicedEdits),
			strconv.Itoa(s.Failed),
			s.Event,
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

const mib = 1 << 20

// num formats v with prec decimals, "" for NaN.
func num(v float64, prec int) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// series extracts one series of the samples as points.
func series(samples []Sample, value func(Sample) float64) []Point {
	out := make([]Point, len(samples))
	for i, s := range samples {
		out[i] = Point{At: s.At, Value: value(s)}
	}
	return out
}
