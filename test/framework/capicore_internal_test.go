package framework

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClusterAPIManagerBinariesAreChecked checks that StartClusterAPICore
// and StartClusterAPIKubeadmControlPlane refuse a missing binary, one that
// is not a Go program of Cluster API, and the other manager under their
// name, each naming its make target. (test/runtimesdk and test/inplace
// start the real ones.)
func TestClusterAPIManagerBinariesAreChecked(t *testing.T) {
	capiDir := filepath.Join(t.TempDir(), "cluster-api@v1.14.2")
	self, err := os.Executable()
	require.NoError(t, err)
	for _, kind := range []clusterAPIManagerKind{clusterAPICoreManager, clusterAPIKubeadmControlPlaneManager} {
		t.Run(kind.binary, func(t *testing.T) {
			binDir := t.TempDir()
			err := checkClusterAPIManagerBinary(binDir, capiDir, kind)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "is missing (build it with: make "+kind.binary+")")

			// Another program under the name: this test binary.
			require.NoError(t, os.Symlink(self, filepath.Join(binDir, kind.binary)))
			err = checkClusterAPIManagerBinary(binDir, capiDir, kind)
			require.Error(t, err)
			assert.Contains(t, err.Error(), ", not "+kind.mainPackage+": rebuild it with: make "+kind.binary)

			// Cluster API's other manager under the name.
			other := clusterAPICoreManager
			if kind == clusterAPICoreManager {
				other = clusterAPIKubeadmControlPlaneManager
			}
			otherPath, err := filepath.Abs(filepath.Join("..", "..", "bin", other.binary))
			require.NoError(t, err)
			if _, err := os.Stat(otherPath); err != nil {
				t.Skipf("%s is not built (make %s): %v", otherPath, other.binary, err)
			}
			require.NoError(t, os.Remove(filepath.Join(binDir, kind.binary)))
			require.NoError(t, os.Symlink(otherPath, filepath.Join(binDir, kind.binary)))
			err = checkClusterAPIManagerBinary(binDir, capiDir, kind)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "is "+other.mainPackage+", not "+kind.mainPackage+": rebuild it with: make "+kind.binary)
			// And it is accepted under its own name.
			require.NoError(t, os.Symlink(otherPath, filepath.Join(binDir, other.binary)))
			assert.NoError(t, checkClusterAPIManagerBinary(binDir, capiDir, other))
		})
	}
}

// TestFeatureGatesFlag checks --feature-gates as Cluster API parses it:
// name=bool pairs, comma-separated, in a stable order.
func TestFeatureGatesFlag(t *testing.T) {
	assert.Equal(t, "ClusterTopology=true,MachinePool=false,RuntimeSDK=true",
		featureGatesFlag(map[string]bool{"RuntimeSDK": true, "MachinePool": false, "ClusterTopology": true}))
	assert.Empty(t, featureGatesFlag(nil))
}
