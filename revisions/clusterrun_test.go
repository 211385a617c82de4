package revisions_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

func TestFormatAndParseRun(t *testing.T) {
	run := revisions.Run{Kubernetes: skew.ReadVersion("v1.34.3"), Etcd: skew.ReadEtcdVersion("3.6.5")}
	assert.Equal(t, "v1.34.3 etcd 3.6.5", revisions.FormatRun(run))
	got, ok := revisions.ParseRun("v1.34.3 etcd 3.6.5")
	require.True(t, ok)
	assert.Equal(t, run, got)
	assert.Equal(t, "v1.34.3", revisions.FormatRun(revisions.Run{Kubernetes: skew.ReadVersion("v1.34.3")}), "no etcd known (a contract control plane)")
	got, ok = revisions.ParseRun("v1.34.3")
	require.True(t, ok)
	assert.Equal(t, "v1.34.3", got.Kubernetes.Text())
	assert.False(t, got.Etcd.Valid())
	assert.Equal(t, "", revisions.FormatRun(revisions.Run{Kubernetes: skew.ReadVersion("latest")}))
	for _, bad := range []string{"", "latest", "v1.34.3 etcd", "v1.34.3 etcd nope", " v1.34.3", "v1.34.3 etcd 3.6.5 etcd 3.6.6"} {
		_, ok := revisions.ParseRun(bad)
		assert.False(t, ok, "%q", bad)
	}
}

// A control plane's record carries what its revision runs, derived from
// its data (an etcd tag pinned above kubeadm's default included); other
// kinds' records do not.
func TestRolloutRevisionCarriesItsRun(t *testing.T) {
	kcp := newKCP()
	cr := revisions.RolloutRevision(kcp, kcpGVK, kcpSnap(t, kcp), fullRecord())
	assert.Equal(t, "v1.34.2 etcd 3.6.5", cr.Annotations[revisions.AnnotationRun])
	assert.NotContains(t, cr.Labels, revisions.LabelCluster, "the Recorder names the Cluster, from the stored object")

	pinned := newKCP()
	pinned.Spec.Version = "v1.33.7"
	pinned.Spec.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag = "3.6.5-0"
	cr = revisions.RolloutRevision(pinned, kcpGVK, kcpSnap(t, pinned), fullRecord())
	assert.Equal(t, "v1.33.7 etcd 3.6.5", cr.Annotations[revisions.AnnotationRun])

	md := newMD()
	cr = revisions.RolloutRevision(md, mdGVK, mdSnap(t, md), fullRecord())
	assert.NotContains(t, cr.Annotations, revisions.AnnotationRun)
}

func TestClusterRunOf(t *testing.T) {
	kcp := newKCP()
	cr := revisions.RolloutRevision(kcp, kcpGVK, kcpSnap(t, kcp), fullRecord())
	_, ok := revisions.ClusterRunOf(cr)
	assert.False(t, ok, "a record naming no Cluster (an earlier release's) does not count")
	cr.Labels[revisions.LabelCluster] = "dev"
	run, ok := revisions.ClusterRunOf(cr)
	require.True(t, ok)
	assert.Equal(t, "v1.34.2 etcd 3.6.5", revisions.FormatRun(run.Run))
	assert.Equal(t, fullRecord().Revision, run.Revision)
	assert.Equal(t, revisions.KindKubeadmControlPlane, run.Kind)
	assert.Equal(t, "default/"+cr.Name, run.Record)

	cr.Annotations[revisions.AnnotationRun] = "garbage"
	_, ok = revisions.ClusterRunOf(cr)
	assert.False(t, ok, "a run that does not read")
	md := newMD()
	mdRec := revisions.RolloutRevision(md, mdGVK, mdSnap(t, md), fullRecord())
	mdRec.Labels[revisions.LabelCluster] = "dev"
	mdRec.Annotations[revisions.AnnotationRun] = "v1.34.2"
	_, ok = revisions.ClusterRunOf(mdRec)
	assert.False(t, ok, "a worker pool's record runs no control plane")
}

func TestHighestOfCluster(t *testing.T) {
	run := func(n int64, text, name string) revisions.ClusterRun {
		r, ok := revisions.ParseRun(text)
		require.True(t, ok)
		return revisions.ClusterRun{Run: r, Revision: n, Kind: revisions.KindKubeadmControlPlane, Record: "ns/" + name}
	}
	h := revisions.HighestOfCluster("demo", []revisions.ClusterRun{
		run(5, "v1.34.3 etcd 3.5.24", "a"), // etcd pinned below the default
		run(4, "v1.33.7 etcd 3.6.5", "b"),
		run(2, "v1.32.4 etcd 3.5.24", "c"),
	})
	assert.Equal(t, "v1.34.3", h.HighestKubernetes.Text())
	assert.Equal(t, "revision 5 of a KubeadmControlPlane of Cluster demo recorded in RolloutRevision ns/a", h.HighestKubernetesSource)
	assert.Equal(t, "3.6.5", h.HighestEtcd.Text())
	assert.True(t, strings.HasSuffix(h.HighestEtcdSource, "RolloutRevision ns/b"), h.HighestEtcdSource)
	assert.Equal(t, skew.History{}, revisions.HighestOfCluster("demo", nil))
}

func TestClusterLabelValue(t *testing.T) {
	assert.Equal(t, "demo", revisions.ClusterLabelValue("demo"))
	assert.Equal(t, "", revisions.ClusterLabelValue(strings.Repeat("x", 64)), "not a label value")
	assert.Equal(t, "", revisions.ClusterLabelValue(""))
}
