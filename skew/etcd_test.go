package skew

import (
	"fmt"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultEtcdVersion(t *testing.T) {
	cases := []struct {
		k       string
		etcd    string // "" when no default is known
		release string // the kubeadm release whose table answers
	}{
		// One per minor, 1.24–1.37.
		{"v1.24.9", "3.5.6", "v1.24.17"},
		{"v1.25.3", "3.5.9", "v1.25.16"},
		{"v1.26.15", "3.5.10", "v1.26.15"},
		{"v1.27.16", "3.5.12", "v1.27.16"},
		{"v1.28.15", "3.5.15", "v1.28.15"},
		{"v1.29.6", "3.5.12", "v1.29.6"},
		{"v1.30.14", "3.5.15", "v1.30.14"},
		{"v1.31.14", "3.5.24", "v1.31.14"},
		{"v1.32.13", "3.5.24", "v1.32.13"},
		{"v1.33.6", "3.5.24", "v1.33.6"},
		{"v1.34.3", "3.6.5", "v1.34.3"},
		{"v1.35.4", "3.6.6", "v1.35.4"},
		{"v1.36.3", "3.6.8", "v1.36.3"},
		{"v1.37.2", "3.7.0", "v1.37.2"},
		// Patch releases: the highest known release at or below k, else the
		// lowest known one of k's minor.
		{"v1.30.0", "3.5.12", "v1.30.4"},
		{"v1.30.13", "3.5.12", "v1.30.4"},
		{"v1.30.15", "3.5.15", "v1.30.14"},
		{"v1.31.0", "3.5.15", "v1.31.0"},
		{"v1.31.13", "3.5.15", "v1.31.0"},
		{"v1.32.1", "3.5.16", "v1.32.2"},
		{"v1.32.12", "3.5.16", "v1.32.2"},
		{"v1.33.13", "3.5.24", "v1.33.13"},
		{"v1.34.0", "3.6.4", "v1.34.0"},
		{"v1.34.1", "3.6.4", "v1.34.0"},
		{"v1.34.2", "3.6.5", "v1.34.2"},
		{"v1.34.9", "3.6.5", "v1.34.4"},
		{"v1.35.0", "3.6.6", "v1.35.4"},
		{"v1.36.0", "3.6.8", "v1.36.1"},
		{"v1.36.2", "3.6.8", "v1.36.1"},
		{"v1.37.0", "3.7.0", "v1.37.2"},
		// Pre-releases and build metadata.
		{"v1.36.0-rc.1", "3.6.8", "v1.36.1"},
		{"v1.34.2-rc.0", "3.6.4", "v1.34.0"},
		{"v1.34.2+vmware.1", "3.6.5", "v1.34.2"},
		{"v1.37.0-alpha.3", "3.7.0", "v1.37.2"},
		// No table.
		{"v1.20.0", "", ""},
		{"v1.23.17", "", ""},
		{"v1.38.0", "", ""},
		{"v1.40.0", "", ""},
		{"v2.34.0", "", ""},
		{"v0.34.0", "", ""},
	}
	for _, c := range cases {
		t.Run(c.k, func(t *testing.T) {
			k, err := ParseVersion(c.k)
			require.NoError(t, err)
			v, src, err := DefaultEtcdVersion(k)
			if c.etcd == "" {
				require.Error(t, err)
				assert.Equal(t, "no kubeadm etcd default known for "+c.k, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.etcd, v.String())
			assert.Contains(t, src, "kubeadm "+c.release+" SupportedEtcdVersion")
		})
	}
}

func TestDefaultEtcdVersionFallsBackLikeKubeadm(t *testing.T) {
	// kubeadm v1.37.2 publishes no row for 1.37; constants.EtcdSupportedVersion
	// then uses the nearest row.
	v, src, err := DefaultEtcdVersion(semver.MustParse("1.37.2"))
	require.NoError(t, err)
	assert.Equal(t, "3.7.0", v.String())
	assert.Equal(t, "kubeadm v1.37.2 SupportedEtcdVersion (no 1.37 row; kubeadm falls back to the nearest, 1.36)", src)

	v, src, err = DefaultEtcdVersion(semver.MustParse("1.36.3"))
	require.NoError(t, err)
	assert.Equal(t, "3.6.8", v.String())
	assert.Equal(t, "kubeadm v1.36.3 SupportedEtcdVersion", src)
}

func TestEtcdFor(t *testing.T) {
	cases := []struct {
		k, tag string
		want   string
		src    string
		err    string
	}{
		{"v1.34.3", "", "3.6.5", "kubeadm's default for v1.34.3", ""},
		{"v1.34.3", "3.5.24-0", "3.5.24", "imageTag 3.5.24-0", ""},
		{"v1.33.5", "3.6.5-0", "3.6.5", "imageTag 3.6.5-0", ""},
		{"v1.36.1", "v3.7.0", "3.7.0", "imageTag v3.7.0", ""},
		{"v1.40.0", "3.7.1-0", "3.7.1", "imageTag 3.7.1-0", ""},
		{"v1.40.0", "", "", "", "no kubeadm etcd default known for v1.40.0"},
		{"v1.35.0", "latest", "", "", `"latest" is not an etcd version`},
	}
	for _, c := range cases {
		t.Run(c.k+"/"+c.tag, func(t *testing.T) {
			v, src, err := EtcdFor(semver.MustParse(c.k[1:]), c.tag)
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, v.String())
			assert.Equal(t, c.src, src)
		})
	}
}

// TestEtcdTablesAreSound checks the table as data: every release and tag
// parses, releases are unique, and every Kubernetes minor 1.24–1.37 has a
// default of etcd 3.5, 3.6 or 3.7.
func TestEtcdTablesAreSound(t *testing.T) {
	seen := map[string]bool{}
	for _, tbl := range kubeadmTables {
		require.False(t, seen[tbl.release], "release %s listed twice", tbl.release)
		seen[tbl.release] = true
		_, err := ParseVersion(tbl.release)
		require.NoError(t, err)
		require.NotEmpty(t, tbl.etcd)
		for m, tag := range tbl.etcd {
			_, err := ParseEtcdVersion(tag)
			require.NoError(t, err, "%s row 1.%d", tbl.release, m)
		}
	}
	for minor := uint64(24); minor <= 37; minor++ {
		v, _, err := DefaultEtcdVersion(semver.Version{Major: 1, Minor: minor, Patch: 0})
		require.NoError(t, err, "1.%d", minor)
		assert.Equal(t, uint64(3), v.Major)
		assert.Contains(t, []uint64{5, 6, 7}, v.Minor, fmt.Sprintf("1.%d → %s", minor, v))
	}
}
