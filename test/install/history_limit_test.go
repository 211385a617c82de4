package install

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// pruneTimeout bounds the wait for the guard's reconciler to record the
// last revisions and prune the history down to the limit: generous, the
// machine is shared.
const pruneTimeout = 60 * time.Second

// pruneNamespaces numbers the namespaces of the cases, so that a repeated
// run (-count) does not meet the previous run's namespace, still
// terminating.
var pruneNamespaces atomic.Int64

// pruneCase is one object whose history grows past history.DefaultLimit.
type pruneCase struct {
	name string
	// resource is the object as the CLI names it, e.g. "md/prune".
	resource string
	kind     kinds.Kind
	create   func(namespace string) client.Object
	// patches are JSON merge patches, each a new template: revision 2, 3, ...
	patches []string
	// want are the revision numbers history must hold once pruned.
	want []int64
	// versions are spec.version / spec.template.spec.version of revisions
	// whose content the test checks, as the CLI prints them.
	versions map[int64]string
	// etcd are etcd image tags of revisions, as the CLI prints them.
	etcd map[int64]string
}

// TestHistoryLimitPrunesThroughTheAPIServer makes more admitted template
// changes than the shipped --history-limit (history.DefaultLimit) keeps and
// checks, through the API server and the CLI, that the guard's reconciler
// removed exactly the oldest revisions, in-place ones first: never the live
// one, nor those that raised a control plane's highest Kubernetes and etcd
// versions, nor the newest revisions that rolled machines out (an in-place
// edit costs one label, so they must not flush the rollouts an undo goes
// back to).
func TestHistoryLimitPrunesThroughTheAPIServer(t *testing.T) {
	require.Equal(t, 20, history.DefaultLimit, "the expected numbers below assume the shipped limit")
	require.Equal(t, 10, history.DefaultPruneBatch, "the expected numbers below assume the shipped prune batch")

	// MachineDeployment: created as revision 1 (its machines rolled out),
	// then 29 label changes of its machine template (revisions 2..30), each
	// made in place. The history is pruned once it holds
	// history.DefaultPruneBatch (10) revisions beyond the limit, at revision
	// 30: the 10 oldest in-place revisions go (2..11), the rollout 1 stays,
	// with the 19 newest (12..30).
	var mdPatches []string
	for i := 2; i <= 30; i++ {
		mdPatches = append(mdPatches, fmt.Sprintf(`{"spec":{"template":{"metadata":{"labels":{"step":"%d"}}}}}`, i))
	}

	// KubeadmControlPlane: created at v1.34.2 with etcd 3.6.5-0 (revision
	// 1); patch upgrades to v1.34.5 (2) and v1.34.9 (3, the highest
	// Kubernetes version it ever runs); v1.34.8 with etcd 3.6.9-0 (4, the
	// highest etcd); then 26 changes below both, patch downgrades inside
	// v1.34 with etcd 3.6.8-0 and a new machine label each (5..30). Kept:
	// 3 and 4, and the 18 newest, 13..30.
	kcpPatches := []string{
		`{"spec":{"version":"v1.34.5"}}`,
		`{"spec":{"version":"v1.34.9"}}`,
		`{"spec":{"version":"v1.34.8","kubeadmConfigSpec":{"clusterConfiguration":{"etcd":{"local":{"imageTag":"3.6.9-0"}}}}}}`,
	}
	for i := 5; i <= 30; i++ {
		kcpPatches = append(kcpPatches, fmt.Sprintf(
			`{"spec":{"version":"v1.34.%d","kubeadmConfigSpec":{"clusterConfiguration":{"etcd":{"local":{"imageTag":"3.6.8-0"}}}},"machineTemplate":{"metadata":{"labels":{"step":"%d"}}}}}`,
			8-i%6, i))
	}

	cases := []pruneCase{
		{
			name:     "MachineDeployment",
			resource: "machinedeployment/prune",
			kind:     kinds.MachineDeployment,
			create:   pruneMachineDeployment,
			patches:  mdPatches,
			want:     append([]int64{1}, numbers(12, 30)...),
			versions: map[int64]string{1: "v1.34.2", 12: "v1.34.2", 30: "v1.34.2"},
		},
		{
			name:     "KubeadmControlPlane",
			resource: "kubeadmcontrolplane/prune",
			kind:     kinds.KubeadmControlPlane,
			create:   pruneKubeadmControlPlane,
			patches:  kcpPatches,
			want:     append([]int64{3, 4}, numbers(13, 30)...),
			versions: map[int64]string{3: "v1.34.9", 4: "v1.34.8", 13: "v1.34.7", 30: "v1.34.8"},
			etcd:     map[int64]string{3: "3.6.5-0", 4: "3.6.9-0", 13: "3.6.8-0", 30: "3.6.8-0"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testPrune(t, fmt.Sprintf("install-prune-%d", pruneNamespaces.Add(1)), tc)
		})
	}
}

// testPrune runs one pruneCase in namespace ns.
func testPrune(t *testing.T, ns string, tc pruneCase) {
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	// Every RolloutRevision ever created in the namespace, so that a
	// revision missing at the end is known to have been recorded, then
	// pruned, rather than never recorded.
	recorded := watchRecorded(t, ns)
	// The requests counted are those of the guard in steady state: once
	// its revision Index is filled (before that it reads records from the
	// API server, as a guard just started does).
	env.WaitGuardIndexFilled(t)
	requestsBefore := revisionRequests(t)

	obj := tc.create(ns)
	require.NoError(t, env.Client.Create(ctx, obj))
	names := map[int64]string{} // revision number -> its RolloutRevision
	note := func(o client.Object, want int64) {
		t.Helper()
		rec, err := revisions.RecordFromAnnotations(o.GetAnnotations())
		require.NoError(t, err)
		require.Equal(t, want, rec.Revision, "%s %s/%s: the stamped revision", tc.kind.GVK.Kind, ns, o.GetName())
		snap, err := tc.kind.Snapshot(o)
		require.NoError(t, err)
		for n, name := range names {
			require.NotEqual(t, revisions.Name(o.GetName(), snap.Hash), name, "revision %d has the content of revision %d", want, n)
		}
		names[want] = revisions.Name(o.GetName(), snap.Hash)
	}
	note(obj, 1)
	for i, patch := range tc.patches {
		require.NoError(t, env.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))), "patch %d: %s", i+2, patch)
		note(obj, int64(i+2))
	}
	last := int64(len(tc.patches) + 1)
	require.GreaterOrEqual(t, last, int64(history.DefaultLimit+history.DefaultPruneBatch), "the case must outgrow the limit by a prune batch")

	// Wait until the reconciler has recorded the live revision and pruned.
	// (The condition runs on another goroutine: it notes errors rather
	// than failing the test there.)
	var (
		mu         sync.Mutex
		listedNums []int64
		listedRevs []revisions.Revision
		listErr    error
		polls      int // the Lists of RolloutRevisions this test makes
	)
	ok := assert.Eventually(t, func() bool {
		list, bad, err := history.List(ctx, env.Client, ns, string(obj.GetUID()))
		mu.Lock()
		defer mu.Unlock()
		polls++
		if err == nil && len(bad) > 0 {
			err = fmt.Errorf("undecodable records: %v", bad)
		}
		if listErr = err; err != nil {
			return false
		}
		listedRevs, listedNums = list, nil
		for _, r := range list {
			listedNums = append(listedNums, r.Record.Revision)
		}
		return len(listedNums) == history.DefaultLimit && slices.Contains(listedNums, last)
	}, pruneTimeout, 200*time.Millisecond)
	mu.Lock()
	got, revs, lastErr, listed := slices.Clone(listedNums), slices.Clone(listedRevs), listErr, polls
	mu.Unlock()
	require.True(t, ok, "history of %s %s/%s after %s: revisions %v (last error: %v), want %d of them with the live %d",
		tc.kind.GVK.Kind, ns, obj.GetName(), pruneTimeout, got, lastErr, history.DefaultLimit, last)
	require.Equal(t, tc.want, got, "the revisions kept")

	// What recording and pruning cost the API server: every
	// RolloutRevision request it counted since the object was made
	// (nothing else in this package touches RolloutRevisions meanwhile),
	// less this test's own Lists and the long-running watches.
	guard := map[string]float64{}
	for verb, n := range revisionRequests(t) {
		guard[verb] = n - requestsBefore[verb]
	}
	guard["LIST"] -= float64(listed)
	delete(guard, "WATCH")
	var all float64
	for _, n := range guard {
		all += n
	}
	t.Logf("%s: RolloutRevision requests for %d revisions: %v, %.2f per revision", tc.kind.GVK.Kind, last, guard, all/float64(last))
	assert.Equal(t, 1.0, guard["DELETE"], "the history pruned in one DeleteCollection request")
	assert.LessOrEqual(t, all/float64(last), 1.2, "RolloutRevision requests per recorded revision: %v", guard)

	for _, r := range revs {
		assert.Equal(t, []int64{r.Record.Revision}, r.Record.History, "revision %d: every content was live once", r.Record.Revision)
		assert.Equal(t, names[r.Record.Revision], r.Name, "revision %d: its RolloutRevision", r.Record.Revision)
	}

	// Every revision was recorded (the watch may deliver the last creations
	// a moment after the List saw them); those not kept are gone.
	var missing []int64
	var most int
	assert.Eventually(t, func() bool {
		added, atOnce := recorded()
		var gaps []int64
		for n := int64(1); n <= last; n++ {
			if !added[names[n]] {
				gaps = append(gaps, n)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		missing, most = gaps, atOnce
		return len(gaps) == 0
	}, 10*time.Second, 100*time.Millisecond)
	mu.Lock()
	assert.Empty(t, missing, "revisions never recorded")
	// Pruned in one batch: the history grew to the limit plus a batch
	// before anything was pruned (one revision at a time, it would never
	// have held more than the limit plus one).
	assert.Equal(t, history.DefaultLimit+history.DefaultPruneBatch, most, "the most revisions held at once")
	mu.Unlock()
	for n := int64(1); n <= last; n++ {
		name := names[n]
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &rgv1alpha1.RolloutRevision{})
		if slices.Contains(tc.want, n) {
			assert.NoError(t, err, "revision %d (RolloutRevision %s) kept", n, name)
		} else {
			assert.True(t, apierrors.IsNotFound(err), "revision %d (RolloutRevision %s) pruned: got %v", n, name, err)
		}
	}

	// The CLI lists exactly what is kept, the live revision marked.
	out := rolloutHistory(t, tc.resource, "-n", ns, "-o", "json")
	var h v1alpha1.RolloutHistory
	require.NoError(t, json.Unmarshal([]byte(out), &h), "rollout history -o json printed:\n%s", out)
	assert.Equal(t, last, h.LiveRevision)
	var printed []int64
	for _, r := range h.Revisions {
		printed = append(printed, r.Revision)
		assert.Equal(t, r.Revision == last, r.Live, "revision %d: live", r.Revision)
		if v, ok := tc.versions[r.Revision]; ok {
			assert.Equal(t, v, r.Version, "revision %d: version", r.Revision)
		}
		if e, ok := tc.etcd[r.Revision]; ok {
			assert.Equal(t, e, r.EtcdImageTag, "revision %d: etcd image tag", r.Revision)
		}
	}
	assert.Equal(t, tc.want, printed, "rollout history -o json: revisions")

	// And so does its table: one row per kept revision, numbers first.
	table := rolloutHistory(t, tc.resource, "-n", ns)
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		if fields := strings.Fields(line); len(fields) > 0 {
			rows = append(rows, fields[0])
		}
	}
	var wantRows []string
	for _, n := range tc.want {
		wantRows = append(wantRows, fmt.Sprint(n))
	}
	assert.Equal(t, wantRows, rows, "rollout history:\n%s", table)
	for n, v := range tc.versions {
		assert.Regexp(t, fmt.Sprintf(`(?m)^%d\s+%s\s`, n, strings.ReplaceAll(v, ".", `\.`)), table, "rollout history: the row of revision %d", n)
	}
}

// numbers returns from, from+1, ..., to.
func numbers(from, to int64) []int64 {
	var out []int64
	for n := from; n <= to; n++ {
		out = append(out, n)
	}
	return out
}

// revisionRequests returns the API server's count of RolloutRevision
// requests (apiserver_request_total), by verb; a DeleteCollection counts
// as one DELETE.
func revisionRequests(t *testing.T) map[string]float64 {
	t.Helper()
	return apiRequests(t, "rolloutrevisions")
}

// apiRequests returns the API server's count of requests of resource
// (apiserver_request_total), by verb.
func apiRequests(t *testing.T, resource string) map[string]float64 {
	t.Helper()
	samples, err := framework.APIServerMetrics(context.Background(), env.Config)
	require.NoError(t, err)
	return framework.SumBy(samples, "apiserver_request_total", map[string]string{"resource": resource}, "verb")
}

// watchRecorded watches the RolloutRevisions of namespace ns until the
// test ends; the function it returns gives the names of all that were
// created so far, and the most that existed at once.
func watchRecorded(t *testing.T, ns string) func() (map[string]bool, int) {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &rgv1alpha1.RolloutRevisionList{}, client.InNamespace(ns))
	require.NoError(t, err)
	var mu sync.Mutex
	added := map[string]bool{}
	existing, most := 0, 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			cr, ok := ev.Object.(*rgv1alpha1.RolloutRevision)
			if !ok {
				continue
			}
			mu.Lock()
			switch ev.Type {
			case watch.Added:
				added[cr.Name] = true
				existing++
				most = max(most, existing)
			case watch.Deleted:
				existing--
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		w.Stop()
		cancel()
		<-done
	})
	return func() (map[string]bool, int) {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(added), most
	}
}

// rolloutHistory runs `rollout history` in-process, as cmd/rollout does,
// with the admin kubeconfig, and returns what it printed; it fails the test
// on a non-zero exit.
func rolloutHistory(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := framework.RunRollout(context.Background(), env.Kubeconfig, t.TempDir(), &stdout, &stderr, append([]string{"history"}, args...)...)
	require.Equal(t, 0, code, "rollout history %s: stderr:\n%s", strings.Join(args, " "), stderr.String())
	return stdout.String()
}

// pruneMachineDeployment is a MachineDeployment named prune (see
// orphanMachineDeployment).
func pruneMachineDeployment(namespace string) client.Object {
	return orphanMachineDeployment(namespace, "prune", "v1.34.2")
}

// pruneKubeadmControlPlane is a KubeadmControlPlane named prune at v1.34.2
// with etcd 3.6.5-0, without a Cluster.
func pruneKubeadmControlPlane(namespace string) client.Object {
	return builder.KubeadmControlPlane(namespace, "prune").WithReplicas(1).WithVersion("v1.34.2").
		WithInfrastructureTemplate("prune").WithEtcdImageTag("3.6.5-0").Build()
}
