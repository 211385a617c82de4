package sandbox

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// SyncBuffer is a bytes.Buffer safe for one writer and concurrent readers,
// so a test can read a running command's output.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// CLIRun is the result of one run of the rollout CLI.
type CLIRun struct {
	// Code is the exit code.
	Code int
	// Stdout and Stderr are what it printed.
	Stdout, Stderr string
	// Took is how long it ran.
	Took time.Duration
}

// CLI is a run of the rollout CLI in-process against the sandbox, as its
// admin; its output can be read while it runs.
type CLI struct {
	// Stdout and Stderr receive the command's output.
	Stdout, Stderr *SyncBuffer
	done           chan CLIRun
}

// StartCLI starts the rollout CLI in-process, in the background, with args
// against namespace of the sandbox as its admin. cacheDir holds the
// client's discovery cache (a test's TempDir).
func (s *Sandbox) StartCLI(cacheDir, namespace string, args ...string) *CLI {
	c := &CLI{Stdout: &SyncBuffer{}, Stderr: &SyncBuffer{}, done: make(chan CLIRun, 1)}
	args = append(append([]string(nil), args...), "-n", namespace)
	go func() {
		begin := time.Now()
		code := framework.RunRollout(context.Background(), s.Kubeconfig, cacheDir, c.Stdout, c.Stderr, args...)
		c.done <- CLIRun{Code: code, Stdout: c.Stdout.String(), Stderr: c.Stderr.String(), Took: time.Since(begin)}
	}()
	return c
}

// Done delivers the result once the command returned. It delivers it once:
// whoever takes it and still needs it elsewhere puts it back (the channel
// holds one).
func (c *CLI) Done() chan CLIRun { return c.done }

// RunCLI runs the rollout CLI as StartCLI does and waits for its result.
func (s *Sandbox) RunCLI(cacheDir, namespace string, args ...string) CLIRun {
	return <-s.StartCLI(cacheDir, namespace, args...).Done()
}
