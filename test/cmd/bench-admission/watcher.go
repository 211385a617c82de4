package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The background watcher stands for Cluster API's controllers, which in a
// real management cluster already watch every Cluster, MachineDeployment,
// MachineSet, Machine and KubeadmControlPlane: what an admission
// configuration adds is measured on top of that load, the same in every
// configuration. It runs as a child process (this binary, re-executed
// with --watch-kubeconfig), so that its CPU time is its own in the report
// and its garbage collection does not pause the harness's timers.

// watchedKinds are the kinds Cluster API's core and KubeadmControlPlane
// controllers watch, whole (their caches keep full objects).
func watchedKinds() []client.Object {
	return []client.Object{&clusterv1.Cluster{}, &clusterv1.MachineDeployment{}, &clusterv1.MachineSet{},
		&clusterv1.Machine{}, &controlplanev1.KubeadmControlPlane{}}
}

// Lines the watcher writes on its standard output for the harness.
const (
	watcherSynced = "watcher: synced"
	watcherEvents = "watcher: events"
)

// runWatcher is the child process: informers on watchedKinds in every
// namespace until SIGTERM or SIGINT, then one line counting the events
// each received.
func runWatcher(kubeconfig string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clusterv1.AddToScheme, controlplanev1.AddToScheme} {
		if err := add(scheme); err != nil {
			return fmt.Errorf("building the scheme: %w", err)
		}
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating the cache: %w", err)
	}
	counts := map[string]*atomic.Int64{}
	for _, obj := range watchedKinds() {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("informer for %T: %w", obj, err)
		}
		n := &atomic.Int64{}
		counts[strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1beta2.")] = n
		count := func(any) { n.Add(1) }
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: count, DeleteFunc: count, UpdateFunc: func(_, o any) { count(o) },
		}); err != nil {
			return fmt.Errorf("event handler for %T: %w", obj, err)
		}
	}
	errs := make(chan error, 1)
	go func() { errs <- c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return errors.New("the caches did not sync")
	}
	fmt.Println(watcherSynced)
	select {
	case <-ctx.Done():
	case err := <-errs:
		if err != nil {
			return fmt.Errorf("running the cache: %w", err)
		}
	}
	var parts []string
	for _, kind := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", kind, counts[kind].Load()))
	}
	fmt.Println(watcherEvents, strings.Join(parts, " "))
	return nil
}

// watcher is the running child process, seen from the harness.
type watcher struct {
	cmd *exec.Cmd
	// lines are the child's standard output lines after "synced".
	lines chan string
}

// startWatcher starts the watcher on the environment's admin kubeconfig
// and waits until its caches have synced.
func (b *bench) startWatcher(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this executable: %w", err)
	}
	cmd := exec.Command(self, "--watch-kubeconfig", b.env.Kubeconfig)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("the watcher's output: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the watcher: %w", err)
	}
	w := &watcher{cmd: cmd, lines: make(chan string, 4)}
	b.watcher = w
	b.cpu.track("watcher", cmd.Process.Pid)
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line, ok := <-w.lines:
		if !ok || line != watcherSynced {
			return fmt.Errorf("the watcher did not sync (it wrote %q)", line)
		}
		return nil
	case <-time.After(60 * time.Second):
		return errors.New("the watcher did not sync within 60s")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopWatcher stops the watcher and returns its count of events, or "".
func (b *bench) stopWatcher() string {
	w := b.watcher
	if w == nil || w.cmd.Process == nil {
		return ""
	}
	b.watcher = nil
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	var last string
	timeout := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case line, ok := <-w.lines:
			if ok {
				last = line
			} else {
				done = true
			}
		case <-timeout:
			_ = w.cmd.Process.Kill()
			done = true
		}
	}
	_ = w.cmd.Wait()
	return strings.TrimSpace(strings.TrimPrefix(last, watcherEvents))
}

// pid is the watcher's process id, or 0.
func (w *watcher) pid() int {
	if w == nil || w.cmd.Process == nil {
		return 0
	}
	return w.cmd.Process.Pid
}
