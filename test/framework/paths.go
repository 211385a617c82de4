package framework

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const (
	// rootModule is the module path of the product's root module.
	rootModule = "github.com/rollout-guard/rollout-guard"
	// clusterAPIModule is the Cluster API module whose CRDs the environment installs.
	clusterAPIModule = "sigs.k8s.io/cluster-api"
	// clusterAPITestModule holds the development infrastructure provider's
	// CRDs. It is downloaded, never built: its packages do not resolve here.
	clusterAPITestModule = "sigs.k8s.io/cluster-api/test"
)

// FindRepoRoot walks up from dir to the directory whose go.mod declares the
// product's root module (github.com/rollout-guard/rollout-guard).
func FindRepoRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", dir, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		switch {
		case err == nil:
			if modulePath(data) == rootModule {
				return d, nil
			}
		case !errors.Is(err, os.ErrNotExist):
			return "", fmt.Errorf("reading %s: %w", filepath.Join(d, "go.mod"), err)
		}
		if parent := filepath.Dir(d); parent == d {
			return "", fmt.Errorf("no go.mod of module %s in %s or any parent directory", rootModule, abs)
		}
	}
}

// ClusterAPIDir returns the directory of the sigs.k8s.io/cluster-api module
// that the test module (repoRoot/test) resolves, as `go list -m` reports it.
// The module is downloaded into the module cache if it is not there yet.
func ClusterAPIDir(repoRoot string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", clusterAPIModule)
	cmd.Dir = filepath.Join(repoRoot, "test")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s in %s: %w: %s", clusterAPIModule, cmd.Dir, err, strings.TrimSpace(stderr.String()))
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		// Required but not in the module cache yet: download it and ask again.
		dl := exec.Command("go", "mod", "download", clusterAPIModule)
		dl.Dir = cmd.Dir
		if out, err := dl.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go mod download %s: %w: %s", clusterAPIModule, err, strings.TrimSpace(string(out)))
		}
		again := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", clusterAPIModule)
		again.Dir = cmd.Dir
		out, err := again.Output()
		if err != nil {
			return "", fmt.Errorf("go list -m %s in %s after download: %w", clusterAPIModule, cmd.Dir, err)
		}
		dir = strings.TrimSpace(string(out))
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("module directory of %s: %w", clusterAPIModule, err)
	}
	return dir, nil
}

// modulePath returns the module path declared by the go.mod content data, or
// "" if there is none.
func modulePath(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`)
		}
	}
	return ""
}

// ModuleDir makes sure module@version is in the module cache (through the
// Go module proxy, as `go mod download` does) and returns its directory. It
// is how tests reach files that ship inside a module but not in this
// module's dependencies, such as cert-manager's CRDs.
func ModuleDir(module, version string) (string, error) {
	return downloadModule(module, version)
}

// downloadModule makes sure module@version is in the module cache (through
// the Go module proxy) and returns its directory.
func downloadModule(module, version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w: %s %s", module, version, err, strings.TrimSpace(stderr.String()), strings.TrimSpace(string(out)))
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("reading go mod download's answer for %s@%s: %w", module, version, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, info.Error)
	}
	return info.Dir, nil
}
