package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// watchSource is one kind of object status reads: listed once
// (--watch=false), or listed and watched.
type watchSource struct {
	// kind and gr name the source in errors ("Machine",
	// machines.cluster.x-k8s.io).
	kind string
	GR   schema.GroupResource
	// example is an empty object of the source's type; newList an empty
	// list of it.
	example client.Object
	newList func() client.ObjectList
	// opts select the source's objects: its namespace and a label or
	// field selector.
	opts []client.ListOption
	// keep says whether an object belongs to the source; what a watch
	// delivers is checked again, whatever its selector.
	keep func(client.Object) bool
}

// watcher keeps the latest objects of its sources. Watching, each source is
// listed and watched by a client-go Reflector: a watch that ends is resumed
// from the last resourceVersion seen, one the API server can no longer
// resume (410 Gone) is resumed by listing and watching again. A failure the
// API server recovers from by itself (it is restarting, unavailable,
// overloaded) is noted once on stderr and retried every second; any other
// failure ends the watch (failed).
type watcher struct {
	cl        client.WithWatch
	sources   []watchSource
	namespace string
	// purpose names the command in errors ("status MachineDeployment ns/md-0").
	purpose string
	// notes is where a lost API server is noted (stderr).
	notes io.Writer

	mu      sync.Mutex
	objects []map[string]client.Object
	synced  []bool
	outage  Outage
	// changed delivers a signal after every change of the objects, once
	// the receiver takes it; failed the first failure that ends the watch.
	changed chan struct{}
	failed  chan error
	// stop ends the signals when the watch ends.
	stop <-chan struct{}
}

// newWatcher returns a watcher of sources in namespace.
func newWatcher(cl client.WithWatch, namespace, purpose string, notes io.Writer, sources []watchSource) *watcher {
	w := &watcher{cl: cl, sources: sources, namespace: namespace, purpose: purpose, notes: notes,
		objects: make([]map[string]client.Object, len(sources)), synced: make([]bool, len(sources)),
		changed: make(chan struct{}), failed: make(chan error, 1)}
	for i := range w.objects {
		w.objects[i] = map[string]client.Object{}
	}
	return w
}

// seed records what source i holds, read already.
func (w *watcher) seed(i int, objs ...client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.replaceLocked(i, objs)
}

// list reads every source not seeded, once.
func (w *watcher) list(ctx context.Context) error {
	for i, src := range w.sources {
		if w.isSynced(i) {
			continue
		}
		list := src.newList()
		if err := w.cl.List(ctx, list, src.opts...); err != nil {
			return w.call(i, "list").Explain(err)
		}
		items, err := core.Extract(list)
		if err != nil {
			return fmt.Errorf("cannot %s: reading the list of %s: %w", w.purpose, src.GR, err)
		}
		w.seed(i, items...)
	}
	return nil
}

// run lists and watches every source until ctx ends.
func (w *watcher) run(ctx context.Context) {
	w.stop = ctx.Done()
	ctx = klog.NewContext(ctx, logr.Discard()) // failures are the watcher's to report, once
	for i, src := range w.sources {
		r := cache.NewReflectorWithOptions(w.listWatch(i), src.example, sourceStore{w: w, i: i}, cache.ReflectorOptions{
			Name:    "status " + src.kind,
			Backoff: &wait.Backoff{Duration: TransientRetryInterval},
		})
		go r.RunWithContext(ctx)
	}
}

// isSynced reports whether source i has been listed (or seeded).
func (w *watcher) isSynced(i int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.synced[i]
}

// allSynced reports whether every source has been listed.
func (w *watcher) allSynced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.synced {
		if !s {
			return false
		}
	}
	return true
}

// has reports whether the watcher has source i (a source listed last may
// be left out, see topologyMachinePools).
func (w *watcher) has(i int) bool { return i < len(w.sources) }

// of returns the objects of source i, by namespace and name.
func (w *watcher) of(i int) []client.Object {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]client.Object, 0, len(w.objects[i]))
	for _, o := range w.objects[i] {
		out = append(out, o)
	}
	sort.Slice(out, func(a, b int) bool { return objectKey(out[a]) < objectKey(out[b]) })
	return out
}

// objectKey is where the watcher keeps an object: its namespace and name
// (a fleet's sources span namespaces).
func objectKey(o client.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// put records one object of source i (deleted: forgets it) and signals the
// change.
func (w *watcher) put(i int, obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = tomb.Obj, true
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	w.mu.Lock()
	if deleted || !w.sources[i].keep(o) {
		delete(w.objects[i], objectKey(o))
	} else {
		w.objects[i][objectKey(o)] = o
	}
	w.mu.Unlock()
	w.signal()
}

// replace records the whole list of source i and signals the change.
func (w *watcher) replace(i int, items []any) {
	objs := make([]client.Object, 0, len(items))
	for _, item := range items {
		if o, ok := item.(client.Object); ok {
			objs = append(objs, o)
		}
	}
	w.mu.Lock()
	w.replaceLocked(i, objs)
	w.mu.Unlock()
	w.signal()
}

func (w *watcher) replaceLocked(i int, objs []client.Object) {
	w.objects[i] = map[string]client.Object{}
	for _, o := range objs {
		if w.sources[i].keep(o) {
			w.objects[i][objectKey(o)] = o
		}
	}
	w.synced[i] = true
}

// signal waits until the change is taken, or the watch ends.
func (w *watcher) signal() {
	select {
	case w.changed <- struct{}{}:
	case <-w.stop:
	}
}

// call describes a request to source i for error messages.
func (w *watcher) call(i int, verb string) core.Call {
	return core.Call{Verb: verb, GR: w.sources[i].GR, Kind: w.sources[i].kind, Namespace: w.namespace, Purpose: w.purpose}
}

// report looks at the answer to a request to source i: a transient
// failure is noted once and retried, any other ends the watch.
func (w *watcher) report(ctx context.Context, i int, verb string, err error) {
	if ctx.Err() != nil {
		return // the watch is ending
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.outage.Recovered(i)
		return
	}
	if core.IsTransient(err) {
		if note, ok := w.outage.Lost(i, err); ok {
			fmt.Fprintln(w.notes, note)
		}
		return
	}
	select {
	case w.failed <- w.call(i, verb).Explain(err):
	default: // a failure is reported already
	}
}

// Outage notes a lost API server once while the same failure repeats, and
// anew once every source has reached it again.
type Outage struct {
	// failing are the sources whose last request failed.
	failing map[int]bool
	// noted is the failure noted last.
	noted string
}

// Lost records a transient failure of source i and returns the note to
// print, false when it was printed already.
func (o *Outage) Lost(i int, err error) (string, bool) {
	if o.failing == nil {
		o.failing = map[int]bool{}
	}
	o.failing[i] = true
	key := outageKey(err)
	if key == o.noted {
		return "", false
	}
	o.noted = key
	return fmt.Sprintf("lost the API server (%v); watching again", core.APIStatusOf(err)), true
}

// Recovered records a request of source i answered.
func (o *Outage) Recovered(i int) {
	delete(o.failing, i)
	if len(o.failing) == 0 {
		o.noted = ""
	}
}

// outageKey is what makes two failures the same outage: the API server's
// reason, or the failure of the connection whatever the request.
func outageKey(err error) string {
	if reason := apierrors.ReasonForError(err); reason != metav1.StatusReasonUnknown {
		return string(reason)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err.Error()
	}
	return err.Error()
}

// TransientRetryInterval is how long status waits before it lists or
// watches again after the API server could not be reached (a variable so
// that tests need not wait).
var TransientRetryInterval = time.Second

// listWatch is the lister-watcher of source i's reflector. It lists with a
// consistent read, whatever resourceVersion the reflector asks for (what
// status shows first is what the API server has now, not a cache's older
// view), and watches from the reflector's resourceVersion.
func (w *watcher) listWatch(i int) cache.ListerWatcher {
	src := w.sources[i]
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			list := src.newList()
			err := w.cl.List(ctx, list, src.opts...)
			w.report(ctx, i, "list", err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			from := &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: opts.ResourceVersion, AllowWatchBookmarks: true, TimeoutSeconds: opts.TimeoutSeconds}}
			wi, err := w.cl.Watch(ctx, src.newList(), append(append([]client.ListOption(nil), src.opts...), from)...)
			w.report(ctx, i, "watch", err)
			return wi, err
		},
		DisableChunking: true,
	}, listThenWatch{})
}

// listThenWatch keeps a reflector to a list and a watch (the requests and
// permissions status documents), rather than one streaming watch.
type listThenWatch struct{}

// IsWatchListSemanticsUnSupported is true: see listThenWatch.
func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// sourceStore is where one source's reflector delivers its objects.
type sourceStore struct {
	w *watcher
	i int
}

// Add records a new object.
func (s sourceStore) Add(obj any) error { s.w.put(s.i, obj, false); return nil }

// Update records a changed object.
func (s sourceStore) Update(obj any) error { s.w.put(s.i, obj, false); return nil }

// Delete forgets a deleted object.
func (s sourceStore) Delete(obj any) error { s.w.put(s.i, obj, true); return nil }

// Replace records a new list.
func (s sourceStore) Replace(items []any, _ string) error { s.w.replace(s.i, items); return nil }

// Resync has nothing to do: status keeps no queue.
func (sourceStore) Resync() error { return nil }
