package e2e

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

var nsCounter atomic.Int64

// newWorld creates a world (see framework.World) in a namespace of its own,
// with the guard watching.
func newWorld(t *testing.T, spec framework.WorldSpec) *framework.World {
	t.Helper()
	return env.NewWorld(t, fmt.Sprintf("e2e-%d", nsCounter.Add(1)), spec)
}
