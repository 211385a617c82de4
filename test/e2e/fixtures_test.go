package e2e

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

var nsCounter atomic.Int64

// newWorld creates a world (see framework.World) in a namespace of its own,
// with the guard watching.
func newWorld(t *testing.T, spec framework.WorldSpec) *framework.World {
	t.Helper()
	return env.NewWorld(t, fmt.Sprintf("e2e-%d", nsCounter.Add(1)), spec)
}

// stopGuard stops the package's guard and returns what starts it again;
// a test that fails before calling it has the guard started again when it
// ends, so that the package's other tests find it running.
func stopGuard(t *testing.T) (restart func()) {
	t.Helper()
	require.NoError(t, env.StopGuard())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			require.NoError(t, env.StartGuard(context.Background()))
		}
	})
	return func() {
		t.Helper()
		require.NoError(t, env.StartGuard(context.Background()))
		restarted = true
	}
}
