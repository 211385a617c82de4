// Package golden is the tests' comparison of an output with its golden
// file: the files under the rollout package's testdata/, which the docs
// quote. It serves the tests of package rollout and of its subpackages.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// update rewrites the golden files (go test ./rollout/... -update).
var update = flag.Bool("update", false, "rewrite the golden files under rollout/testdata/")

// Check compares got with the golden file at path, or writes it there
// with -update. The CLI pages of docs/ quote some of these files: keep them in step.
func Check(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing: run go test ./rollout/... -update")
	assert.Equal(t, string(want), got, "output differs from %s (rewrite it with -update if the change is intended)", path)
}
