package webhooks

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rollout-guard/rollout-guard/kinds"
)

// TestStampersServeThePathsOfTheManifests: the path each kind's stamper is
// registered at is one the shipped webhook configuration calls
// (config/webhook/manifests.yaml), and the constants naming them agree.
func TestStampersServeThePathsOfTheManifests(t *testing.T) {
	manifests, err := os.ReadFile("../config/webhook/manifests.yaml")
	require.NoError(t, err)
	named := map[string]string{
		"MachineDeployment":   MutateMachineDeploymentPath,
		"MachinePool":         MutateMachinePoolPath,
		"KubeadmControlPlane": MutateKubeadmControlPlanePath,
	}
	for _, kind := range kinds.WithRevisions() {
		path := mutatePath(kind.GVK)
		assert.True(t, strings.Contains(string(manifests), "path: "+path+"\n"), "%s: %s is not in the manifests", kind.GVK.Kind, path)
		assert.Equal(t, named[kind.GVK.Kind], path, kind.GVK.Kind)
	}
}

// TestOwnerLabelerServesThePathOfTheManifests: the RolloutRevision owner
// labeler is registered at the path the shipped configuration calls.
func TestOwnerLabelerServesThePathOfTheManifests(t *testing.T) {
	manifests, err := os.ReadFile("../config/webhook/manifests.yaml")
	require.NoError(t, err)
	assert.Contains(t, string(manifests), "path: "+MutateRolloutRevisionPath+"\n")
}
