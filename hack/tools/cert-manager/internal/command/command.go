// Package command holds what the two cert-manager mains of this module
// share: the cert-manager version they are built from, their flag set
// (with klog's verbosity flags and --version), and the context that a
// SIGINT or SIGTERM cancels.
package command

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	"k8s.io/klog/v2"
)

// certManagerModule is the module whose packages the commands run.
const certManagerModule = "github.com/cert-manager/cert-manager"

// Version returns the version of the cert-manager module the running
// binary was built from (this module's go.mod pins it), or "unknown".
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path != certManagerModule {
			continue
		}
		if dep.Replace != nil {
			return dep.Replace.Version
		}
		return dep.Version
	}
	return "unknown"
}

// Command is one binary's flag set.
type Command struct {
	Name  string
	Flags *flag.FlagSet
	// Kubeconfig is the --kubeconfig flag's value.
	Kubeconfig string
	version    bool
}

// New returns the flag set of the binary name, with --kubeconfig,
// --version and klog's flags (-v, --vmodule…); summary heads its usage.
func New(name, summary string) *Command {
	c := &Command{Name: name, Flags: flag.NewFlagSet(name, flag.ContinueOnError)}
	c.Flags.Usage = func() {
		out := c.Flags.Output()
		fmt.Fprintf(out, "%s (cert-manager %s): %s\n\nFlags:\n", name, Version(), summary)
		c.Flags.PrintDefaults()
	}
	c.Flags.StringVar(&c.Kubeconfig, "kubeconfig", "", "Path to the kubeconfig of the API server to run against (default: in-cluster configuration).")
	c.Flags.BoolVar(&c.version, "version", false, "Print the cert-manager version this binary is built from and exit.")
	klog.InitFlags(c.Flags)
	return c
}

// Parse parses args (without the program name). It reports whether the
// binary should go on: false after --version (printed to out) or -h.
// It also makes cert-manager's own version string (user agents, logs)
// the pinned version.
func (c *Command) Parse(args []string, out io.Writer) (bool, error) {
	if err := c.Flags.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return false, nil
		}
		return false, err
	}
	if c.Flags.NArg() > 0 {
		return false, fmt.Errorf("unexpected arguments: %q", c.Flags.Args())
	}
	if c.version {
		fmt.Fprintf(out, "%s %s\n", c.Name, Version())
		return false, nil
	}
	util.AppVersion = Version()
	return true, nil
}

// SignalContext returns a context that the first SIGINT or SIGTERM
// cancels; a second one ends the process at once.
func SignalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-signals
		cancel()
		<-signals
		os.Exit(130)
	}()
	return ctx
}

// Main sets up cert-manager's logging (klog, contextual) as its own
// binaries do, runs run and exits with status 1 if it fails, after
// flushing the logs.
func Main(name string, run func() error) {
	logf.InitLogs()
	err := run()
	logf.FlushLogs()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
