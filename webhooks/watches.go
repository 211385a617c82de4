package webhooks

import (
	"context"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rollout-guard/rollout-guard/policy"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// Watches follows the guard's watches of the API server at the HTTP level,
// so the guard knows when its caches may be stale.
//
// Why: when kube-apiserver restarts (or the connection to it breaks), every
// informer's watch ends and client-go's reflectors reconnect with a backoff
// that grows to 30 s, jittered up to a minute, and cannot be configured.
// Meanwhile the caches hold the world as it was before the break, and a
// change the API server accepted in that window (a new worker pool three
// minors behind, say) is invisible to a cached read: an unsafe upgrade would
// be judged safe. Watches tells the guard that a watch is down, and
// FreshPolicy then reads live until every watch is back.
//
// It tracks open watch responses per URL path (one per resource the cache
// watches): a resource is lost from the moment its last open watch ends
// (its body reports an error or end of stream, or is closed) until a new
// watch of it is answered with 200. A watch that never opened (a kind the
// guard may not read, or one before its first sync, which readiness
// covers) is not counted as lost. Between two watches of the normal
// reconnect cycle (the API server ends each watch after a few minutes) the
// resource is lost for the milliseconds the reflector takes to reconnect,
// which only sends the few admissions of that moment to live reads.
type Watches struct {
	mu   sync.Mutex
	open map[string]int
	lost map[string]time.Time
	now  func() time.Time
}

// NewWatches returns a tracker with no watch seen yet.
func NewWatches() *Watches {
	return &Watches{open: map[string]int{}, lost: map[string]time.Time{}, now: time.Now}
}

// Wrap wraps the transport of the guard's API client (rest.Config.Wrap), so
// that watch requests and the end of their responses are seen.
func (w *Watches) Wrap(rt http.RoundTripper) http.RoundTripper {
	return watchTracker{next: rt, watches: w}
}

// Lost returns the resources (URL paths) whose watch is down and since
// when, sorted; empty when every watch that ever opened is open.
func (w *Watches) Lost() []LostWatch {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]LostWatch, 0, len(w.lost))
	for path, since := range w.lost {
		out = append(out, LostWatch{Path: path, Since: since})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// LostWatch is a resource whose watch is down.
type LostWatch struct {
	// Path is the URL path of the watched resource, e.g.
	// /apis/cluster.x-k8s.io/v1beta2/machines.
	Path string
	// Since is when its last open watch ended.
	Since time.Time
}

// opened notes a watch of path answered with 200.
func (w *Watches) opened(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open[path]++
	delete(w.lost, path)
}

// closed notes the end of a watch of path.
func (w *Watches) closed(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open[path] > 0 {
		w.open[path]--
	}
	if w.open[path] == 0 {
		if _, already := w.lost[path]; !already {
			w.lost[path] = w.now()
		}
	}
}

// watchTracker is the RoundTripper that reports watches to Watches.
type watchTracker struct {
	next    http.RoundTripper
	watches *Watches
}

// RoundTrip passes the request on, and for a watch answered with 200 wraps
// the body to see its end.
func (t watchTracker) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || !isWatch(req) {
		return resp, err
	}
	path := req.URL.Path
	t.watches.opened(path)
	resp.Body = &watchBody{ReadCloser: resp.Body, end: func() { t.watches.closed(path) }}
	return resp, nil
}

// isWatch says whether req is a watch (?watch=true or ?watch=1).
func isWatch(req *http.Request) bool {
	if req.Method != http.MethodGet {
		return false
	}
	v := req.URL.Query().Get("watch")
	return v == "true" || v == "1"
}

// watchBody calls end once, at the first read error (end of stream
// included) or at Close, whichever comes first.
type watchBody struct {
	io.ReadCloser
	once sync.Once
	end  func()
}

// Read reads from the stream; an error ends the watch.
func (b *watchBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.end)
	}
	return n, err
}

// Close closes the stream and ends the watch.
func (b *watchBody) Close() error {
	b.once.Do(b.end)
	return b.ReadCloser.Close()
}

// FreshPolicy judges with Cached (the guard's informers) while every watch
// is up, and with Live (direct reads from the API server) while one is
// down, so a change the caches have not seen yet cannot make an unsafe edit
// look safe (see Watches).
type FreshPolicy struct {
	// Cached reads the guard's caches.
	Cached policy.Policy
	// Live reads the API server.
	Live policy.Policy
	// Watches says whether the caches may be stale.
	Watches *Watches
}

// Decide judges with the live policy while a watch is down, else with the
// cached one.
// RevertedRun asks Live or Cached, as Decide does.
func (f FreshPolicy) RevertedRun(ctx context.Context, oldKCP, newKCP *controlplanev1.KubeadmControlPlane) (*revisions.HighestRun, error) {
	if len(f.Watches.Lost()) > 0 {
		return f.Live.RevertedRun(ctx, oldKCP, newKCP)
	}
	return f.Cached.RevertedRun(ctx, oldKCP, newKCP)
}

func (f FreshPolicy) Decide(ctx context.Context, oldObj, newObj client.Object) (skew.Decision, []string, error) {
	if lost := f.Watches.Lost(); len(lost) > 0 {
		countLiveDecision()
		log.FromContext(ctx).V(1).Info("a watch is down; judging from live reads", "resource", lost[0].Path, "since", lost[0].Since, "lost", len(lost))
		return f.Live.Decide(ctx, oldObj, newObj)
	}
	return f.Cached.Decide(ctx, oldObj, newObj)
}
