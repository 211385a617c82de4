package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// apiServerRestartTimeout bounds the wait for a restarted kube-apiserver's
// /readyz.
const apiServerRestartTimeout = 90 * time.Second

// KillGuard sends sig to the guard's process group and waits until it has
// exited, as a crash (SIGKILL) or a pod deletion (SIGTERM) would end it.
// Unlike StopGuard it never escalates: a SIGTERM'd guard that does not exit
// within Options.GuardStopTimeout is an error (and is then killed). The
// webhook configurations stay registered. It is an error if no guard runs.
func (e *Environment) KillGuard(sig syscall.Signal) error {
	e.guardMu.Lock()
	defer e.guardMu.Unlock()
	g := e.guard
	if g == nil {
		return errors.New("killing the guard: no guard is running")
	}
	e.guard = nil
	pid := g.cmd.Process.Pid
	stopTimeout := e.opts.GuardStopTimeout
	if stopTimeout <= 0 {
		stopTimeout = defaultGuardStopTimeout
	}
	killGroup(pid, sig)
	select {
	case <-g.done:
	case <-time.After(stopTimeout):
		killGroup(pid, syscall.SIGKILL)
		<-g.done
		return fmt.Errorf("killing the guard: pid %d did not exit within %s of %s", pid, stopTimeout, sig)
	}
	killGroup(pid, syscall.SIGKILL) // anything it left behind
	e.logger.Info("guard killed", "pid", pid, "signal", sig.String(), "exit", fmt.Sprint(g.exitErr))
	return nil
}

// APIServerRestart configures RestartAPIServer.
type APIServerRestart struct {
	// Down is how long kube-apiserver stays stopped.
	Down time.Duration
	// Grace is how long it may take to stop after SIGTERM before it gets
	// SIGKILL, as a kubelet would after the pod's grace period. Default 10s;
	// a negative Grace sends SIGKILL at once (a crash).
	Grace time.Duration
}

// APIServerRestarted says how a restart went.
type APIServerRestarted struct {
	// Stopped is how long kube-apiserver took to stop.
	Stopped time.Duration
	// Killed reports that it got SIGKILL (Grace ran out, or was negative).
	Killed bool
	// Ready is how long the new process took until /readyz answered 200.
	Ready time.Duration
}

// RestartAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after
// opts.Grace, as a control-plane upgrade or a failing node would), keeps it
// down for opts.Down, and starts it again with the same command line: the
// same port, certificates and etcd, so every object and resourceVersion
// survives and every client (the guard, the controllers, watches) can
// reconnect to the same URL. It returns once /readyz answers 200. Stop
// stops the restarted process.
func (e *Environment) RestartAPIServer(ctx context.Context, opts APIServerRestart) (APIServerRestarted, error) {
	var out APIServerRestarted
	if err := e.running(); err != nil {
		return out, fmt.Errorf("restarting kube-apiserver: %w", err)
	}
	if opts.Grace == 0 {
		opts.Grace = 10 * time.Second
	}
	e.apiServerMu.Lock()
	defer e.apiServerMu.Unlock()

	pid, args, err := e.apiServerProcess()
	if err != nil {
		return out, fmt.Errorf("restarting kube-apiserver: %w", err)
	}
	begin := time.Now()
	if opts.Grace < 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for alive(pid) {
			time.Sleep(20 * time.Millisecond)
		}
		out.Killed = true
	} else if err := terminate(pid, opts.Grace); err != nil {
		out.Killed = true
		e.logger.Info("kube-apiserver did not stop after SIGTERM; killed", "pid", pid, "grace", opts.Grace.String())
	}
	out.Stopped = time.Since(begin)
	if e.apiServerCmd != nil {
		<-e.apiServerDone
	}
	e.logger.Info("kube-apiserver stopped", "pid", pid, "after", out.Stopped.String(), "killed", out.Killed, "down", opts.Down.String())
	select {
	case <-ctx.Done():
		return out, fmt.Errorf("restarting kube-apiserver: %w", ctx.Err())
	case <-time.After(opts.Down):
	}
	begin = time.Now()

	logFile, err := os.OpenFile(filepath.Join(e.WorkDir, "kube-apiserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return out, fmt.Errorf("restarting kube-apiserver: opening its log: %w", err)
	}
	e.closers = append(e.closers, logFile)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return out, fmt.Errorf("restarting kube-apiserver: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	e.apiServerCmd, e.apiServerDone = cmd, done
	if err := e.waitAPIServerReady(ctx, done); err != nil {
		return out, fmt.Errorf("restarting kube-apiserver: %w", err)
	}
	out.Ready = time.Since(begin)
	e.logger.Info("kube-apiserver restarted", "pid", cmd.Process.Pid, "readyAfter", out.Ready.String())
	return out, nil
}

// apiServerProcess returns the pid and command line of the running
// kube-apiserver: the one RestartAPIServer started, or envtest's (the
// child of this process running BinDir/kube-apiserver).
func (e *Environment) apiServerProcess() (int, []string, error) {
	if e.apiServerCmd != nil {
		select {
		case <-e.apiServerDone:
			return 0, nil, errors.New("the restarted kube-apiserver has exited")
		default:
		}
		return e.apiServerCmd.Process.Pid, e.apiServerCmd.Args, nil
	}
	want := filepath.Join(e.BinDir, "kube-apiserver")
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, fmt.Errorf("listing processes: %w", err)
	}
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		rest := string(stat)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) || fields[0] == "Z" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if len(args) > 0 && args[0] == want {
			return pid, args, nil
		}
	}
	return 0, nil, fmt.Errorf("no running %s found among this process's children", want)
}

// terminate sends SIGTERM to pid and waits until it is gone, killing it
// after timeout.
func terminate(pid int, timeout time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return fmt.Errorf("signalling: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			for alive(pid) {
				time.Sleep(50 * time.Millisecond)
			}
			return fmt.Errorf("did not stop within %s; killed", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// alive reports whether pid runs (a zombie, exited but not yet reaped, does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	rest := string(stat)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	fields := strings.Fields(rest)
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// waitAPIServerReady polls kube-apiserver's /readyz with the admin
// credentials until it answers 200.
func (e *Environment) waitAPIServerReady(ctx context.Context, exited <-chan struct{}) error {
	cfg := rest.CopyConfig(e.Config)
	cfg.Timeout = 5 * time.Second
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("building a client for /readyz: %w", err)
	}
	url := strings.TrimRight(cfg.Host, "/") + "/readyz"
	return waitReadyz(ctx, httpClient, url, apiServerRestartTimeout, exited, func() error {
		return fmt.Errorf("kube-apiserver exited before it was ready (log: %s)", filepath.Join(e.WorkDir, "kube-apiserver.log"))
	})
}

// stopRestartedAPIServer stops the kube-apiserver RestartAPIServer started, if any.
func (e *Environment) stopRestartedAPIServer() error {
	e.apiServerMu.Lock()
	defer e.apiServerMu.Unlock()
	if e.apiServerCmd == nil {
		return nil
	}
	select {
	case <-e.apiServerDone:
		return nil
	default:
	}
	if err := terminate(e.apiServerCmd.Process.Pid, controlPlaneStopTimeout); err != nil {
		return fmt.Errorf("stopping the restarted kube-apiserver: %w", err)
	}
	<-e.apiServerDone
	return nil
}
