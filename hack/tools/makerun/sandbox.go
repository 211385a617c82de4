package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// runSandbox runs the sandbox at path and returns its exit status.
//
// On a terminal where makerun is in the foreground process group (make's),
// the sandbox gets a process group of its own and the terminal with it, so
// that Ctrl-C reaches the sandbox alone: make, which on SIGINT waits for
// its recipe and then kills itself with the signal (exit 130, after an
// "Error 1" line when the recipe failed), never sees it. The sandbox stops
// everything, prints its "stopped" line and exits 0; makerun hands the
// terminal back to make's group and exits 0, and so does make.
//
// Without a terminal (CI, a pipe), the sandbox stays in makerun's process
// group: a signal sent to the group reaches it directly, and one sent to
// makerun alone is passed on.
func runSandbox(path string, args []string, dir string) (int, error) {
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr

	own := ownGroupPossible()
	if own {
		cmd.SysProcAttr = &syscall.SysProcAttr{Foreground: true, Ctty: 0}
		// Taking the terminal back from the background needs SIGTTOU
		// ignored, else the kernel stops makerun for trying.
		signal.Ignore(syscall.SIGTTOU)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	if err := cmd.Start(); err != nil {
		return 1, fmt.Errorf("starting the sandbox: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
wait:
	for {
		select {
		case s := <-sigs:
			// In its own group the sandbox did not get this signal; in
			// ours it may have (sent to the group) or not (sent to
			// makerun): the sandbox handles a repeated signal as one.
			_ = cmd.Process.Signal(s)
		case err = <-done:
			break wait
		}
	}
	if own {
		if terr := unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, unix.Getpgrp()); terr != nil {
			fmt.Fprintln(os.Stderr, "makerun: taking the terminal back:", terr)
		}
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), fmt.Errorf("the sandbox was killed by %s", ws.Signal())
		}
		// The sandbox has said why.
		return exit.ExitCode(), nil
	}
	return 1, err
}

// ownGroupPossible reports whether stdin is a terminal whose foreground
// process group is makerun's: only then can the sandbox be given the
// terminal in a group of its own (and makerun take it back).
func ownGroupPossible() bool {
	fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	if err != nil {
		return false
	}
	return fg == unix.Getpgrp()
}
