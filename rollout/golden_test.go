package rollout

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	goldenfile "github.com/rollout-guard/rollout-guard/rollout/internal/golden"
)

// golden compares got with testdata/name, or writes it there with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), got)
}

// TestDocsQuoteGoldens: the examples of cluster status and history that
// docs/reading-history.md, docs/status.md and docs/fleets.md show are these
// golden files, as they are.
func TestDocsQuoteGoldens(t *testing.T) {
	var docs []byte
	for _, page := range []string{"reading-history.md", "status.md", "fleets.md"} {
		data, err := os.ReadFile(filepath.Join("..", "docs", page))
		require.NoError(t, err)
		docs = append(docs, data...)
	}
	for _, name := range []string{"history-cluster.txt", "history-clusterclass.txt", "history-cluster-topology.txt", "status-cluster-lines.txt", "status-cluster-live-step-1-rolling.txt", "status-cluster-event.json", "status-fleet-100.txt"} {
		want, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		assert.Contains(t, string(docs), string(want), "none of docs/reading-history.md, status.md and fleets.md quotes testdata/%s as it is", name)
	}
}
