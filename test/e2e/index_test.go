package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// TestIndexListsAsTheAPIServer: the revision index the guard answers from
// (history.Index: a metadata-only reflector of RolloutRevisions, each
// kept as a compact entry) gives an object's history as a List of whole
// RolloutRevisions from kube-apiserver does — same names, numbers,
// records and hashes, in the same order — without the data. The history
// package's unit test (TestIndexListsAsAListOfWholeRevisions) compares the
// two over a fake client; here the index reads the API server's
// metadata-only list and watch, and the revisions are the guard's.
func TestIndexListsAsTheAPIServer(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})
	mgr, err := manager.New(env.Config, manager.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	index, err := history.NewIndex(mgr)
	require.NoError(t, err)
	mgrCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		assert.NoError(t, <-stopped, "the index's manager")
	})
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.True(t, index.WaitForSync(syncCtx), "the index filled")

	// Three revisions of each: two replaced, recorded by the guard as it
	// admits each edit, and the live one, recorded by its reconciler.
	for _, v := range []string{"v1.35.0", "v1.35.1"} {
		require.NoError(t, edit(t, mergePatch, w.KCP, v, kcpVersion...), "control plane to %s", v)
	}
	for _, v := range []string{"v1.35.0", "v1.35.1"} {
		require.NoError(t, edit(t, mergePatch, w.MD, v, mdVersion...), "workers to %s", v)
	}
	for _, obj := range []client.Object{w.KCP, w.MD} {
		// The index may lag the API server by a watch event: compared until
		// it has caught up with the three revisions.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			whole, bad, err := history.List(ctx, env.Client, w.Namespace, string(obj.GetUID()))
			require.NoError(c, err)
			require.Empty(c, bad)
			require.Len(c, whole, 3, "recorded by the API server: %s", framework.DescribeHistory(whole))
			fromIndex, ok, err := index.List(ctx, w.Namespace, string(obj.GetUID()))
			require.NoError(c, err)
			require.True(c, ok, "the index answers")
			require.Len(c, fromIndex, len(whole), "from the index: %s", framework.DescribeHistory(fromIndex))
			for i := range whole {
				assert.Equal(c, whole[i].Name, fromIndex[i].Name)
				assert.Equal(c, whole[i].Record, fromIndex[i].Record, whole[i].Name)
				assert.Equal(c, whole[i].Snapshot.Hash, fromIndex[i].Snapshot.Hash, whole[i].Name)
				assert.Equal(c, whole[i].Snapshot.Kind, fromIndex[i].Snapshot.Kind, whole[i].Name)
				assert.NotEmpty(c, whole[i].Snapshot.Data, "the API server's %s holds its content", whole[i].Name)
				assert.Empty(c, fromIndex[i].Snapshot.Data, "the index's %s holds no content", whole[i].Name)
			}
		}, 30*time.Second, 100*time.Millisecond, "the index lists the history of %s as the API server does", obj.GetName())
	}
}
