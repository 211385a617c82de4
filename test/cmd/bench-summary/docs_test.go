package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsQuoteTheCheckedInSummary: every figure docs/benchmarks.md (and
// any other page of docs/ with a figure region, such as the sizing of
// docs/install.md) quotes from the latest runs, and every figure
// test/bench/history.md quotes from the runs before them, is in
// test/bench/summary.json, the summaries those runs wrote (make bench,
// bench/summary.json), each run under a key of its own.
func TestDocsQuoteTheCheckedInSummary(t *testing.T) {
	bench := filepath.Join("..", "..", "bench")
	summary := filepath.Join(bench, "summary.json")
	docs := []string{filepath.Join(bench, "history.md")}
	require.NoError(t, filepath.WalkDir(filepath.Join("..", "..", "..", "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		data, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(data), regionStart) {
			docs = append(docs, p)
		}
		return err
	}))
	names := map[string]bool{}
	for _, doc := range docs {
		names[filepath.Base(doc)] = true
		n, err := CheckFiles(summary, doc)
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		t.Logf("%s: %d figures checked", doc, n)
	}
	require.True(t, names["benchmarks.md"], "docs/benchmarks.md has no figure region: its figures would go unchecked")
}
