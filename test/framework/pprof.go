package framework

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// FreeLocalAddress returns a local address (127.0.0.1:PORT) no process
// listens on now, for a process started next to listen on: the guard's
// --pprof-bind-address.
func FreeLocalAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free local port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// SaveProfile reads the Go profile name (heap, profile — CPU —, goroutine,
// ...) from the net/http/pprof endpoints at addr, with query (heap's gc=1,
// profile's seconds=N), and writes it to path, making its directory. The
// read takes as long as the profile asks (a CPU profile's seconds), or
// until ctx ends.
func SaveProfile(ctx context.Context, addr, name string, query url.Values, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the profile directory: %w", err)
	}
	u := url.URL{Scheme: "http", Host: addr, Path: "/debug/pprof/" + name, RawQuery: query.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("reading the %s profile at %s: %w", name, addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reading the %s profile at %s: %w", name, addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reading the %s profile at %s: %s", name, addr, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the %s profile: %w", name, err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("writing the %s profile to %s: %w", name, path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the %s profile to %s: %w", name, path, err)
	}
	return nil
}

// StartCPUProfile takes a CPU profile of the process serving net/http/pprof
// at addr over the next seconds, in the background, and writes it to
// path; the channel gives the outcome once written (nil, or why not). The
// benchmarks profile the guard this way while their load runs.
func StartCPUProfile(ctx context.Context, addr string, seconds int, path string) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Duration(seconds)*time.Second)
		defer cancel()
		done <- SaveProfile(ctx, addr, "profile", url.Values{"seconds": {strconv.Itoa(seconds)}}, path)
	}()
	return done
}
