package skew

import (
	"errors"
	"fmt"
	"strings"

	"github.com/blang/semver/v4"
)

// ParseVersion parses a Kubernetes version as users write it in Cluster API
// objects: "v1.35.2", "1.35.2", "v1.35.2+vmware.1", "v1.36.0-rc.1". Apart
// from a leading "v" it must be a full semantic version: "v1.35" is refused,
// as Cluster API and kubeadm refuse it, rather than guessed to be v1.35.0.
// The error names the input.
func ParseVersion(s string) (semver.Version, error) {
	if s == "" {
		return semver.Version{}, errEmptyVersion
	}
	if strings.TrimSpace(s) == "" {
		return semver.Version{}, fmt.Errorf("%q is not a Kubernetes version: the version is empty", s)
	}
	v, err := semver.Parse(strings.TrimPrefix(s, "v"))
	if err != nil {
		return semver.Version{}, fmt.Errorf("%q is not a Kubernetes version: %v", s, err)
	}
	return v, nil
}

// ParseEtcdVersion parses an etcd image tag as written in
// kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag or in kubeadm's
// tables: "3.5.24-0", "v3.6.5", "3.6.8-0". The trailing "-N" of kubeadm's
// tags is a revision of the container image, not a semver pre-release, so it
// is stripped: "3.6.5-0" is etcd 3.6.5. A real pre-release such as
// "3.6.0-rc.1" (or "3.6.0-rc.1-0") is kept. Apart from a leading "v" the tag
// must be a full semantic version. The error names the input.
func ParseEtcdVersion(tag string) (semver.Version, error) {
	if tag == "" {
		return semver.Version{}, errEmptyEtcdVersion
	}
	s := strings.TrimPrefix(strings.TrimSpace(tag), "v")
	if s == "" {
		return semver.Version{}, fmt.Errorf("%q is not an etcd version: the image tag is empty", tag)
	}
	build := ""
	if i := strings.IndexByte(s, '+'); i >= 0 {
		s, build = s[:i], s[i:]
	}
	for {
		i := strings.LastIndexByte(s, '-')
		if i <= 0 || !isDigits(s[i+1:]) {
			break
		}
		s = s[:i]
	}
	v, err := semver.Parse(s + build)
	if err != nil {
		return semver.Version{}, fmt.Errorf("%q is not an etcd version: %v", tag, err)
	}
	return v, nil
}

// The errors of an unset version and image tag, made once: most facts of a
// change leave some unset.
var (
	errEmptyVersion     = fmt.Errorf("%q is not a Kubernetes version: the version is empty", "")
	errEmptyEtcdVersion = fmt.Errorf("%q is not an etcd version: the image tag is empty", "")
)

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Version is a Kubernetes version as an object writes it, read once by
// ReadVersion where the facts of a change are gathered: the text as written
// and, when the text is a Kubernetes version, its value. The rules take
// Versions and never parse: a text that is not a version reaches them as
// such, and each rule words its refusal or warning from it.
type Version struct{ written }

// ReadVersion reads s, a Kubernetes version as written ("" when the field is
// unset), with ParseVersion.
func ReadVersion(s string) Version {
	v, err := ParseVersion(s)
	return Version{written{text: s, v: v, err: err}}
}

// ReadVersions reads each of vs with ReadVersion; nil gives nil.
func ReadVersions(vs []string) []Version {
	if vs == nil {
		return nil
	}
	out := make([]Version, len(vs))
	for i, s := range vs {
		out[i] = ReadVersion(s)
	}
	return out
}

// EtcdVersion is an etcd version or image tag as written ("3.6.5-0",
// "3.6.5"), read once by ReadEtcdVersion: the text and, when it is an etcd
// version, its value.
type EtcdVersion struct{ written }

// ReadEtcdVersion reads tag, an etcd image tag or version as written (""
// when unset: kubeadm's default applies), with ParseEtcdVersion.
func ReadEtcdVersion(tag string) EtcdVersion {
	v, err := ParseEtcdVersion(tag)
	return EtcdVersion{written{text: tag, v: v, err: err}}
}

// written is a version as written and what reading it gave. The zero value
// is a version never read, which is not valid.
type written struct {
	text string
	v    semver.Version
	err  error // why text is not a version; nil when it is one
}

// errNotRead is the error of a version never read.
var errNotRead = errors.New("no version was read")

// Text returns the version as written, "" when unset.
func (w written) Text() string { return w.text }

// Valid reports whether the text is a version.
func (w written) Valid() bool { return w.err == nil && w.text != "" }

// Semver returns the version's value; the zero semver.Version when it is
// not Valid.
func (w written) Semver() semver.Version { return w.v }

// Err says why the text is not a version, in the words of ParseVersion or
// ParseEtcdVersion; nil when it is Valid.
func (w written) Err() error {
	switch {
	case w.err != nil:
		return w.err
	case w.text == "":
		return errNotRead
	}
	return nil
}

// Minor is a Kubernetes or etcd major.minor. Two Minors compare with == and
// Less; patch, pre-release and build metadata play no part in it.
type Minor struct{ Major, Minor uint64 }

// MinorOf returns the major.minor of v.
func MinorOf(v semver.Version) Minor { return Minor{Major: v.Major, Minor: v.Minor} }

// String returns the minor as "1.35".
func (m Minor) String() string { return fmt.Sprintf("%d.%d", m.Major, m.Minor) }

// Less reports whether m is an older minor than o.
func (m Minor) Less(o Minor) bool {
	if m.Major != o.Major {
		return m.Major < o.Major
	}
	return m.Minor < o.Minor
}

// farApart is the distance reported between minors of different majors, or
// minors further apart than any skew rule cares about.
const farApart = 1 << 20

// minorsAfter returns how many minors m is after o: 1 for 1.36 after 1.35,
// -1 for 1.34 after 1.35. Minors of different majors are farApart.
func (m Minor) minorsAfter(o Minor) int {
	switch {
	case m.Major > o.Major:
		return farApart
	case m.Major < o.Major:
		return -farApart
	case m.Minor >= o.Minor:
		return int(min(m.Minor-o.Minor, farApart))
	default:
		return -int(min(o.Minor-m.Minor, farApart))
	}
}

// add returns the minor n minors after m (before it when n < 0), within m's
// major and never below x.0.
func (m Minor) add(n int) Minor {
	if n < 0 {
		d := uint64(-n)
		if d > m.Minor {
			return Minor{Major: m.Major}
		}
		return Minor{Major: m.Major, Minor: m.Minor - d}
	}
	return Minor{Major: m.Major, Minor: m.Minor + uint64(n)}
}

// v returns the minor as written in Kubernetes versions: "v1.35".
func (m Minor) v() string { return "v" + m.String() }

// firstKubeletSkew3 is the first kubelet minor that may be three minors older
// than the API server; older kubelets may be only two minors older.
var firstKubeletSkew3 = Minor{Major: 1, Minor: 25}

// kubeletSkew is how many minors a kubelet of minor k may be older than the
// API server it talks to: 3, or 2 for kubelets older than v1.25.
func kubeletSkew(k Minor) int {
	if k.Less(firstKubeletSkew3) {
		return 2
	}
	return 3
}

// oldestKubeletFor returns the oldest kubelet minor an API server of minor cp
// accepts under the version-skew policy.
func oldestKubeletFor(cp Minor) Minor {
	if k := cp.add(-3); !k.Less(firstKubeletSkew3) {
		return k
	}
	return cp.add(-2)
}

// vs formats a Kubernetes version with its leading "v": "v1.35.2+vmware.1".
func vs(v semver.Version) string { return "v" + v.String() }
