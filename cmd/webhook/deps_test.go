package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGuardDoesNotImportClusterAPIsControllers: the guard is built from
// Cluster API's API types only. Its controllers and topology code (which
// rollout plan runs in the CLI to preview ClusterClass changes) stay out of
// the guard's binary and of what it must be patched for.
func TestGuardDoesNotImportClusterAPIsControllers(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "sigs.k8s.io/cluster-api/") && !strings.HasPrefix(pkg, "sigs.k8s.io/cluster-api/api/") {
			t.Errorf("cmd/webhook imports %s: only sigs.k8s.io/cluster-api/api/... is for the guard", pkg)
		}
	}
}
