package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// Impersonator makes clients that act as a user: an Environment, or a
// sandbox built on one.
type Impersonator interface {
	ClientAs(user string, groups ...string) (client.Client, error)
}

// UserClient returns a client of as that acts as user, in groups and
// system:masters (every right), so that what the guard records of a
// change names a known user; it fails t if there is none.
func UserClient(t testing.TB, as Impersonator, user string, groups ...string) client.Client {
	t.Helper()
	c, err := as.ClientAs(user, append([]string{"system:masters"}, groups...)...)
	require.NoError(t, err)
	return c
}

// WaitFor polls cond every interval until it holds, failing t after
// timeout with what it waited for and what cond last saw (its second
// result), which it also logs each time it changes. Tests wait on
// controllers and caches this way rather than sleeping.
func WaitFor(t testing.TB, timeout, interval time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if saw != last {
			t.Logf("waiting for %s: %s", what, saw)
			last = saw
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (%s); last seen: %s", what, timeout, saw)
		}
		time.Sleep(interval)
	}
}

// Stamps reads obj as stored and returns the revision stamps the guard
// wrote on it.
func (e *Environment) Stamps(t testing.TB, obj client.Object) revisions.Record {
	t.Helper()
	require.NoError(t, e.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	rec, err := revisions.RecordFromAnnotations(obj.GetAnnotations())
	require.NoError(t, err)
	return rec
}

// DescribeHistory renders recorded revisions one per line, for failure
// messages and logs.
func DescribeHistory(revs []revisions.Revision) string {
	var b strings.Builder
	for _, r := range revs {
		fmt.Fprintf(&b, "  revision %d %v %s by %q (%s) type %s: %s\n", r.Record.Revision, r.Record.History, r.Snapshot.Hash, r.Record.ChangedBy, r.Record.FieldManager, r.Record.ChangeType, r.Record.ChangeCause)
	}
	return b.String()
}
