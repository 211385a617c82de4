package skew

import (
	"fmt"
	"slices"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseVersion(t *testing.T) {
	cases := []struct {
		in                  string
		major, minor, patch uint64
		pre, build          string
		err                 bool
	}{
		{in: "v1.35.2", major: 1, minor: 35, patch: 2},
		{in: "1.35.2", major: 1, minor: 35, patch: 2},
		{in: "v1.35.2+vmware.1", major: 1, minor: 35, patch: 2, build: "vmware.1"},
		{in: "v1.36.0-rc.1", major: 1, minor: 36, patch: 0, pre: "rc.1"},
		{in: "v1.24.17", major: 1, minor: 24, patch: 17},
		{in: " v1.30.4 ", err: true},
		{in: "v1.35", err: true},
		{in: "1.36", err: true},
		{in: "v1.37.0-alpha.0+abc", major: 1, minor: 37, pre: "alpha.0", build: "abc"},
		{in: "", err: true},
		{in: "   ", err: true},
		{in: "v", err: true},
		{in: "latest", err: true},
		{in: "v1.3x.0", err: true},
		{in: "v1.35.2.1", err: true},
		{in: "1.35-rc.1", err: true},
		{in: "v1.35.2-", err: true},
		{in: "V1.35.2", err: true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			v, err := ParseVersion(c.in)
			if c.err {
				require.Error(t, err)
				assert.Contains(t, err.Error(), `"`+c.in+`"`, "the error names the input")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, [3]uint64{c.major, c.minor, c.patch}, [3]uint64{v.Major, v.Minor, v.Patch})
			pre := ""
			for i, p := range v.Pre {
				if i > 0 {
					pre += "."
				}
				pre += p.String()
			}
			assert.Equal(t, c.pre, pre)
			build := ""
			for i, b := range v.Build {
				if i > 0 {
					build += "."
				}
				build += b
			}
			assert.Equal(t, c.build, build)
		})
	}
}

func TestParseEtcdVersion(t *testing.T) {
	cases := []struct {
		in   string
		want string // semver String(), "" for an error
	}{
		{"3.5.24-0", "3.5.24"},
		{"v3.6.5", "3.6.5"},
		{"3.6.8-0", "3.6.8"},
		{"3.7.0-0", "3.7.0"},
		{"3.6.5", "3.6.5"},
		{"3.4.13-1", "3.4.13"},
		{"3.2.24", "3.2.24"},
		{"3.6.0-rc.1", "3.6.0-rc.1"},
		{"3.6.0-rc.1-0", "3.6.0-rc.1"},
		{"v3.7.0-alpha.0", "3.7.0-alpha.0"},
		{" 3.5.21-0 ", "3.5.21"},
		{"3.6.0-1-0", "3.6.0"},
		{"3.6.5-0+meta", "3.6.5+meta"},
		{"3.6", ""},
		{"0.0.-0-0", ""},
		{"", ""},
		{"latest", ""},
		{"3.x.1-0", ""},
		{"-0", ""},
		{"sha256:abcd", ""},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			v, err := ParseEtcdVersion(c.in)
			if c.want == "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), `"`+c.in+`"`)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, v.String())
		})
	}
}

// TestReadVersion: a version read once keeps its text and gives the value,
// or the error, that parsing it gives.
func TestReadVersion(t *testing.T) {
	cases := []struct {
		in    string
		etcd  bool
		valid bool
		want  string // the value's String() when valid
		err   string // the error when not
	}{
		{in: "v1.35.2+vmware.1", valid: true, want: "1.35.2+vmware.1"},
		{in: "1.36.0-rc.1", valid: true, want: "1.36.0-rc.1"},
		{in: "v1.35", err: `"v1.35" is not a Kubernetes version`},
		{in: " ", err: `" " is not a Kubernetes version: the version is empty`},
		{in: "", err: `"" is not a Kubernetes version: the version is empty`},
		{in: "3.6.5-0", etcd: true, valid: true, want: "3.6.5"},
		{in: "latest", etcd: true, err: `"latest" is not an etcd version`},
		{in: "", etcd: true, err: `"" is not an etcd version: the image tag is empty`},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%q etcd=%v", c.in, c.etcd), func(t *testing.T) {
			var w written
			var parsed semver.Version
			var parseErr error
			if c.etcd {
				w = ReadEtcdVersion(c.in).written
				parsed, parseErr = ParseEtcdVersion(c.in)
			} else {
				w = ReadVersion(c.in).written
				parsed, parseErr = ParseVersion(c.in)
			}
			assert.Equal(t, c.in, w.Text())
			assert.Equal(t, c.valid, w.Valid())
			assert.Equal(t, parseErr, w.Err(), "the error of ParseVersion or ParseEtcdVersion")
			if !c.valid {
				require.Error(t, w.Err())
				assert.Contains(t, w.Err().Error(), c.err)
				assert.Equal(t, semver.Version{}, w.Semver())
				return
			}
			assert.Equal(t, c.want, w.Semver().String())
			assert.Equal(t, 0, parsed.Compare(w.Semver()))
		})
	}

	// A version never read is unset and not valid.
	assert.False(t, Version{}.Valid())
	assert.Empty(t, Version{}.Text())
	assert.Error(t, EtcdVersion{}.Err())
}

func TestMinor(t *testing.T) {
	m := MinorOf(semver.MustParse("1.35.2-rc.1+vmware.1"))
	assert.Equal(t, Minor{1, 35}, m)
	assert.Equal(t, "1.35", m.String())
	assert.Equal(t, "3.6", MinorOf(semver.MustParse("3.6.8")).String())

	less := []struct {
		a, b Minor
		want bool
	}{
		{Minor{1, 34}, Minor{1, 35}, true},
		{Minor{1, 35}, Minor{1, 35}, false},
		{Minor{1, 36}, Minor{1, 35}, false},
		{Minor{1, 99}, Minor{2, 0}, true},
		{Minor{2, 0}, Minor{1, 99}, false},
		{Minor{3, 5}, Minor{3, 6}, true},
	}
	for _, c := range less {
		assert.Equal(t, c.want, c.a.Less(c.b), "%v < %v", c.a, c.b)
	}

	after := []struct {
		a, b Minor
		want int
	}{
		{Minor{1, 36}, Minor{1, 35}, 1},
		{Minor{1, 35}, Minor{1, 36}, -1},
		{Minor{1, 35}, Minor{1, 35}, 0},
		{Minor{1, 37}, Minor{1, 24}, 13},
		{Minor{2, 0}, Minor{1, 37}, farApart},
		{Minor{1, 37}, Minor{2, 0}, -farApart},
		{Minor{1, 1 << 62}, Minor{1, 0}, farApart},
		{Minor{1, 0}, Minor{1, 1 << 62}, -farApart},
	}
	for _, c := range after {
		assert.Equal(t, c.want, c.a.minorsAfter(c.b), "%v after %v", c.a, c.b)
	}
	assert.Equal(t, Minor{1, 0}, Minor{1, 2}.add(-5))
	assert.Equal(t, Minor{1, 38}, Minor{1, 35}.add(3))
}

func TestKubeletSkew(t *testing.T) {
	cases := []struct {
		kubelet Minor
		skew    int
		oldest  Minor // oldest kubelet for an API server of kubelet's minor + 3
	}{
		{Minor{1, 23}, 2, Minor{1, 24}},
		{Minor{1, 24}, 2, Minor{1, 25}},
		{Minor{1, 25}, 3, Minor{1, 25}},
		{Minor{1, 26}, 3, Minor{1, 26}},
		{Minor{1, 34}, 3, Minor{1, 34}},
	}
	for _, c := range cases {
		assert.Equal(t, c.skew, kubeletSkew(c.kubelet), "skew of %v", c.kubelet)
		assert.Equal(t, c.oldest, oldestKubeletFor(c.kubelet.add(3)), "oldest kubelet for %v", c.kubelet.add(3))
	}
}

func TestViolationString(t *testing.T) {
	v := Violation{Rule: RuleControlPlaneDowngrade, Message: "a", Remedy: "b"}
	assert.Equal(t, "a [rule ControlPlaneDowngrade]; b", v.String())
	assert.True(t, Decision{}.Allowed())
	assert.True(t, Decision{Warnings: []string{"w"}}.Allowed())
	assert.False(t, Decision{Violations: []Violation{v}}.Allowed())
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{
		"v1.35.2", "1.35.2", "v1.35.2+vmware.1", "v1.36.0-rc.1", "", "v", "1.35", " v1.2.3 ",
		"01.02.03", "1.2.3-0", "v1.2.3-rc.01", "3.5.24-0", "v3.6.5", "1.2.3+", "18446744073709551616.0.0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseVersion(s); err == nil {
			again, err := ParseVersion(v.String())
			require.NoError(t, err, "re-parsing %q (from %q)", v.String(), s)
			require.Equal(t, 0, v.Compare(again), "%q re-parses as %q", v.String(), again.String())
			require.True(t, slices.Equal(v.Build, again.Build), "%q keeps its build metadata", v.String())
			withV, err := ParseVersion("v" + v.String())
			require.NoError(t, err)
			require.Equal(t, 0, v.Compare(withV))
			require.Equal(t, MinorOf(v), MinorOf(again))
			_, _, _ = DefaultEtcdVersion(v)
		}
		if v, err := ParseEtcdVersion(s); err == nil {
			again, err := ParseEtcdVersion(v.String())
			require.NoError(t, err, "re-parsing etcd %q (from %q)", v.String(), s)
			require.Equal(t, 0, v.Compare(again))
		}
		// Any input, anywhere, must give a decision rather than a panic.
		_ = EvaluateControlPlane(ControlPlaneChange{OldVersion: ReadVersion("v1.35.0"), NewVersion: ReadVersion(s), NewEtcdImageTag: ReadEtcdVersion(s), RunningVersions: ReadVersions([]string{s}), Workers: []Worker{{Kind: "Machine", Name: "m", Version: ReadVersion(s)}}})
		_ = EvaluateWorker(WorkerChange{OldVersion: ReadVersion(s), NewVersion: ReadVersion("v1.35.0"), ControlPlane: &ControlPlaneState{Version: ReadVersion(s)}})
	})
}
