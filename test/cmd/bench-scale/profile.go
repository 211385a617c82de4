package main

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// saveHeapProfile writes the guard's heap profile, taken after a garbage
// collection (so its in-use figures are the live heap), to
// dir/guard-heap-CLUSTERS-VARIANT.pprof and returns the file's path.
// go tool pprof -sample_index=inuse_space -top reads where the live heap is.
func saveHeapProfile(ctx context.Context, addr, dir string, clusters int, variant string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	path := filepath.Join(dir, fmt.Sprintf("guard-heap-%d-%s.pprof", clusters, filepath.Base(variant)))
	if err := framework.SaveProfile(ctx, addr, "heap", url.Values{"gc": {"1"}}, path); err != nil {
		return "", fmt.Errorf("the guard's heap profile: %w", err)
	}
	return path, nil
}
