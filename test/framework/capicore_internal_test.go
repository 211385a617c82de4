package framework

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClusterAPICoreBinaryIsChecked checks that StartClusterAPICore refuses
// a missing bin/capi-core and one that is not Cluster API's core manager of
// the version whose CRDs the environment installs, naming make capi-core.
// (test/runtimesdk starts the real one.)
func TestClusterAPICoreBinaryIsChecked(t *testing.T) {
	capiDir := filepath.Join(t.TempDir(), "cluster-api@v1.14.2")
	binDir := t.TempDir()
	err := checkClusterAPICoreBinary(binDir, capiDir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is missing (build it with: make capi-core)")

	// Another program under the name: this test binary.
	self, err := os.Executable()
	require.NoError(t, err)
	require.NoError(t, os.Symlink(self, filepath.Join(binDir, ClusterAPICoreBinary)))
	err = checkClusterAPICoreBinary(binDir, capiDir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not sigs.k8s.io/cluster-api v1.14.2: rebuild it with: make capi-core")
}

// TestFeatureGatesFlag checks --feature-gates as Cluster API parses it:
// name=bool pairs, comma-separated, in a stable order.
func TestFeatureGatesFlag(t *testing.T) {
	assert.Equal(t, "ClusterTopology=true,MachinePool=false,RuntimeSDK=true",
		featureGatesFlag(map[string]bool{"RuntimeSDK": true, "MachinePool": false, "ClusterTopology": true}))
	assert.Empty(t, featureGatesFlag(nil))
}
