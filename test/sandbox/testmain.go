package sandbox

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

// Figures collects what a package's tests measure, printed when the package
// ends (and quoted in the docs). Safe for concurrent use.
type Figures struct {
	mu    sync.Mutex
	lines []string
}

// Add notes one figure.
func (f *Figures) Add(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lines = append(f.lines, fmt.Sprintf(format, args...))
}

// print writes the figures under title.
func (f *Figures) print(title string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintln(os.Stderr, title+":")
	for _, line := range f.lines {
		fmt.Fprintln(os.Stderr, "  "+line)
	}
}

// RunTests is the TestMain of a package whose tests share one sandbox: it
// sends every log (controllers, guard, in-memory API servers) to a
// temporary file named after the package, starts the sandbox with opts
// (within 5 minutes), hands it to started, runs the tests, stops the
// sandbox, fails if any process it started is left running, and prints
// figures. It returns the exit code for os.Exit.
func RunTests(m *testing.M, name string, opts Options, figures *Figures, started func(*Sandbox)) int {
	logFile, err := os.CreateTemp("", "rollout-guard-"+name+"-*.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating the log file:", err)
		return 1
	}
	defer logFile.Close()
	fmt.Fprintln(os.Stderr, "sandbox logs (controllers, guard):", logFile.Name())
	LogTo(logFile)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts.Environment.Log = logFile
	sb, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the sandbox:", err)
		return 1
	}
	started(sb)

	children := framework.ChildProcesses()
	code := m.Run()
	// A restarted kube-apiserver or extra guard replicas are children too: look again.
	for pid, cmd := range framework.ChildProcesses() {
		children[pid] = cmd
	}
	if code != 0 && sb.Core != nil {
		// Its log is in the environment's WorkDir, which Stop removes.
		printErrorDigest(sb.Core.Log, 40)
	}
	if code != 0 && sb.ControlPlane != nil {
		printErrorDigest(sb.ControlPlane.Log, 40)
	}
	if err := sb.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the sandbox:", err)
		code = max(code, 1)
	}
	if left := framework.Survivors(children, 10*time.Second); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "processes left running after Stop:", strings.Join(left, "; "))
		code = max(code, 1)
	}
	figures.print("figures")
	if code != 0 {
		printErrorDigest(logFile.Name(), 40)
	}
	return code
}

// printErrorDigest writes the last limit error lines of the sandbox log
// (or of Cluster API's core manager's, klog's format) to stderr. CI keeps a failed run's output but not its temporary files, and a
// rollout that never finishes is most often explained by a controller's
// repeated "Reconciler error" or a refused write, which this brings into
// the test output.
func printErrorDigest(path string, limit int) {
	raw, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reading the sandbox log:", err)
		return
	}
	var errs []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, "\tERROR\t") || strings.Contains(line, "Reconciler error") || strings.Contains(line, "denied the request") || klogError(line) {
			errs = append(errs, line)
		}
	}
	if len(errs) == 0 {
		fmt.Fprintln(os.Stderr, path+": no error lines")
		return
	}
	skipped := max(len(errs)-limit, 0)
	fmt.Fprintf(os.Stderr, "%s: last %d of %d error lines:\n", path, len(errs)-skipped, len(errs))
	for _, line := range errs[skipped:] {
		if len(line) > 600 {
			line = line[:600] + " …"
		}
		fmt.Fprintln(os.Stderr, "  "+line)
	}
}

// RequireClusterReady fails t unless the Cluster namespace/name, its
// control plane and its worker pools are all ready within timeout (see
// WaitClusterReady), and returns their state.
func (s *Sandbox) RequireClusterReady(t testing.TB, namespace, name string, timeout time.Duration) ClusterState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	state, err := s.WaitClusterReady(ctx, namespace, name, nil)
	if err != nil {
		t.Fatalf("Cluster %s/%s is not ready: %v", namespace, name, err)
	}
	return state
}

// klogError reports whether line is an error line of klog's text format
// (Emmdd hh:mm:ss.uuuuuu …).
func klogError(line string) bool {
	if len(line) < 6 || line[0] != 'E' {
		return false
	}
	for _, r := range line[1:5] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return line[5] == ' '
}
