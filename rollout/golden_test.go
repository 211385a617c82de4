package rollout

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// update rewrites the golden files under testdata/ (go test ./rollout/ -update).
var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or writes it there with -update.
// docs/cli.md quotes some of these files: keep them in step.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing: run go test ./rollout/ -update")
	assert.Equal(t, string(want), got, "output differs from %s (rewrite it with -update if the change is intended)", path)
}

// TestDocsQuoteGoldens: the examples docs/cli.md shows of cluster status
// and history are these golden files, as they are.
func TestDocsQuoteGoldens(t *testing.T) {
	docs, err := os.ReadFile(filepath.Join("..", "docs", "cli.md"))
	require.NoError(t, err)
	for _, name := range []string{"history-cluster.txt", "status-cluster-lines.txt", "status-cluster-live-step-1-rolling.txt", "status-cluster-event.json"} {
		want, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		assert.Contains(t, string(docs), string(want), "docs/cli.md does not quote testdata/%s as it is", name)
	}
}
