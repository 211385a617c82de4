package webhooks

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/yaml"

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

// TestEveryStamperIsRegisteredAsTheOthers: each kind with revisions has,
// at its stamper's path, an UPDATE webhook that fails closed and a CREATE
// webhook that fails open, both NoneOnDryRun (they record), selected by
// match conditions whose last is armed — the ClusterClass and Cluster
// stampers as the MachineDeployment's.
func TestEveryStamperIsRegisteredAsTheOthers(t *testing.T) {
	raw, err := os.ReadFile("../config/webhook/manifests.yaml")
	require.NoError(t, err)
	var mutating *admissionregistrationv1.MutatingWebhookConfiguration
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		if strings.Contains(doc, "kind: MutatingWebhookConfiguration") {
			mutating = &admissionregistrationv1.MutatingWebhookConfiguration{}
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), mutating))
		}
	}
	require.NotNil(t, mutating)
	for _, kind := range kinds.WithRevisions() {
		path := mutatePath(kind.GVK)
		ops := map[admissionregistrationv1.OperationType]admissionregistrationv1.FailurePolicyType{}
		for _, w := range mutating.Webhooks {
			if w.ClientConfig.Service == nil || w.ClientConfig.Service.Path == nil || *w.ClientConfig.Service.Path != path {
				continue
			}
			require.Len(t, w.Rules, 1, w.Name)
			for _, op := range w.Rules[0].Operations {
				ops[op] = *w.FailurePolicy
			}
			assert.Equal(t, admissionregistrationv1.SideEffectClassNoneOnDryRun, *w.SideEffects, w.Name)
			require.NotEmpty(t, w.MatchConditions, w.Name)
			assert.Equal(t, "armed", w.MatchConditions[len(w.MatchConditions)-1].Name, w.Name)
			assert.Equal(t, []string{"v1beta2"}, w.Rules[0].APIVersions, w.Name)
		}
		assert.Equal(t, map[admissionregistrationv1.OperationType]admissionregistrationv1.FailurePolicyType{
			admissionregistrationv1.Update: admissionregistrationv1.Fail,
			admissionregistrationv1.Create: admissionregistrationv1.Ignore,
		}, ops, kind.GVK.Kind)
	}
}

// TestRevisionGuardServesThePathOfTheManifests: the RolloutRevision record
// guard is registered at the path the shipped configuration calls.
func TestRevisionGuardServesThePathOfTheManifests(t *testing.T) {
	manifests, err := os.ReadFile("../config/webhook/manifests.yaml")
	require.NoError(t, err)
	assert.Contains(t, string(manifests), "path: "+ValidateRolloutRevisionPath+"\n")
}
