// Package build cross-compiles the product's commands as the image and the
// release ship them: static (CGO_ENABLED=0), without the paths of the machine
// that built them (-trimpath), and stamped with the version as `make build`
// stamps it (-ldflags "-X main.version=...").
package build

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Binary is one command of the product module built for one platform.
type Binary struct {
	// Command is the directory name under cmd/ (webhook, rollout).
	Command  string
	Platform v1.Platform
	// Path is where the binary was written.
	Path string
}

// Dir is the directory under binDir that holds the binaries of platform p,
// e.g. bin/cross/linux_arm64.
func Dir(binDir string, p v1.Platform) string {
	return filepath.Join(binDir, p.OS+"_"+p.Architecture)
}

// Command builds ./cmd/<command> of the product module in root for platform p
// into Dir(binDir, p), with version stamped, and says how long it took on log
// (when log is not nil).
func Command(ctx context.Context, root, binDir, command, version string, p v1.Platform, log func(format string, args ...any)) (Binary, error) {
	out := filepath.Join(Dir(binDir, p), command)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return Binary{}, err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-X main.version="+version, "-o", out, "./cmd/"+command)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if output, err := cmd.CombinedOutput(); err != nil {
		return Binary{}, fmt.Errorf("building %s for %s: %w\n%s", command, p, err, output)
	}
	if log != nil {
		log("built %s for %s in %.1fs", command, p.String(), time.Since(start).Seconds())
	}
	return Binary{Command: command, Platform: p, Path: out}, nil
}

// Platforms parses platforms given as os/arch.
func Platforms(names ...string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, n := range names {
		p, err := v1.ParsePlatform(n)
		if err != nil {
			return nil, err
		}
		out = append(out, *p)
	}
	return out, nil
}

// TestVersion is the version the tests of hack/tools stamp their binaries
// with.
const TestVersion = "v0.0.1-test"

// TestBinDir is where the tests of hack/tools build the product's binaries:
// a directory of bin/ kept between runs, so that a run finds the binaries of
// unchanged sources up to date (go build then relinks nothing) and the
// release's tests reuse the image's.
func TestBinDir(root string) string {
	return filepath.Join(root, "bin", "cross-test")
}

// ForTests builds command for the platform of this machine, as Command
// does, and stands that binary in for every other platform of platforms: a
// copy at Dir(binDir, p) of each. What the tests of hack/tools check is how
// the image and the release package binaries, not the cross-compiler; a
// build of the product for another operating system or architecture costs
// minutes from an empty build cache (make release builds them for real).
func ForTests(ctx context.Context, root, binDir, command string, platforms []v1.Platform, log func(format string, args ...any)) ([]Binary, error) {
	host := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	own, err := Command(ctx, root, binDir, command, TestVersion, host, log)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(own.Path)
	if err != nil {
		return nil, err
	}
	var out []Binary
	for _, p := range platforms {
		if p.OS == host.OS && p.Architecture == host.Architecture {
			out = append(out, Binary{Command: command, Platform: p, Path: own.Path})
			continue
		}
		path := filepath.Join(Dir(binDir, p), command)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		// A mark of the platform after the binary keeps each stand-in, and
		// each archive of one, distinct, as real builds are.
		standIn := append(slices.Clone(data), []byte("\nstand-in for "+p.String()+"\n")...)
		if err := os.WriteFile(path, standIn, 0o755); err != nil {
			return nil, fmt.Errorf("standing the %s binary in for %s: %w", host, p, err)
		}
		out = append(out, Binary{Command: command, Platform: p, Path: path})
	}
	return out, nil
}

// RepoRoot is the repository's root: the nearest directory above the
// working directory that holds cmd/webhook.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "cmd", "webhook")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no cmd/webhook above the working directory")
		}
		dir = parent
	}
}
