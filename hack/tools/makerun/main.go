// Command makerun is make run's driver (and make tools'): it builds what
// the sandbox runs and then runs the sandbox. The steps are the guard and
// the CLI (bin/webhook, bin/rollout), the pinned etcd, kubectl and
// kube-apiserver (skipped when bin/ holds them at the version hack/tools'
// go.mod pins), the sandbox itself (test/cmd/sandbox, into bin/sandbox) and,
// when the sandbox's flags ask for them, Cluster API's managers
// (bin/capi-core, bin/capi-kcp). Each step is named with its count
// ("[4/5] building kube-apiserver v1.36.3 …"); on a terminal a progress bar
// per running build counts its packages, else a line marks each start and
// end. The tools and the sandbox's own build run side by side once the
// guard's build has filled go's cache with what all three share.
//
// Usage (from the Makefile):
//
//	makerun --root ROOT --bin-dir BIN [--version V] [--tools-only] [-- SANDBOX-FLAGS...]
//
// Once built, the sandbox runs in the foreground: Ctrl-C reaches it alone
// (its own process group, handed the terminal), so it stops everything it
// started, says so, and makerun exits with its status — 0 — without make
// ever seeing the interrupt. Without a terminal, SIGINT, SIGTERM and SIGHUP
// sent to makerun reach the sandbox too.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
)

func main() {
	code, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "makerun:", err)
	}
	os.Exit(code)
}

func run() (int, error) {
	root := flag.String("root", "", "the repository's root (required)")
	binDir := flag.String("bin-dir", "", "where the binaries go (default: ROOT/bin)")
	version := flag.String("version", "dev", "the VERSION bin/webhook and bin/rollout are stamped with")
	logDir := flag.String("log-dir", "", "where go's output of each build goes (default: ROOT/.sandbox)")
	lanes := flag.Int("lanes", 3, "how many builds run side by side at most (1: one at a time)")
	plain := flag.Bool("plain", false, "a line per step start and end even on a terminal, no progress bars")
	toolsOnly := flag.Bool("tools-only", false, "build only etcd, kubectl and kube-apiserver, run nothing (make tools)")
	buildOnly := flag.Bool("build-only", false, "build what the sandbox needs, but do not run it")
	flag.Parse()
	if *root == "" {
		return 2, errors.New("--root is required")
	}
	if *binDir == "" {
		*binDir = filepath.Join(*root, "bin")
	}
	cfg := Config{Root: *root, Version: *version, SandboxArgs: flag.Args(), ToolsOnly: *toolsOnly}
	if _, err := os.Stat(filepath.Join(*binDir, "sandbox")); err == nil {
		cfg.Warm = true
	}
	if *logDir == "" {
		*logDir = filepath.Join(*root, ".sandbox")
	}
	for _, d := range []string{*binDir, *logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 1, err
		}
	}

	// Until the sandbox runs, an interrupt stops the builds.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	start := time.Now()
	versions, err := resolveVersions(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Println("interrupted: nothing was built")
			if *toolsOnly || *buildOnly {
				return 130, nil
			}
			return 0, nil
		}
		return 1, err
	}
	steps := Plan(cfg, versions)
	var report Reporter = NewPlainReporter(os.Stdout)
	if !*plain && barsFit(os.Stdout) {
		report = NewBarReporter(os.Stdout)
	}
	r := &Runner{BinDir: *binDir, LogDir: *logDir, Lanes: *lanes, Report: report}
	err = r.Run(ctx, steps)
	report.Wait()
	if err != nil {
		if ctx.Err() != nil {
			fmt.Println("interrupted: the builds were stopped; the binaries already in place are kept")
			if *toolsOnly || *buildOnly {
				// A target after make tools must not run on tools
				// that were not built.
				return 130, nil
			}
			// make run: the user asked for it, no error for make to
			// report.
			return 0, nil
		}
		return 1, err
	}
	fmt.Printf("builds done in %s\n", roundDuration(time.Since(start)))
	if *toolsOnly || *buildOnly {
		return 0, nil
	}
	stop()
	args := append([]string{"--bin-dir", *binDir}, cfg.SandboxArgs...)
	return runSandbox(filepath.Join(*binDir, "sandbox"), args, filepath.Join(*root, "test"))
}

// resolveVersions reads the pinned tools' versions from hack/tools' go.mod
// and, when the plan needs it, Cluster API's from test's.
func resolveVersions(ctx context.Context, cfg Config) (Versions, error) {
	out, err := goListModules(ctx, filepath.Join(cfg.Root, "hack", "tools"), "k8s.io/kubernetes", "go.etcd.io/etcd/server/v3", "k8s.io/kubectl")
	if err != nil {
		return Versions{}, err
	}
	v := Versions{Kubernetes: out[0], Etcd: out[1], Kubectl: KubectlVersion(out[2])}
	if NeedsClusterAPIVersion(cfg) {
		out, err := goListModules(ctx, filepath.Join(cfg.Root, "test"), "sigs.k8s.io/cluster-api")
		if err != nil {
			return Versions{}, err
		}
		v.ClusterAPI = out[0]
	}
	return v, nil
}

// goListModules returns the versions of modules in the build list of the
// module at dir, in order.
func goListModules(ctx context.Context, dir string, modules ...string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-m", "-f", "{{.Version}}"}, modules...)...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("reading the versions of %s in %s: %w", strings.Join(modules, ", "), dir, err)
	}
	versions := strings.Fields(string(out))
	if len(versions) != len(modules) {
		return nil, fmt.Errorf("go list -m %s in %s printed %q", strings.Join(modules, " "), dir, out)
	}
	return versions, nil
}

// barsFit reports whether f is a terminal wide enough for the progress
// bars (a terminal of unknown width, as under script(1) or some CI
// runners, shows nothing of them: the plain lines then).
func barsFit(f *os.File) bool {
	fd := int(f.Fd())
	if !term.IsTerminal(fd) {
		return false
	}
	width, _, err := term.GetSize(fd)
	return err == nil && width >= 60
}
