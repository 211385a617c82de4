package monitoring

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestGitOpsApplyShowsTheRefusal applies a refused change the ways GitOps
// controllers apply a manifest from Git: as Flux's kustomize-controller
// does in-process (a server-side apply dry run with a Go client, forcing
// conflicts), whose error text — the API server's status message, the
// guard's admission message — is what a controller puts in its status; and
// with the repository's kubectl, server-side and client-side (Argo CD's
// default sync applies as kubectl does), which reformats an Invalid answer
// as "… is invalid: …". Each must fail naming the rule and the field and
// change nothing. The messages are logged: docs/install-gitops.md ("Argo CD and
// Flux") quotes them.
func TestGitOpsApplyShowsTheRefusal(t *testing.T) {
	ns, name := demo.Namespace, demo.MachineDeploymentName()
	// A worker pool one minor above its control plane: rule
	// WorkerNewerThanControlPlane, whatever version the demo runs.
	manifest := `apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata:
  name: ` + name + `
  namespace: ` + ns + `
spec:
  clusterName: ` + demo.Name + `
  template:
    spec:
      clusterName: ` + demo.Name + `
      version: v1.99.0
`
	path := filepath.Join(t.TempDir(), "machinedeployment.yaml")
	require.NoError(t, os.WriteFile(path, []byte(manifest), 0o644))
	before := &clusterv1.MachineDeployment{}
	require.NoError(t, sb.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, before))

	t.Run("server-side apply dry run from Go", func(t *testing.T) {
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(manifest), &u.Object))
		err := sb.Client.Patch(t.Context(), u, client.Apply, client.FieldOwner("kustomize-controller"), client.ForceOwnership, client.DryRunAll)
		require.Error(t, err)
		t.Logf("server-side apply dry run: %v", err)
		assert.Contains(t, err.Error(), `admission webhook "validate.machinedeployment.rollout-guard.io" denied the request`)
		assert.Contains(t, err.Error(), "[rule WorkerNewerThanControlPlane]")
		assert.Contains(t, err.Error(), "spec.template.spec.version")
		figures.Add("server-side apply dry run from Go refused: %v", err)
	})

	for _, tc := range []struct {
		name string
		args []string
	}{
		{name: "kubectl server-side apply dry run", args: []string{"apply", "--server-side", "--field-manager=kustomize-controller", "--force-conflicts", "--dry-run=server", "-f", path}},
		{name: "kubectl client-side apply", args: []string{"apply", "-f", path}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(filepath.Join(sb.Env.BinDir, "kubectl"), append([]string{"--kubeconfig", sb.Kubeconfig}, tc.args...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			t.Logf("kubectl %s:\n%s", strings.Join(tc.args, " "), stderr.String())
			require.Error(t, err, "applied: %s", stdout.String())
			msg := stderr.String()
			assert.Contains(t, msg, `The MachineDeployment "`+name+`" is invalid: spec.template.spec.version: Forbidden: `)
			assert.Contains(t, msg, "[rule WorkerNewerThanControlPlane]")
			assert.Contains(t, msg, "spec.template.spec.version", "the message names the field")
			figures.Add("%s refused: %s", tc.name, strings.TrimSpace(msg[strings.LastIndex(msg, "The MachineDeployment"):]))

			after := &clusterv1.MachineDeployment{}
			require.NoError(t, sb.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, after))
			assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "a refused apply changed the MachineDeployment")
		})
	}
}
