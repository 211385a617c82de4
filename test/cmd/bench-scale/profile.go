package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// pprofAddress returns a free local address for the guard's profiling
// endpoints (its --pprof-bind-address).
func pprofAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a port for the guard's profiling endpoints: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// saveHeapProfile writes the guard's heap profile, taken after a garbage
// collection (so its in-use figures are the live heap), to
// dir/guard-heap-CLUSTERS-VARIANT.pprof and returns the file's path.
// go tool pprof -sample_index=inuse_space -top reads where the live heap is.
func saveHeapProfile(ctx context.Context, addr, dir string, clusters int, variant string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the profile directory: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("reading the guard's heap profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("reading the guard's heap profile: %s", resp.Status)
	}
	path := filepath.Join(dir, fmt.Sprintf("guard-heap-%d-%s.pprof", clusters, filepath.Base(variant)))
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("writing the guard's heap profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return "", fmt.Errorf("writing the guard's heap profile: %w", err)
	}
	return path, f.Close()
}
