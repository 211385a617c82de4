package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// recordedRuns is a RecordedRuns holding runs per Cluster.
type recordedRuns map[string][]revisions.ClusterRun

func (r recordedRuns) ClusterRuns(_ context.Context, _, cluster string) ([]revisions.ClusterRun, error) {
	return r[cluster], nil
}

// clusterRun is revision n of a KubeadmControlPlane of Cluster demo, run
// as text says (revisions.FormatRun).
func clusterRun(t *testing.T, n int64, text string) revisions.ClusterRun {
	t.Helper()
	run, ok := revisions.ParseRun(text)
	require.True(t, ok, text)
	return revisions.ClusterRun{Run: run, Revision: n, Kind: revisions.KindKubeadmControlPlane, Record: "ns/demo-control-plane-" + strings.Repeat("a", 10)}
}

// A control plane created anew, its predecessor deleted with
// --cascade=orphan and its Machines gone, is judged as an update from what
// its Cluster's control planes ran, as their records say; a new Cluster,
// with no record, only against its workers.
func TestCreatedControlPlaneJudgedAgainstItsClustersRecords(t *testing.T) {
	workers := pool("demo-md-0", "v1.33.7", false)
	ran134 := recordedRuns{"demo": {clusterRun(t, 2, "v1.33.7 etcd 3.5.24"), clusterRun(t, 3, "v1.34.3 etcd 3.6.5")}}
	pinned := recordedRuns{"demo": {clusterRun(t, 2, "v1.33.7 etcd 3.6.5")}} // etcd pinned above kubeadm's default
	tests := []struct {
		name      string
		created   client.Object
		recorded  RecordedRuns
		wantRules []skew.RuleID
		wantFrom  string
	}{
		{name: "one minor below the recorded run: refused", created: identityKCP("", "demo", "v1.33.7"), recorded: ran134,
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade, skew.RuleEtcdDowngrade},
			wantFrom:  "revision 3 of a KubeadmControlPlane of Cluster demo recorded in RolloutRevision ns/demo-control-plane-aaaaaaaaaa"},
		{name: "found through the Cluster naming it, unlabelled: refused", created: identityKCP("", "", "v1.33.7"), recorded: ran134,
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade, skew.RuleEtcdDowngrade}},
		{name: "labelled for another Cluster: its own Cluster's records still count, refused", created: identityKCP("", "nope", "v1.33.7"), recorded: ran134,
			wantRules: []skew.RuleID{skew.RuleControlPlaneDowngrade, skew.RuleEtcdDowngrade}},
		{name: "at the recorded run: allowed", created: identityKCP("", "demo", "v1.34.3"), recorded: ran134},
		{name: "a patch below the recorded run, same minor: allowed", created: identityKCP("", "demo", "v1.34.1"), recorded: ran134},
		{name: "an etcd pinned above kubeadm's default, recreated with the default: refused", created: identityKCP("", "demo", "v1.33.7"), recorded: pinned,
			wantRules: []skew.RuleID{skew.RuleEtcdDowngrade}},
		{name: "a brand-new cluster, nothing recorded: allowed", created: identityKCP("", "demo", "v1.33.7"), recorded: recordedRuns{}},
		{name: "no reader of records (an older wiring): allowed", created: identityKCP("", "demo", "v1.33.7")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := identityPolicy(t, demoCluster(nil), workers)
			p.Recorded = tt.recorded
			d, _, err := p.Decide(context.Background(), nil, tt.created)
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.wantRules, rulesOf(d), "violations: %v", d.Violations)
			if tt.wantFrom != "" {
				require.NotEmpty(t, d.Violations)
				assert.Contains(t, d.Violations[0].Message, tt.wantFrom)
			}
		})
	}
}

// An update is judged against its own history, never its Cluster's
// records: a Cluster's other control plane's run does not bar it.
func TestUpdatedControlPlaneNotJudgedAgainstItsClustersRecords(t *testing.T) {
	p := identityPolicy(t, demoCluster(nil), pool("demo-md-0", "v1.33.7", false))
	p.Recorded = recordedRuns{"demo": {clusterRun(t, 3, "v1.34.3 etcd 3.6.5")}}
	d, _, err := p.Decide(context.Background(), identityKCP("demo", "demo", "v1.33.7"), identityKCP("demo", "demo", "v1.33.8"))
	require.NoError(t, err)
	assert.Empty(t, d.Violations)
}

func TestHigherHistory(t *testing.T) {
	a := skew.History{HighestKubernetes: skew.ReadVersion("v1.34.3"), HighestKubernetesSource: "a", HighestEtcd: skew.ReadEtcdVersion("3.5.24"), HighestEtcdSource: "a"}
	b := skew.History{HighestKubernetes: skew.ReadVersion("v1.33.7"), HighestKubernetesSource: "b", HighestEtcd: skew.ReadEtcdVersion("3.6.5"), HighestEtcdSource: "b"}
	got := higherHistory(a, b)
	assert.Equal(t, "v1.34.3", got.HighestKubernetes.Text())
	assert.Equal(t, "a", got.HighestKubernetesSource)
	assert.Equal(t, "3.6.5", got.HighestEtcd.Text())
	assert.Equal(t, "b", got.HighestEtcdSource)
	assert.Equal(t, a, higherHistory(a, skew.History{}), "nothing recorded changes nothing")
}

// What the Machines show already is named by them: the records add only
// what is above it (an etcd pinned above kubeadm's default).
func TestBeyondRunning(t *testing.T) {
	h := skew.History{HighestKubernetes: skew.ReadVersion("v1.34.3"), HighestKubernetesSource: "r", HighestEtcd: skew.ReadEtcdVersion("3.6.5"), HighestEtcdSource: "r"}
	assert.Equal(t, skew.History{}, beyondRunning(h, []skew.Version{skew.ReadVersion("v1.34.3")}), "the Machines show both")
	assert.Equal(t, h, beyondRunning(h, []skew.Version{skew.ReadVersion("v1.33.7")}), "the Machines show less")
	got := beyondRunning(h, []skew.Version{skew.ReadVersion("v1.34.3")})
	assert.False(t, got.HighestKubernetes.Valid())
	pinned := skew.History{HighestKubernetes: skew.ReadVersion("v1.33.7"), HighestKubernetesSource: "r", HighestEtcd: skew.ReadEtcdVersion("3.6.5"), HighestEtcdSource: "r"}
	got = beyondRunning(pinned, []skew.Version{skew.ReadVersion("v1.33.7")})
	assert.False(t, got.HighestKubernetes.Valid())
	assert.Equal(t, "3.6.5", got.HighestEtcd.Text(), "a pinned etcd only the records know")
	assert.Equal(t, h, beyondRunning(h, nil))
}
