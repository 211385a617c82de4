package main

import (
	"path/filepath"
	"testing"
)

// TestDocsQuoteTheCheckedInSummary: every figure docs/benchmarks.md and
// docs/install.md quote from the latest runs is in docs/bench-summary.json,
// the summary those runs wrote (make bench, bench/summary.json).
func TestDocsQuoteTheCheckedInSummary(t *testing.T) {
	docs := filepath.Join("..", "..", "..", "docs")
	for _, doc := range []string{"benchmarks.md", "install.md"} {
		n, err := CheckFiles(filepath.Join(docs, "bench-summary.json"), filepath.Join(docs, doc))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		t.Logf("%s: %d figures checked", doc, n)
	}
}
