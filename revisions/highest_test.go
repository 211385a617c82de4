package revisions_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

func cp(t testing.TB, version, etcdTag string) revisions.Snapshot {
	t.Helper()
	return editKCP(t, func(k *controlplanev1.KubeadmControlPlane) {
		k.Spec.Version = version
		k.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = etcdTag
	})
}

// cpRun is what a KubeadmControlPlane at version and etcdTag runs, read
// from the typed object.
func cpRun(t testing.TB, version, etcdTag string) revisions.Run {
	t.Helper()
	kcp := newKCP()
	kcp.Spec.Version = version
	kcp.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = etcdTag
	run, err := revisions.RunOfKubeadmControlPlane(kcp)
	require.NoError(t, err)
	return run
}

func rev(n int64, s revisions.Snapshot) revisions.Revision {
	return revisions.Revision{Snapshot: s, Record: revisions.Record{Revision: n, History: []int64{n}}}
}

func TestRunOf(t *testing.T) {
	tests := []struct {
		name          string
		snap          revisions.Snapshot
		wantK, wantE  string
		wantErr       bool
		wantErrString string
	}{
		{"kubeadm default", cp(t, "v1.34.2", ""), "v1.34.2", "3.6.5", false, ""},
		{"kubeadm default, older patch", cp(t, "v1.33.5", ""), "v1.33.5", "3.5.24", false, ""},
		{"explicit tag", cp(t, "v1.33.5", "3.6.6-0"), "v1.33.5", "3.6.6", false, ""},
		{"unknown kubeadm", cp(t, "v1.40.0", ""), "v1.40.0", "", true, "no kubeadm etcd default"},
		{"bad version", cp(t, "latest", ""), "latest", "", true, "latest"},
		{"bad tag", cp(t, "v1.34.2", "stable"), "v1.34.2", "", true, "stable"},
		{"machine deployment", mdSnap(t, newMD()), "", "", true, "MachineDeployment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := revisions.RunOf(tt.snap)
			if tt.snap.Kind == revisions.KindKubeadmControlPlane {
				// The typed reading agrees with the content's.
				var kcp controlplanev1.KubeadmControlPlane
				require.NoError(t, json.Unmarshal([]byte(`{"spec":`+string(tt.snap.Data)+`}`), &kcp))
				typed, typedErr := revisions.RunOfKubeadmControlPlane(&kcp)
				assert.Equal(t, run, typed)
				assert.Equal(t, err != nil, typedErr != nil, "typed error: %v, content error: %v", typedErr, err)
			}
			assert.Equal(t, tt.wantK, run.Kubernetes.Text())
			assert.Equal(t, tt.wantE, run.Etcd.Text())
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErrString)
			} else {
				require.NoError(t, err)
			}
		})
	}
}

func TestHighestOf(t *testing.T) {
	tests := []struct {
		name string
		revs []revisions.Revision
		want revisions.HighestRun
	}{
		{"none", nil, revisions.HighestRun{}},
		{"upgrade then revert: etcd 3.6 from kubeadm's default of revision 2",
			[]revisions.Revision{rev(1, cp(t, "v1.33.5", "")), rev(2, cp(t, "v1.34.2", "")), rev(3, cp(t, "v1.33.5", ""))},
			revisions.HighestRun{Kubernetes: "v1.34.2", KubernetesRevision: 2, Etcd: "3.6.5", EtcdRevision: 2}},
		{"in any order",
			[]revisions.Revision{rev(3, cp(t, "v1.33.5", "")), rev(1, cp(t, "v1.33.5", "")), rev(2, cp(t, "v1.34.2", ""))},
			revisions.HighestRun{Kubernetes: "v1.34.2", KubernetesRevision: 2, Etcd: "3.6.5", EtcdRevision: 2}},
		{"explicit etcd tag above the default",
			[]revisions.Revision{rev(1, cp(t, "v1.34.2", "")), rev(2, cp(t, "v1.33.5", "3.6.6-0"))},
			revisions.HighestRun{Kubernetes: "v1.34.2", KubernetesRevision: 1, Etcd: "3.6.6", EtcdRevision: 2}},
		{"higher patch of the same minor wins",
			[]revisions.Revision{rev(1, cp(t, "v1.34.3", "")), rev(2, cp(t, "v1.34.2", ""))},
			revisions.HighestRun{Kubernetes: "v1.34.3", KubernetesRevision: 1, Etcd: "3.6.5", EtcdRevision: 2}},
		{"a tie cites the latest revision",
			[]revisions.Revision{rev(4, cp(t, "v1.34.2", "")), rev(2, cp(t, "v1.34.2", ""))},
			revisions.HighestRun{Kubernetes: "v1.34.2", KubernetesRevision: 4, Etcd: "3.6.5", EtcdRevision: 4}},
		{"unparseable and unknown versions are skipped",
			[]revisions.Revision{rev(1, cp(t, "v1.33.5", "")), rev(2, cp(t, "latest", "")), rev(3, cp(t, "v1.40.0", "")), rev(4, cp(t, "v1.33.5", "bogus"))},
			revisions.HighestRun{Kubernetes: "v1.40.0", KubernetesRevision: 3, Etcd: "3.5.24", EtcdRevision: 1}},
		{"worker revisions are skipped",
			[]revisions.Revision{rev(1, cp(t, "v1.33.5", "")), rev(9, mdSnap(t, newMD()))},
			revisions.HighestRun{Kubernetes: "v1.33.5", KubernetesRevision: 1, Etcd: "3.5.24", EtcdRevision: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, revisions.HighestOf(tt.revs))
		})
	}
}

func TestFoldHighest(t *testing.T) {
	h := revisions.HighestRun{Kubernetes: "v1.35.0", KubernetesRevision: 7, Etcd: "3.6.6", EtcdRevision: 7}
	assert.Equal(t, h, revisions.FoldHighest(h, cp(t, "v1.34.2", ""), 8), "lower versions do not lower it")

	// A malformed recorded value is replaced.
	bad := revisions.HighestRun{Kubernetes: "garbage", Etcd: "garbage"}
	assert.Equal(t, revisions.HighestRun{Kubernetes: "v1.34.2", KubernetesRevision: 2, Etcd: "3.6.5", EtcdRevision: 2},
		revisions.FoldHighest(bad, cp(t, "v1.34.2", ""), 2))
}

func TestHighestRunHistory(t *testing.T) {
	h := revisions.HighestRun{Kubernetes: "v1.34.2", KubernetesRevision: 2, Etcd: "3.6.5", EtcdRevision: 4}
	assert.Equal(t, skew.History{
		HighestKubernetes: skew.ReadVersion("v1.34.2"), HighestKubernetesSource: "revision 2",
		HighestEtcd: skew.ReadEtcdVersion("3.6.5"), HighestEtcdSource: "revision 4",
	}, h.History())
	assert.Equal(t, skew.History{HighestKubernetes: skew.ReadVersion(""), HighestEtcd: skew.ReadEtcdVersion("")}, revisions.HighestRun{}.History())

	// The annotation round-trips through JSON.
	raw, err := json.Marshal(h)
	require.NoError(t, err)
	assert.JSONEq(t, `{"kubernetes":"v1.34.2","kubernetesRevision":2,"etcd":"3.6.5","etcdRevision":4}`, string(raw))
}

// The history makes the policy refuse the etcd downgrade of an undo.
func TestHighestFeedsSkew(t *testing.T) {
	revs := []revisions.Revision{rev(1, cp(t, "v1.33.5", "")), rev(2, cp(t, "v1.34.2", "")), rev(3, cp(t, "v1.34.2", "3.6.5-0"))}
	d := skew.EvaluateControlPlane(skew.ControlPlaneChange{
		Kind: "KubeadmControlPlane", Name: "dev-control-plane",
		OldVersion: skew.ReadVersion("v1.34.2"), OldEtcdImageTag: skew.ReadEtcdVersion("3.6.5-0"),
		NewVersion: skew.ReadVersion("v1.33.5"), NewEtcdImageTag: skew.ReadEtcdVersion(""),
		History: revisions.HighestOf(revs).History(),
	})
	require.False(t, d.Allowed())
	var rules []skew.RuleID
	for _, v := range d.Violations {
		rules = append(rules, v.Rule)
	}
	assert.Contains(t, rules, skew.RuleControlPlaneDowngrade)
}

// TestAdvanceKeepsWhatRanBefore: each new revision moves the highest run so
// far into Before; a change under the same revision keeps it.
func TestAdvanceKeepsWhatRanBefore(t *testing.T) {
	var h revisions.HighestRun
	h = h.Advance(cpRun(t, "v1.34.2", ""), 1, 0) // created
	before, ok := h.BeforeOf(1)
	require.True(t, ok)
	assert.Equal(t, revisions.HighestRun{}, before, "nothing ran before the first revision")

	h = h.Advance(cpRun(t, "v1.35.2", ""), 2, 1) // upgraded
	h = h.Advance(cpRun(t, "v1.36.1", ""), 3, 2) // bumped
	assert.Equal(t, "v1.36.1", h.Kubernetes)
	before, ok = h.BeforeOf(3)
	require.True(t, ok)
	assert.Equal(t, "v1.35.2", before.Kubernetes)
	assert.Equal(t, int64(2), before.KubernetesRevision)
	assert.Nil(t, before.Before, "Before holds one level only")

	// The same revision stamped again (a restart): Before is kept.
	again := h.Advance(cpRun(t, "v1.36.1", ""), 3, 3)
	before, ok = again.BeforeOf(3)
	require.True(t, ok)
	assert.Equal(t, "v1.35.2", before.Kubernetes)

	// Asked about another revision, Before is unknown.
	_, ok = h.BeforeOf(2)
	assert.False(t, ok)
	_, ok = revisions.HighestRun{Kubernetes: "v1.35.2"}.BeforeOf(0)
	assert.False(t, ok)

	// It survives the annotation's JSON.
	raw, err := json.Marshal(h)
	require.NoError(t, err)
	var back revisions.HighestRun
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, h, back)
}

// TestHistoryWith: what a stamp and a revision have run together, as package
// skew takes it, is the History of the stamp raised by that revision; a
// KubeadmRun is RunOf a snapshot of the same version and etcd image tag.
func TestHistoryWith(t *testing.T) {
	stamps := []revisions.HighestRun{
		{},
		{Kubernetes: "v1.35.2", KubernetesRevision: 3, Etcd: "3.6.6", EtcdRevision: 3},
		{Kubernetes: "v1.34.2", KubernetesRevision: 5, Etcd: "3.5.24", EtcdRevision: 2},
		{Kubernetes: "banana", KubernetesRevision: 1, Etcd: "three", EtcdRevision: 1},
	}
	specs := [][2]string{{"v1.34.2", ""}, {"v1.35.2", ""}, {"v1.33.5", "3.6.8-0"}, {"latest", ""}, {"v1.40.0", ""}, {"v1.34.2", "stable"}, {"", ""}}
	for _, h := range stamps {
		for _, spec := range specs {
			for _, revision := range []int64{0, 3, 4} {
				run, kerr := revisions.KubeadmRun(skew.ReadVersion(spec[0]), skew.ReadEtcdVersion(spec[1]))
				fromSnap, serr := revisions.RunOf(cp(t, spec[0], spec[1]))
				assert.Equal(t, fromSnap.Kubernetes.Text(), run.Kubernetes.Text(), spec)
				assert.Equal(t, fromSnap.Etcd.Text(), run.Etcd.Text(), spec)
				assert.Equal(t, serr != nil, kerr != nil, spec)
				assert.Equal(t, h.Raise(run, revision).History(), h.HistoryWith(run, revision), "%+v %v %d", h, spec, revision)
				assert.Equal(t, revisions.FoldHighest(h, cp(t, spec[0], spec[1]), revision), h.Raise(run, revision), "%+v %v %d", h, spec, revision)
			}
		}
	}
}
