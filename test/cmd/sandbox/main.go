// Command sandbox runs a local Cluster API management cluster with the guard:
// etcd and kube-apiserver from the repository's bin/, the Cluster API CRDs
// with their conversion webhooks, and bin/webhook registered from
// config/webhook/manifests.yaml. It writes an admin kubeconfig to
// <dir>/kubeconfig, logs to <dir>/sandbox.log, and runs until SIGINT or
// SIGTERM, then stops everything it started.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/rollout-guard/rollout-guard/test/framework"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

func run() (retErr error) {
	dir := flag.String("dir", ".sandbox", "state directory: kubeconfig, logs")
	binDir := flag.String("bin-dir", "", "directory holding etcd, kube-apiserver, kubectl and webhook (default: the repository's bin/)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s [flags]\n\nRuns a local Cluster API management cluster with rollout-guard until interrupted.\n\nFlags:\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", flag.Args())
	}

	stateDir, err := filepath.Abs(*dir)
	if err != nil {
		return fmt.Errorf("resolving --dir: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return fmt.Errorf("creating the state directory: %w", err)
	}
	logPath := filepath.Join(stateDir, "sandbox.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("creating the log file: %w", err)
	}
	defer func() {
		if err := logFile.Close(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("closing the log file: %w", err))
		}
	}()
	logger := zap.New(zap.WriteTo(logFile), zap.ConsoleEncoder())
	ctrl.SetLogger(logger)
	klog.SetLogger(logger.WithName("klog"))

	// Signals are caught until the end, so a second Ctrl-C cannot cut the
	// stop short and leave etcd or kube-apiserver behind.
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	fmt.Printf("starting the sandbox in %s (log: %s)\n", stateDir, logPath)
	begin := time.Now()
	env, err := framework.Start(ctx, framework.Options{
		BinDir:     *binDir,
		StartGuard: true,
		Log:        logFile,
		WorkDir:    stateDir,
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while starting; everything started was stopped again")
		}
		return fmt.Errorf("starting (everything started was stopped again; see %s): %w", logPath, err)
	}
	defer func() {
		fmt.Println("stopping the sandbox...")
		if err := env.Stop(); err != nil {
			retErr = errors.Join(retErr, fmt.Errorf("stopping: %w", err))
			return
		}
		fmt.Println("sandbox stopped: etcd, kube-apiserver and the guard are down")
	}()

	kubectl := displayPath(filepath.Join(env.BinDir, "kubectl"))
	fmt.Printf(`sandbox ready in %s: a Cluster API management cluster with rollout-guard.

  export KUBECONFIG=%s
  %s get crds | grep cluster.x-k8s.io
  %s get validatingwebhookconfigurations
  %s api-resources --api-group=cluster.x-k8s.io

Guard webhook: %s (its output and the environment's: %s)
API server and etcd logs: %s, %s
Press Ctrl-C to stop.
`,
		time.Since(begin).Round(100*time.Millisecond), env.Kubeconfig, kubectl, kubectl, kubectl,
		env.GuardURL(), logPath,
		filepath.Join(stateDir, "kube-apiserver.log"), filepath.Join(stateDir, "etcd.log"))

	<-ctx.Done()
	fmt.Println()
	return nil
}

// displayPath returns path relative to the working directory when it lies
// below it, else path.
func displayPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return path
	}
	return rel
}
