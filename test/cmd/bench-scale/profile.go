package main

import (
	"context"
	"fmt"
	"io"
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

// bootProfileSeconds is the length of the guard's CPU profile at start:
// about its boot reconciliation at 2,000 clusters.
const bootProfileSeconds = 15

// saveBootProfile takes the guard's CPU profile over the bootProfileSeconds
// after it is ready — its boot reconciliation — and writes it to
// dir/guard-cpu-boot-CLUSTERS-VARIANT.pprof; the channel gives the outcome
// once written (go tool pprof -top FILE says where the start's time goes).
func saveBootProfile(ctx context.Context, addr, dir string, clusters int, variant string, out io.Writer, prefix string) chan error {
	path := filepath.Join(dir, fmt.Sprintf("guard-cpu-boot-%d-%s.pprof", clusters, filepath.Base(variant)))
	profiled := framework.StartCPUProfile(ctx, addr, bootProfileSeconds, path)
	done := make(chan error, 1)
	go func() {
		if err := <-profiled; err != nil {
			done <- fmt.Errorf("the guard's CPU profile at start: %w", err)
			return
		}
		fmt.Fprintf(out, "%s CPU profile of the first %d s after ready (the boot reconciliation): %s\n", prefix, bootProfileSeconds, path)
		done <- nil
	}()
	return done
}
