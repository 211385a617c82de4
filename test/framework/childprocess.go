package framework

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// childProcess is a running binary of BinDir other than the guard
// (cert-manager's controller and CA injector, Cluster API's core manager):
// its output goes to a log file, with a tail kept for error messages.
type childProcess struct {
	name    string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	exitErr error         // the process's exit, valid once done is closed
	log     *os.File
	tail    *tailWriter
}

// startChildProcess starts BinDir/name with args in WorkDir, its output in
// the file logPath (appended to) and a tail of it kept for error messages.
// The process has its own process group and dies with this process.
func (e *Environment) startChildProcess(name, logPath string, args []string) (*childProcess, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("starting %s: opening its log: %w", name, err)
	}
	p := &childProcess{name: name, done: make(chan struct{}), log: log, tail: newTailWriter(20)}
	out := &lockedWriter{w: io.MultiWriter(log, p.tail)}
	p.cmd = exec.Command(filepath.Join(e.BinDir, name), args...)
	p.cmd.Dir = e.WorkDir
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = childProcAttr()
	e.logger.Info("starting "+name, "command", p.cmd.String(), "log", logPath)
	if err := p.cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", p.cmd.Path, err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop ends the process: SIGTERM to its group, SIGKILL after timeout.
func (p *childProcess) stop(timeout time.Duration) error {
	if p == nil {
		return nil
	}
	defer p.log.Close()
	pid := p.cmd.Process.Pid
	select {
	case <-p.done:
		killGroup(pid, syscall.SIGKILL) // anything it left behind
		if p.exitErr != nil {
			return fmt.Errorf("%s (pid %d) had exited by itself: %w", p.name, pid, p.exitErr)
		}
		return nil
	default:
	}
	killGroup(pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		killGroup(pid, syscall.SIGKILL)
		<-p.done
	}
	killGroup(pid, syscall.SIGKILL) // anything it left behind
	return nil
}
