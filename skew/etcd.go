package skew

import (
	"fmt"
	"slices"

	"github.com/blang/semver/v4"
)

// Which etcd does a control plane run?
//
// kubeadm deploys the etcd image tag set in
// kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag when there is
// one; otherwise it looks its own Kubernetes version up in the map
// SupportedEtcdVersion (cmd/kubeadm/app/constants/constants.go in
// k8s.io/kubernetes) through constants.EtcdSupportedVersion, which falls back
// to the nearest entry when the map has none for that minor (see v1.37.2
// below). Cluster API machines run the kubeadm of their own Kubernetes version,
// so the table that counts for a control plane at Kubernetes k is the one
// published in the kubeadm release of k's minor.
//
// Patch releases matter: kubeadm changes the map in patch releases, so the
// same Kubernetes minor gets different etcd versions depending on which
// kubeadm deploys it. For example 1.34 gets etcd 3.6.4-0 from kubeadm v1.34.0
// but 3.6.5-0 from v1.34.2 and later; 1.31 gets 3.5.15-0 from v1.31.0 but
// 3.5.24-0 from v1.31.14; and later releases rewrite the rows of older minors
// (1.34 → 3.6.6-0 in v1.35.4, 3.6.8-0 in v1.36.3, 3.7.0-0 in v1.37.2). The etcd
// minor a control plane has reached therefore depends on its history, which is
// why the guard compares against the highest etcd a control plane has run and
// not only against this table.
//
// Each entry below is the map as published in that release of
// k8s.io/kubernetes (read from the module at that version), including the rows
// for minors that release no longer deploys. Only the row for the release's
// own minor is used (or kubeadm's nearest fallback when that row is missing).

// kubeadmTable is SupportedEtcdVersion as published by one kubeadm release.
type kubeadmTable struct {
	release string            // k8s.io/kubernetes module version the map was read from
	etcd    map[uint64]string // Kubernetes minor (of major 1) → etcd image tag
}

// kubeadmTables lists the kubeadm releases whose SupportedEtcdVersion is known,
// each read from cmd/kubeadm/app/constants/constants.go of k8s.io/kubernetes at
// the release named.
var kubeadmTables = []kubeadmTable{
	// k8s.io/kubernetes@v1.24.17 cmd/kubeadm/app/constants/constants.go:494
	{"v1.24.17", map[uint64]string{13: "3.2.24", 14: "3.3.10", 15: "3.3.10", 16: "3.3.17-0", 17: "3.4.3-0", 18: "3.4.3-0", 19: "3.4.13-0", 20: "3.4.13-0", 21: "3.4.13-0", 22: "3.5.6-0", 23: "3.5.6-0", 24: "3.5.6-0"}},
	// k8s.io/kubernetes@v1.25.16 cmd/kubeadm/app/constants/constants.go:489
	{"v1.25.16", map[uint64]string{13: "3.2.24", 14: "3.3.10", 15: "3.3.10", 16: "3.3.17-0", 17: "3.4.3-0", 18: "3.4.3-0", 19: "3.4.13-0", 20: "3.4.13-0", 21: "3.4.13-0", 22: "3.5.6-0", 23: "3.5.6-0", 24: "3.5.6-0", 25: "3.5.9-0"}},
	// k8s.io/kubernetes@v1.26.15 cmd/kubeadm/app/constants/constants.go:471
	{"v1.26.15", map[uint64]string{13: "3.2.24", 14: "3.3.10", 15: "3.3.10", 16: "3.3.17-0", 17: "3.4.3-0", 18: "3.4.3-0", 19: "3.4.13-0", 20: "3.4.13-0", 21: "3.4.13-0", 22: "3.5.10-0", 23: "3.5.10-0", 24: "3.5.10-0", 25: "3.5.10-0", 26: "3.5.10-0", 27: "3.5.10-0", 28: "3.5.10-0", 29: "3.5.10-0"}},
	// k8s.io/kubernetes@v1.27.16 cmd/kubeadm/app/constants/constants.go:471
	{"v1.27.16", map[uint64]string{13: "3.2.24", 14: "3.3.10", 15: "3.3.10", 16: "3.3.17-0", 17: "3.4.3-0", 18: "3.4.3-0", 19: "3.4.13-0", 20: "3.4.13-0", 21: "3.4.13-0", 22: "3.5.12-0", 23: "3.5.12-0", 24: "3.5.12-0", 25: "3.5.12-0", 26: "3.5.12-0", 27: "3.5.12-0"}},
	// k8s.io/kubernetes@v1.28.15 cmd/kubeadm/app/constants/constants.go:462
	{"v1.28.15", map[uint64]string{22: "3.5.15-0", 23: "3.5.15-0", 24: "3.5.15-0", 25: "3.5.15-0", 26: "3.5.15-0", 27: "3.5.15-0", 28: "3.5.15-0", 29: "3.5.15-0", 30: "3.5.15-0", 31: "3.5.15-0"}},
	// k8s.io/kubernetes@v1.29.6 cmd/kubeadm/app/constants/constants.go:466
	{"v1.29.6", map[uint64]string{22: "3.5.12-0", 23: "3.5.12-0", 24: "3.5.12-0", 25: "3.5.12-0", 26: "3.5.12-0", 27: "3.5.12-0", 28: "3.5.12-0", 29: "3.5.12-0", 30: "3.5.12-0"}},
	// k8s.io/kubernetes@v1.30.4 cmd/kubeadm/app/constants/constants.go:481
	{"v1.30.4", map[uint64]string{22: "3.5.12-0", 23: "3.5.12-0", 24: "3.5.12-0", 25: "3.5.12-0", 26: "3.5.12-0", 27: "3.5.12-0", 28: "3.5.12-0", 29: "3.5.12-0", 30: "3.5.12-0"}},
	// k8s.io/kubernetes@v1.30.14 cmd/kubeadm/app/constants/constants.go:481
	{"v1.30.14", map[uint64]string{22: "3.5.15-0", 23: "3.5.15-0", 24: "3.5.15-0", 25: "3.5.15-0", 26: "3.5.15-0", 27: "3.5.15-0", 28: "3.5.15-0", 29: "3.5.15-0", 30: "3.5.15-0", 31: "3.5.15-0"}},
	// k8s.io/kubernetes@v1.31.0 cmd/kubeadm/app/constants/constants.go:483
	{"v1.31.0", map[uint64]string{29: "3.5.15-0", 30: "3.5.15-0", 31: "3.5.15-0"}},
	// k8s.io/kubernetes@v1.31.14 cmd/kubeadm/app/constants/constants.go:483
	{"v1.31.14", map[uint64]string{29: "3.5.24-0", 30: "3.5.24-0", 31: "3.5.24-0"}},
	// k8s.io/kubernetes@v1.32.2 cmd/kubeadm/app/constants/constants.go:497
	{"v1.32.2", map[uint64]string{29: "3.5.16-0", 30: "3.5.16-0", 31: "3.5.16-0", 32: "3.5.16-0"}},
	// k8s.io/kubernetes@v1.32.13 cmd/kubeadm/app/constants/constants.go:497
	{"v1.32.13", map[uint64]string{29: "3.5.24-0", 30: "3.5.24-0", 31: "3.5.24-0", 32: "3.5.24-0"}},
	// k8s.io/kubernetes@v1.33.6 cmd/kubeadm/app/constants/constants.go:497
	{"v1.33.6", map[uint64]string{30: "3.5.24-0", 31: "3.5.24-0", 32: "3.5.24-0", 33: "3.5.24-0"}},
	// k8s.io/kubernetes@v1.33.13 cmd/kubeadm/app/constants/constants.go:502
	{"v1.33.13", map[uint64]string{30: "3.5.24-0", 31: "3.5.24-0", 32: "3.5.24-0", 33: "3.5.24-0"}},
	// k8s.io/kubernetes@v1.34.0 cmd/kubeadm/app/constants/constants.go:500
	{"v1.34.0", map[uint64]string{31: "3.5.21-0", 32: "3.5.21-0", 33: "3.5.21-0", 34: "3.6.4-0"}},
	// k8s.io/kubernetes@v1.34.2 cmd/kubeadm/app/constants/constants.go:500
	{"v1.34.2", map[uint64]string{31: "3.5.24-0", 32: "3.5.24-0", 33: "3.5.24-0", 34: "3.6.5-0"}},
	// k8s.io/kubernetes@v1.34.3 cmd/kubeadm/app/constants/constants.go:500
	{"v1.34.3", map[uint64]string{31: "3.5.24-0", 32: "3.5.24-0", 33: "3.5.24-0", 34: "3.6.5-0"}},
	// k8s.io/kubernetes@v1.34.4 cmd/kubeadm/app/constants/constants.go:500
	{"v1.34.4", map[uint64]string{31: "3.5.24-0", 32: "3.5.24-0", 33: "3.5.24-0", 34: "3.6.5-0"}},
	// k8s.io/kubernetes@v1.35.4 cmd/kubeadm/app/constants/constants.go:505; this
	// release keys the map by getSkewedKubernetesVersion(-2, -1, 0) of its own
	// version, i.e. 1.33, 1.34 and 1.35.
	{"v1.35.4", map[uint64]string{33: "3.5.24-0", 34: "3.6.6-0", 35: "3.6.6-0"}},
	// k8s.io/kubernetes@v1.36.1 cmd/kubeadm/app/constants/constants.go:515
	{"v1.36.1", map[uint64]string{34: "3.6.8-0", 35: "3.6.8-0", 36: "3.6.8-0"}},
	// k8s.io/kubernetes@v1.36.3 cmd/kubeadm/app/constants/constants.go:515
	{"v1.36.3", map[uint64]string{34: "3.6.8-0", 35: "3.6.8-0", 36: "3.6.8-0"}},
	// k8s.io/kubernetes@v1.37.2 cmd/kubeadm/app/constants/constants.go:511, as
	// published: the map has no row for 1.37, so kubeadm v1.37.2 deploys the
	// nearest row (1.36: 3.7.0-0), which is also its DefaultEtcdVersion.
	{"v1.37.2", map[uint64]string{34: "3.7.0-0", 35: "3.7.0-0", 36: "3.7.0-0"}},
}

// parsedTable is a kubeadmTable read once, for lookups: its release and its
// etcd versions parsed.
type parsedTable struct {
	kubeadmTable
	version semver.Version
	// defaults is etcd, each tag parsed.
	defaults map[uint64]semver.Version
}

// etcdTables is kubeadmTables parsed and sorted by release.
var etcdTables = func() []parsedTable {
	out := make([]parsedTable, 0, len(kubeadmTables))
	for _, t := range kubeadmTables {
		p := parsedTable{kubeadmTable: t, version: semver.MustParse(t.release[1:]), defaults: make(map[uint64]semver.Version, len(t.etcd))}
		for minor, tag := range t.etcd {
			v, err := ParseEtcdVersion(tag)
			if err != nil {
				panic(fmt.Sprintf("kubeadm %s SupportedEtcdVersion 1.%d: %v", t.release, minor, err))
			}
			p.defaults[minor] = v
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b parsedTable) int { return a.version.Compare(b.version) })
	return out
}()

// tableFor returns the kubeadm release table that deploys Kubernetes k: among
// the known releases of k's minor, the highest at or below k, else the lowest.
func tableFor(k semver.Version) (parsedTable, bool) {
	var lowest, best *parsedTable
	for i := range etcdTables {
		t := &etcdTables[i]
		if MinorOf(t.version) != MinorOf(k) {
			continue
		}
		if lowest == nil {
			lowest = t
		}
		if t.version.LTE(k) {
			best = t
		}
	}
	switch {
	case best != nil:
		return *best, true
	case lowest != nil:
		return *lowest, true
	}
	return parsedTable{}, false
}

// DefaultEtcdVersion returns the etcd version kubeadm deploys for a control
// plane at Kubernetes version k (Cluster API machines run the kubeadm of their
// own Kubernetes version) and the source it came from, e.g.
// "kubeadm v1.36.3 SupportedEtcdVersion". Versions whose minor no known kubeadm
// release covers (before v1.24, after v1.37) give an error
// "no kubeadm etcd default known for v1.40.0".
func DefaultEtcdVersion(k semver.Version) (semver.Version, string, error) {
	t, ok := tableFor(k)
	if !ok {
		return semver.Version{}, "", fmt.Errorf("no kubeadm etcd default known for %s", vs(k))
	}
	source := "kubeadm " + t.release + " SupportedEtcdVersion"
	v, ok := t.defaults[k.Minor]
	if !ok {
		// constants.EtcdSupportedVersion: outside the map's keys, use the
		// nearest end of it.
		keys := make([]uint64, 0, len(t.defaults))
		for m := range t.defaults {
			keys = append(keys, m)
		}
		nearest := slices.Max(keys)
		if k.Minor < slices.Min(keys) {
			nearest = slices.Min(keys)
		}
		v = t.defaults[nearest]
		source += fmt.Sprintf(" (no 1.%d row; kubeadm falls back to the nearest, 1.%d)", k.Minor, nearest)
	}
	return v, source, nil
}

// EtcdFor returns the etcd version a control plane at Kubernetes version k
// runs: the explicit image tag when it is not empty (source "imageTag 3.6.5-0"),
// else kubeadm's default for k (source "kubeadm's default for v1.34.3").
func EtcdFor(k semver.Version, imageTag string) (semver.Version, string, error) {
	return EtcdForTag(k, ReadEtcdVersion(imageTag))
}

// EtcdForTag is EtcdFor of an image tag already read: an unset tag gives
// kubeadm's default for k; one that is not an etcd version, the error that
// reading it gave.
func EtcdForTag(k semver.Version, tag EtcdVersion) (semver.Version, string, error) {
	if tag.text != "" {
		if !tag.Valid() {
			return semver.Version{}, "", tag.err
		}
		return tag.v, "imageTag " + tag.text, nil
	}
	v, _, err := DefaultEtcdVersion(k)
	if err != nil {
		return semver.Version{}, "", err
	}
	return v, "kubeadm's default for " + vs(k), nil
}
