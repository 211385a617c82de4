package rollout

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// syncBuffer is a buffer a running command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newFakeClient is controller-runtime's fake client holding objs; it lists
// the kinds status watches by metadata.name as the API server does. Its
// watches ignore label and field selectors: status filters what it
// receives itself.
func newFakeClient(objs ...client.Object) client.WithWatch {
	return withNameIndexes(fake.NewClientBuilder().WithScheme(core.Scheme()).WithObjects(objs...)).Build()
}

// withNameIndexes lets b's client list by metadata.name every kind of the
// registry.
func withNameIndexes(b *fake.ClientBuilder) *fake.ClientBuilder {
	for _, k := range core.Kinds {
		b = b.WithIndex(k.New(), "metadata.name", func(o client.Object) []string { return []string{o.GetName()} })
	}
	return b
}

// fakeRun is one command run in-process against a fake client.
type fakeRun struct {
	out, errOut *syncBuffer
	done        chan int
}

// startFake runs the command line args in namespace ns against cl, with
// the clock at now; wait returns its exit code.
func startFake(ctx context.Context, cl client.WithWatch, ns string, now time.Time, args ...string) *fakeRun {
	return startFakeWith(ctx, cl, ns, core.Options{Now: func() time.Time { return now }}, args...)
}

// startFakeWith is startFake with options o (their IOStreams are the run's).
func startFakeWith(ctx context.Context, cl client.WithWatch, ns string, o core.Options, args ...string) *fakeRun {
	r := &fakeRun{out: &syncBuffer{}, errOut: &syncBuffer{}, done: make(chan int, 1)}
	o.IOStreams = genericiooptions.IOStreams{Out: r.out, ErrOut: r.errOut}
	c := &core.Session{Options: o, Args: args, Connect: func() (*core.Clients, error) {
		return &core.Clients{Client: cl, Mapper: cl.RESTMapper(), Namespace: ns}, nil
	}}
	root := newRoot(c)
	root.SetArgs(args)
	go func() {
		err := root.ExecuteContext(ctx)
		PrintError(r.errOut, err)
		r.done <- core.ExitCode(err)
	}()
	return r
}

// runFake runs a command to its end.
func runFake(t *testing.T, cl client.WithWatch, now time.Time, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := startFake(ctx, cl, topoNS, now, args...)
	code := <-r.done
	return r.out.String(), r.errOut.String(), code
}
