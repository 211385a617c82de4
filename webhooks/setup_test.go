package webhooks

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
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
		"ClusterClass":        MutateClusterClassPath,
		"Cluster":             MutateClusterPath,
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

// TestHistoryStoreServed: the guard is ready only where the API server
// serves RolloutRevisions; without the CRD the check names it and the way
// out.
func TestHistoryStoreServed(t *testing.T) {
	without := meta.NewDefaultRESTMapper(nil)
	err := HistoryStoreServed(without)(nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rolloutrevisions.rollout-guard.io")
	assert.Contains(t, err.Error(), "install its CRD (config/crd)")

	with := meta.NewDefaultRESTMapper(nil)
	with.Add(rgv1alpha1.GroupVersion.WithKind("RolloutRevision"), meta.RESTScopeNamespace)
	assert.NoError(t, HistoryStoreServed(with)(nil))
}
