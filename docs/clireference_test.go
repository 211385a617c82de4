package docs

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// update rewrites the generated CLI reference: make docs runs
// `go test ./docs/ -run TestCLIReferenceIsCurrent -update`.
var update = flag.Bool("update", false, "write the generated CLI reference into "+CLIReferenceDir+" instead of comparing it")

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = ".."

// TestCLIReferenceIsCurrent renders the CLI reference from the command tree
// in memory and compares it with docs/reference/cli, page by page: a flag,
// an example, an exit code or a command changed without `make docs` fails
// here, and so does a page left behind by a command removed.
func TestCLIReferenceIsCurrent(t *testing.T) {
	pages, err := CLIReference()
	require.NoError(t, err)
	require.Contains(t, pages, "rollout.md", "the root command's page")
	dir := filepath.Join(repoRoot, CLIReferenceDir)
	if *update {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		old, _ := filepath.Glob(filepath.Join(dir, "*.md"))
		for _, f := range old {
			if _, ok := pages[filepath.Base(f)]; !ok {
				require.NoError(t, os.Remove(f))
			}
		}
		for name, page := range pages {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), page, 0o644))
		}
		return
	}
	const regenerate = "the CLI reference is stale: run `make docs` and commit " + CLIReferenceDir
	names := make([]string, 0, len(pages))
	for name := range pages {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v; %s", CLIReferencePath(name), err, regenerate)
			continue
		}
		if !bytes.Equal(got, pages[name]) {
			t.Errorf("%s differs from what the command tree generates; %s", CLIReferencePath(name), regenerate)
		}
	}
	checkedIn, err := filepath.Glob(filepath.Join(dir, "*.md"))
	require.NoError(t, err)
	for _, f := range checkedIn {
		if _, ok := pages[filepath.Base(f)]; !ok {
			t.Errorf("%s: no command generates this page any more; %s", CLIReferencePath(filepath.Base(f)), regenerate)
		}
	}
}
