package faults

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

const (
	// readyTimeout bounds the wait for the demo to be ready again.
	readyTimeout = 3 * time.Minute
	// pollInterval is how often the tests read the cluster.
	pollInterval = 250 * time.Millisecond
)

// mdKey and kcpKey name the demo's MachineDeployment and control plane.
func mdKey() client.ObjectKey {
	return client.ObjectKey{Namespace: demo.Namespace, Name: demo.MachineDeploymentName()}
}

func kcpKey() client.ObjectKey {
	return client.ObjectKey{Namespace: demo.Namespace, Name: demo.ControlPlaneName()}
}

// getMD reads the demo's MachineDeployment.
func getMD(t *testing.T) *clusterv1.MachineDeployment {
	t.Helper()
	md := &clusterv1.MachineDeployment{}
	require.NoError(t, sb.Client.Get(context.Background(), mdKey(), md))
	return md
}

// getKCP reads the demo's control plane.
func getKCP(t *testing.T) *controlplanev1.KubeadmControlPlane {
	t.Helper()
	kcp := &controlplanev1.KubeadmControlPlane{}
	require.NoError(t, sb.Client.Get(context.Background(), kcpKey(), kcp))
	return kcp
}

// emptyPool returns a worker pool of the demo cluster like base but with
// no machines, named name and selecting labels: every edit of it is judged
// against the control plane (and recorded) like the demo pool's, while
// Cluster API has only MachineSets of 0 replicas to make.
func emptyPool(base *clusterv1.MachineDeployment, name string, labels map[string]string) *clusterv1.MachineDeployment {
	return builder.MachineDeployment(demo.Namespace, name).WithSpecOf(base).
		WithLabels(map[string]string{clusterv1.ClusterNameLabel: demo.Name}).WithReplicas(0).WithSelector(labels).Build()
}

// requireClusterReady waits (a little) until the demo is ready: each test
// starts from, and leaves, a ready cluster.
func requireClusterReady(t *testing.T) sandbox.ClusterState {
	t.Helper()
	return sb.RequireClusterReady(t, demo.Namespace, demo.Name, readyTimeout)
}

// historyOf lists the recorded revisions of the object with uid.
func historyOf(t *testing.T, uid types.UID) []revisions.Revision {
	t.Helper()
	revs, bad, err := history.List(context.Background(), sb.Client, demo.Namespace, string(uid))
	require.NoError(t, err)
	require.Empty(t, bad, "damaged RolloutRevisions")
	return revs
}

// byHash maps every recorded content hash to the revision numbers recorded
// for it, and fails the test if a revision number is recorded for two
// contents (a duplicate) or a content is recorded twice.
func byHash(t *testing.T, revs []revisions.Revision) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	owner := map[int64]string{}
	for _, r := range revs {
		_, dup := out[r.Snapshot.Hash]
		require.False(t, dup, "content %s recorded in two RolloutRevisions", r.Snapshot.Hash)
		nums := r.Record.History
		if len(nums) == 0 {
			nums = []int64{r.Record.Revision}
		}
		out[r.Snapshot.Hash] = nums
		for _, n := range nums {
			if other, taken := owner[n]; taken {
				require.Failf(t, "revision number recorded twice", "revision %d names both %s and %s\n%s", n, other, r.Snapshot.Hash, framework.DescribeHistory(revs))
			}
			owner[n] = r.Snapshot.Hash
		}
	}
	return out
}

// sortedInts returns the keys of m, sorted.
func sortedInts(m map[int64]bool) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// runRollout runs the rollout CLI in-process against the sandbox, as the
// admin, and returns its exit code and output.
func runRollout(t *testing.T, args ...string) sandbox.CLIRun {
	t.Helper()
	r := sb.RunCLI(t.TempDir(), demo.Namespace, args...)
	t.Logf("rollout %s (%s)\n--- exit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), r.Took.Round(100*time.Millisecond), r.Code, r.Stdout, r.Stderr)
	return r
}
