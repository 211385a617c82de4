package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Runner runs the steps of a plan into BinDir, reporting to Report. Go's
// output of each build goes to LogDir/build-<first output>.log.
type Runner struct {
	// BinDir is where the binaries go (the repository's bin/).
	BinDir string
	// LogDir is where go's output of each build goes.
	LogDir string
	// Lanes caps how many lanes of a stage run side by side.
	Lanes int
	// Report hears of each step's start, progress and end.
	Report Reporter
	// GoBuild runs go build of a step, the binary of its i-th package
	// into targets[i]; nil is the real one (tests replace it).
	GoBuild func(ctx context.Context, s Step, targets []string, events BuildEvents, log io.Writer) error
}

// BuildEvents is what a build tells the step's progress display.
type BuildEvents interface {
	// Listed gives the number of packages the build may compile.
	Listed(total int)
	// Downloading is called for each module go downloads.
	Downloading(module string)
	// Compiled is called for each package go compiles.
	Compiled(pkg string)
}

// StepError is a failed step, with where its output went.
type StepError struct {
	// Step is the step that failed.
	Step Step
	// Log is the file go's output of the step went to.
	Log string
	// Err is what went wrong.
	Err error
}

// Error names the step, what went wrong (go's last lines) and the log.
func (e *StepError) Error() string {
	return fmt.Sprintf("building %s: %v (go's output: %s)", e.Step.Label(), e.Err, e.Log)
}

// Unwrap returns the build's error.
func (e *StepError) Unwrap() error { return e.Err }

// Run runs the steps stage by stage; within a stage each lane runs in its
// own goroutine. The first step that fails cancels the builds still running
// and its error is returned (an interrupt's says ErrInterrupted), as is the
// context's when it is cancelled between steps.
//
// The binaries with a version check are checked first, side by side (each
// is a run of the binary, well under a second): a stage reports its steps
// that are up to date, in plan order, before it starts its builds, so that
// with everything built the step lines come in order.
func (r *Runner) Run(ctx context.Context, steps []Step) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.Report.Begin(steps)
	var (
		failed   sync.Once
		firstErr error
	)
	current := make([]bool, len(steps))
	var checks sync.WaitGroup
	for i, s := range steps {
		if s.Check != nil {
			checks.Go(func() { current[i] = UpToDate(ctx, filepath.Join(r.BinDir, s.Outputs[0]), *s.Check) })
		}
	}
	checks.Wait()
	for _, stage := range Stages(steps, r.Lanes) {
		var all []int
		for _, lane := range stage {
			all = append(all, lane...)
		}
		slices.Sort(all)
		for _, i := range all {
			if current[i] {
				r.Report.UpToDate(i, len(steps), steps[i])
			}
		}
		var wg sync.WaitGroup
		for _, lane := range stage {
			wg.Go(func() {
				for _, i := range lane {
					if ctx.Err() != nil {
						return
					}
					if current[i] {
						continue
					}
					if err := r.runStep(ctx, i, len(steps), steps[i]); err != nil {
						failed.Do(func() { firstErr = err })
						cancel(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
	return nil
}

// runStep builds the step's packages. The repository's own binaries are
// built in place, so that go build, finding one whose build ID matches,
// does not even relink it. A pinned tool, which is rebuilt only when its
// version changed, is built into a directory of its own under BinDir and
// then moved into place: the binary there (or the link to one elsewhere)
// is replaced, never written through, and a failed or interrupted build
// leaves it as it was.
func (r *Runner) runStep(ctx context.Context, n, total int, s Step) error {
	logPath := filepath.Join(r.LogDir, "build-"+s.Outputs[0]+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return &StepError{Step: s, Log: logPath, Err: err}
	}
	defer log.Close()
	dir := r.BinDir
	if s.Check != nil {
		if dir, err = os.MkdirTemp(r.BinDir, "."+s.Outputs[0]+"-"); err != nil {
			return &StepError{Step: s, Log: logPath, Err: err}
		}
		defer os.RemoveAll(dir)
	}
	targets := make([]string, len(s.Outputs))
	for i, o := range s.Outputs {
		targets[i] = filepath.Join(dir, o)
	}

	progress := r.Report.Start(n, total, s)
	start := time.Now()
	build := r.GoBuild
	if build == nil {
		build = goBuild
	}
	err = build(ctx, s, targets, progress, log)
	if err == nil && dir != r.BinDir {
		for i, o := range s.Outputs {
			if err = os.Rename(targets[i], filepath.Join(r.BinDir, o)); err != nil {
				break
			}
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			err = errors.Join(ErrInterrupted, context.Cause(ctx))
		}
		progress.Failed(err)
		return &StepError{Step: s, Log: logPath, Err: err}
	}
	progress.Done(time.Since(start))
	return nil
}

// ErrInterrupted marks a build stopped because the run was (an interrupt,
// or another step's failure), not for a fault of its own.
var ErrInterrupted = errors.New("interrupted")

// binaryName is the name go build -o DIR/ gives the binary of package pkg:
// its last path element, or the one before a major version suffix.
func binaryName(pkg string) string {
	elems := strings.Split(strings.TrimSuffix(pkg, "/"), "/")
	name := elems[len(elems)-1]
	if len(elems) > 1 && len(name) > 1 && name[0] == 'v' && strings.Trim(name[1:], "0123456789") == "" && name != "v1" {
		name = elems[len(elems)-2]
	}
	return name
}

// UpToDate reports whether the binary at path, run with the check's
// arguments, prints the version wanted (as hack/tools/lib.sh's build does).
func UpToDate(ctx context.Context, path string, c VersionCheck) bool {
	if info, err := os.Stat(path); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, path, c.Args...).CombinedOutput()
	return bytes.Contains(out, []byte(c.Want))
}

// goBuild runs go build -v of the step's packages into targets, with go
// list -deps beside it for the number of packages the progress counts up
// to. go's output goes to log; its lines also drive the progress. Several
// packages are built by one go build -o DIR/, which names each binary
// itself: Plan gives them those names (binaryName), in one directory.
func goBuild(ctx context.Context, s Step, targets []string, events BuildEvents, log io.Writer) error {
	listDone := make(chan struct{})
	go func() {
		defer close(listDone)
		list := exec.CommandContext(ctx, "go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, s.Packages...)...)
		list.Dir = s.Dir
		if out, err := list.Output(); err == nil {
			events.Listed(bytes.Count(out, []byte("\n")))
		}
	}()
	target := targets[0]
	if len(targets) > 1 {
		target = filepath.Dir(targets[0]) + string(filepath.Separator)
	}
	args := []string{"build", "-v", "-o", target}
	if s.LDFlags != "" {
		args = append(args, "-ldflags", s.LDFlags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, s.Packages...)...)
	cmd.Dir = s.Dir
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = log
	if err := cmd.Start(); err != nil {
		return err
	}
	var tail lastLines
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(log, line)
		tail.add(line)
		ParseBuildLine(line, events)
	}
	err = cmd.Wait()
	<-listDone
	if err != nil {
		return fmt.Errorf("%w:\n%s", err, tail.String())
	}
	return nil
}

// ParseBuildLine tells events what a line of go build -v's output says: a
// module downloaded ("go: downloading MODULE VERSION") or a package
// compiled (an import path alone on its line). Compiler messages ("# pkg"
// and the "file:line: …" lines below it) are neither.
func ParseBuildLine(line string, events BuildEvents) {
	if rest, ok := strings.CutPrefix(line, "go: downloading "); ok {
		events.Downloading(rest)
		return
	}
	if line == "" || strings.HasPrefix(line, "go: ") || strings.HasPrefix(line, "#") || strings.ContainsAny(line, " \t:") {
		return
	}
	events.Compiled(line)
}

// lastLines keeps the last lines of a build's output, for the error.
type lastLines struct{ lines []string }

const keptLines = 30

func (l *lastLines) add(line string) {
	if strings.HasPrefix(line, "go: downloading ") {
		return
	}
	l.lines = append(l.lines, line)
	if len(l.lines) > keptLines {
		l.lines = l.lines[len(l.lines)-keptLines:]
	}
}

func (l *lastLines) String() string { return strings.Join(l.lines, "\n") }
