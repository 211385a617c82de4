package main

import (
	"path/filepath"
	"testing"
)

// TestDocsQuoteTheCheckedInSummary: every figure docs/benchmarks.md and
// docs/install.md quote from the latest runs, and every figure
// docs/benchmarks-history.md quotes from the runs before them, is in
// docs/bench-summary.json, the summaries those runs wrote (make bench,
// bench/summary.json), each run under a key of its own.
func TestDocsQuoteTheCheckedInSummary(t *testing.T) {
	docs := filepath.Join("..", "..", "..", "docs")
	for _, doc := range []string{"benchmarks.md", "benchmarks-history.md", "install.md"} {
		n, err := CheckFiles(filepath.Join(docs, "bench-summary.json"), filepath.Join(docs, doc))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		t.Logf("%s: %d figures checked", doc, n)
	}
}
