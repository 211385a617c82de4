package rollout

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/status"
)

// apiServer is a fake client whose watches the test ends as the API server
// ends them, counting the lists and watches status makes of each type.
type apiServer struct {
	client.WithWatch
	mu      sync.Mutex
	lists   map[string]int
	watches map[string]int
	// watchedFrom are the resourceVersions the watches started from.
	watchedFrom map[string][]string
	open        []*endableWatch
	// failLists fails that many lists of each type with err first.
	failLists map[string]int
	err       error
}

func newAPIServer(objs ...client.Object) *apiServer {
	s := &apiServer{lists: map[string]int{}, watches: map[string]int{}, watchedFrom: map[string][]string{}, failLists: map[string]int{}}
	s.WithWatch = withNameIndexes(fake.NewClientBuilder().WithScheme(core.Scheme()).WithObjects(objs...)).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				s.mu.Lock()
				name := fmt.Sprintf("%T", list)
				s.lists[name]++
				fail := s.failLists[name] > 0
				if fail {
					s.failLists[name]--
				}
				s.mu.Unlock()
				if fail {
					return s.err
				}
				return c.List(ctx, list, opts...)
			},
			Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
				inner, err := c.Watch(ctx, list, opts...)
				if err != nil {
					return nil, err
				}
				lo := (&client.ListOptions{}).ApplyOptions(opts)
				w := newEndableWatch(inner)
				s.mu.Lock()
				defer s.mu.Unlock()
				name := fmt.Sprintf("%T", list)
				s.watches[name]++
				if lo.Raw != nil {
					s.watchedFrom[name] = append(s.watchedFrom[name], lo.Raw.ResourceVersion)
				}
				s.open = append(s.open, w)
				return w, nil
			},
		}).Build()
	return s
}

// count returns the lists and watches of list type name so far.
func (s *apiServer) count(name string) (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists[name], s.watches[name]
}

// endWatches ends every open watch, after ev when given.
func (s *apiServer) endWatches(ev *watch.Event) {
	s.mu.Lock()
	open := s.open
	s.open = nil
	s.mu.Unlock()
	for _, w := range open {
		w.end(ev)
	}
}

// endableWatch passes on a watch's events until the test ends it.
type endableWatch struct {
	inner watch.Interface
	out   chan watch.Event
	last  chan *watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newEndableWatch(inner watch.Interface) *endableWatch {
	w := &endableWatch{inner: inner, out: make(chan watch.Event), last: make(chan *watch.Event, 1), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		defer inner.Stop()
		for {
			select {
			case ev, ok := <-inner.ResultChan():
				if !ok {
					return
				}
				select {
				case w.out <- ev:
				case <-w.stop:
					return
				}
			case ev := <-w.last:
				if ev != nil {
					select {
					case w.out <- *ev:
					case <-w.stop:
					}
				}
				return
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *endableWatch) ResultChan() <-chan watch.Event { return w.out }
func (w *endableWatch) Stop()                          { w.once.Do(func() { close(w.stop) }) }

// end ends the watch as the API server does, after ev when given.
func (w *endableWatch) end(ev *watch.Event) { w.last <- ev }

// waitUntil waits for cond, failing after 10 s.
func waitUntil(t *testing.T, r *fakeRun, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		select {
		case code := <-r.done:
			t.Fatalf("status ended (exit %d) before %s:\n%s%s", code, what, r.out, r.errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s:\n%s%s", what, r.out, r.errOut)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// exitOf waits until r ends and returns its exit code; the test fails
// when ctx ends first.
func exitOf(t *testing.T, ctx context.Context, r *fakeRun) int {
	t.Helper()
	select {
	case code := <-r.done:
		return code
	case <-ctx.Done():
		t.Fatalf("status did not end:\n%s%s", r.out, r.errOut)
		return -1
	}
}

// TestStatusWatchResumes: a watch the API server ends is resumed from the
// last resourceVersion status saw, without listing again; one it can no
// longer resume (410 Gone) is resumed by listing and watching again; the
// verdict is unchanged: status exits 0 once the rollout is done.
func TestStatusWatchResumes(t *testing.T) {
	defer func(d time.Duration) { status.TransientRetryInterval = d }(status.TransientRetryInterval)
	status.TransientRetryInterval = time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := newAPIServer(objectsOf(chainStep1Rolling)...)
	machines := fmt.Sprintf("%T", &clusterv1.MachineList{})
	r := startFake(ctx, s, topoNS, time.Now(), "status", "kcp/c1-control-plane")
	waitFor(t, r, "kubeadmcontrolplane/c1-control-plane: 2 of 3 machines up to date, 3 available (1 old machine pending deletion)")
	waitUntil(t, r, "watch of the Machines", func() bool { _, w := s.count(machines); return w == 1 })

	// An event, then the API server ends the watches (its watch timeout):
	// status watches again from the last resourceVersion it saw.
	_, o := chainStep1Rolling.objects()
	m := o.Machines[0].DeepCopy()
	require.NoError(t, s.Get(ctx, client.ObjectKeyFromObject(m), m))
	apimeta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: clusterv1.MachineReadyCondition, Status: metav1.ConditionFalse, Reason: "NotReady", Message: "rebooting"})
	require.NoError(t, s.Update(ctx, m))
	waitFor(t, r, "  machine "+m.Name+": Running, not ready, not up to date: NotReady: rebooting")
	s.endWatches(nil)
	waitUntil(t, r, "a second watch of the Machines", func() bool { _, w := s.count(machines); return w == 2 })
	lists, _ := s.count(machines)
	assert.Equal(t, 1, lists, "a watch that ended is resumed without a list")
	s.mu.Lock()
	from := s.watchedFrom[machines]
	s.mu.Unlock()
	assert.Equal(t, m.ResourceVersion, from[1], "resumed from the last resourceVersion seen (%v)", from)

	// 410 Gone: listed and watched again.
	gone := apierrors.NewResourceExpired("too old resource version")
	s.endWatches(&watch.Event{Type: watch.Error, Object: &gone.ErrStatus})
	waitUntil(t, r, "a second list of the Machines", func() bool { ls, w := s.count(machines); return ls == 2 && w == 3 })

	moveTo(ctx, t, s, chainStep1Done)
	assert.Equal(t, core.ExitOK, exitOf(t, ctx, r), r.errOut.String())
	assert.True(t, strings.HasSuffix(r.out.String(), "kubeadmcontrolplane/c1-control-plane successfully rolled out (revision 3)\n"), r.out.String())
	assert.Empty(t, r.errOut.String())
}

// TestStatusWatchRidesThroughAnOutage: lists that fail while the API
// server is down are noted once and retried; status goes on when it is
// back.
func TestStatusWatchRidesThroughAnOutage(t *testing.T) {
	defer func(d time.Duration) { status.TransientRetryInterval = d }(status.TransientRetryInterval)
	status.TransientRetryInterval = time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := newAPIServer(objectsOf(chainStep1Done)...)
	s.err = &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/apis/cluster.x-k8s.io/v1beta2/namespaces/demo/machines", Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	s.failLists[fmt.Sprintf("%T", &clusterv1.MachineList{})] = 5
	r := startFake(ctx, s, topoNS, time.Now(), "status", "kcp/c1-control-plane")
	assert.Equal(t, core.ExitOK, exitOf(t, ctx, r), r.errOut.String())
	assert.Equal(t, "lost the API server (Get \"https://127.0.0.1:6443/apis/cluster.x-k8s.io/v1beta2/namespaces/demo/machines\": dial: connect: connection refused); watching again\n", r.errOut.String())
	assert.Contains(t, r.out.String(), "kubeadmcontrolplane/c1-control-plane successfully rolled out")
}

// TestStatusWatchEnds: an object deleted while watched, or a list the user
// may not make, ends status with its error.
func TestStatusWatchEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := newAPIServer(objectsOf(chainStep1Rolling)...)
	r := startFake(ctx, s, topoNS, time.Now(), "status", "kcp/c1-control-plane")
	waitFor(t, r, "kubeadmcontrolplane/c1-control-plane: 2 of 3 machines up to date, 3 available (1 old machine pending deletion)")
	require.NoError(t, s.Delete(ctx, &controlplanev1.KubeadmControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: topoNS, Name: "c1-control-plane"}}))
	assert.Equal(t, core.ExitError, exitOf(t, ctx, r))
	assert.Equal(t, "error: kubeadmcontrolplane/c1-control-plane was deleted while its rollout was watched\n", r.errOut.String())

	s = newAPIServer(objectsOf(chainStep1Rolling)...)
	s.err = apierrors.NewForbidden(schema.GroupResource{Group: clusterv1.GroupVersion.Group, Resource: "machinesets"}, "", fmt.Errorf(`User "viewer" cannot list resource "machinesets"`))
	s.failLists[fmt.Sprintf("%T", &clusterv1.MachineSetList{})] = 1000
	_, errOut, code := runFake(t, s, time.Now(), "status", "md/c1-md-0")
	assert.Equal(t, core.ExitError, code)
	assert.Contains(t, errOut, `error: cannot status MachineDeployment demo/c1-md-0: user "viewer" may not list machinesets.cluster.x-k8s.io in namespace "demo" (Forbidden)`)
}

// TestStatusOnce: --watch=false reports once: exit 0 only when rolled out.
func TestStatusOnce(t *testing.T) {
	out, errOut, code := runFake(t, newFakeClient(objectsOf(chainStep1Rolling)...), time.Now(), "status", "kcp/c1-control-plane", "--watch=false")
	assert.Equal(t, ExitNotRolledOut, code)
	assert.Equal(t, "kubeadmcontrolplane/c1-control-plane: 2 of 3 machines up to date, 3 available (1 old machine pending deletion)\n", out)
	assert.Equal(t, "1 of 1 objects not rolled out\n", errOut)

	out, errOut, code = runFake(t, newFakeClient(objectsOf(chainStep1Done)...), time.Now(), "status", "md/c1-md-0", "--watch=false", "-o", "json")
	assert.Equal(t, core.ExitOK, code, errOut)
	assert.Contains(t, out, `"object":"machinedeployment/c1-md-0","phase":"RolledOut","replicas":2,"upToDate":2,"available":2,"ready":2`)
}
