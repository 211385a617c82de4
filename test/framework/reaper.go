package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// reaperScript is the watchdog of an environment's kube-apiserver and etcd
// (pid:path arguments, in the order to stop them, then "--" and the
// directories to remove), for when the process that started them ($1) ends
// without stopping them: killed (SIGKILL, the OOM killer), or a test binary
// that timed out. It checks once a second that the parent still runs (a
// zombie does not); then, one child after the other, it sends SIGTERM to a
// child that still runs the binary it was started as (its pid not taken by
// another process since), and SIGKILL if it still runs $GRACE seconds
// later; last, it removes the directories (their data and certificates).
//
// Why a shell: envtest starts etcd and kube-apiserver with a process group
// of their own and no parent-death signal, and offers no way to set one;
// only another process can stop them once their parent is gone.
const reaperScript = `
parent=$1; shift
running() { case "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" in ''|Z|X) return 1;; esac; }
is() { [ "$(tr '\0' '\n' < "/proc/$1/cmdline" 2>/dev/null | head -n 1)" = "$2" ]; }
while running "$parent"; do sleep 1; done
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
	pid=${1%%:*}; path=${1#*:}; shift
	running "$pid" && is "$pid" "$path" || continue
	kill -TERM "$pid" 2>/dev/null
	waited=0
	while running "$pid" && [ "$waited" -lt "$GRACE" ]; do sleep 1; waited=$((waited + 1)); done
	if running "$pid" && is "$pid" "$path"; then kill -KILL "$pid" 2>/dev/null; sleep 1; fi
done
[ "$#" -gt 0 ] && shift
[ "$#" -gt 0 ] && rm -rf -- "$@"
exit 0
`

// reaper is a running watchdog (see reaperScript).
type reaper struct {
	cmd *exec.Cmd
}

// watched is a child process for the watchdog to stop: the binary it runs
// (its full path, as started) and an argument only it has (its data or
// certificate directory), which tells it apart from the same binary
// started by another environment of this process.
type watched struct {
	binary, arg string
}

// startReaper starts the watchdog of children of this process: they are
// stopped, in their order, and dirs removed, when this process ends without
// stopping them. It is an error for one of them not to run.
func startReaper(children []watched, dirs []string) (*reaper, error) {
	running := ChildProcesses()
	var args []string
	var names []string
	for _, child := range children {
		names = append(names, filepath.Base(child.binary))
		found := false
		for pid, cmdline := range running {
			if strings.HasPrefix(cmdline, child.binary+" ") && slices.Contains(strings.Fields(cmdline), child.arg) {
				args = append(args, strconv.Itoa(pid)+":"+child.binary)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no child process runs %s with %s", child.binary, child.arg)
		}
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		return nil, fmt.Errorf("finding sh for the watchdog of etcd and kube-apiserver: %w", err)
	}
	args = append(append(args, "--"), dirs...)
	cmd := exec.Command(sh, append([]string{"-c", reaperScript, "reaper", strconv.Itoa(os.Getpid())}, args...)...)
	cmd.Env = append(os.Environ(), "GRACE="+strconv.Itoa(int(controlPlaneStopTimeout.Seconds())))
	// A process group of its own: a signal to the group of this process (a
	// terminal's Ctrl-C, kill of a make target's group) must leave it to
	// do its work.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the watchdog of %s: %w", strings.Join(names, " and "), err)
	}
	return &reaper{cmd: cmd}, nil
}

// stop ends the watchdog: the environment stops its children itself.
func (r *reaper) stop() error {
	if r == nil {
		return nil
	}
	if err := r.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping the watchdog of etcd and kube-apiserver: %w", err)
	}
	_ = r.cmd.Wait() // killed: its exit status says so
	return nil
}
