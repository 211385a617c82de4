package fleet

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
	"github.com/rollout-guard/rollout-guard/waves"
)

// fleetSelector selects the sandbox's three ClusterClass clusters.
const fleetSelector = clusterv1.ClusterTopologyOwnedLabel

// clusterOf reads a Cluster of the fleet.
func clusterOf(t require.TestingT, name string) *clusterv1.Cluster {
	c := &clusterv1.Cluster{}
	require.NoError(t, sb.Client.Get(context.Background(), client.ObjectKey{Namespace: sandbox.DefaultNamespace, Name: name}, c))
	return c
}

// clusterRevisions are the RolloutRevisions the guard recorded of the
// Cluster's topology, oldest first.
func clusterRevisions(t *testing.T, name string) []rgv1alpha1.RolloutRevision {
	c := clusterOf(t, name)
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, sb.Client.List(context.Background(), list, client.InNamespace(c.Namespace),
		client.MatchingLabels{revisions.LabelOwnerUID: string(c.UID), revisions.LabelOwnerKind: revisions.KindCluster}))
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp)
	})
	return list.Items
}

// rolledOutAt is when the last of the cluster's machines became ready.
func rolledOutAt(t *testing.T, name string) time.Time {
	at, err := sb.RolledOutAt(context.Background(), sandbox.DefaultNamespace, name)
	require.NoError(t, err)
	return at
}

// requireAllAt checks that every cluster's topology is at version, and
// its machines are.
func requireAllAt(t *testing.T, version string) {
	t.Helper()
	for _, c := range clusters {
		cl := clusterOf(t, c.Name)
		assert.Equal(t, version, cl.Spec.Topology.Version, "cluster %s", c.Name)
		list := &clusterv1.MachineList{}
		require.NoError(t, sb.Client.List(context.Background(), list, client.InNamespace(sandbox.DefaultNamespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.Name}))
		for _, m := range list.Items {
			if m.DeletionTimestamp.IsZero() {
				assert.Equal(t, version, m.Spec.Version, "cluster %s: machine %s", c.Name, m.Name)
			}
		}
	}
}

// TestStagedRolloutInWaves upgrades the three clusters, labelled with waves
// in the reverse of their names' order, with --waves 1,100% --soak 20s: the
// cluster of wave 0 goes first, its upgrade done (its machines ready) more
// than the soak before either other cluster's topology changes (the
// guard's revisions of the Clusters say when), then the other two; status
// then shows the fleet by wave.
func TestStagedRolloutInWaves(t *testing.T) {
	const version, soak = "v1.34.3", 20 * time.Second
	before := map[string]int{}
	for i, c := range clusters {
		before[c.Name] = len(clusterRevisions(t, c.Name))
		// Wave labels in the reverse of the names' order: --order follows
		// them.
		labelWave(t, c.Name, strconv.Itoa(len(clusters)-1-i))
	}
	t.Cleanup(func() {
		for _, c := range clusters {
			labelWave(t, c.Name, "")
		}
	})
	run := cli(t, "cluster", "-l", fleetSelector, "--version", version, "--waves", "1,100%", "--soak", soak.String())
	require.Equal(t, rollout.ExitOK, run.Code, run.Stderr)
	assert.Contains(t, run.Stdout, "Wave 1 of 2: 1 cluster, 1 to change")
	assert.Contains(t, run.Stdout, "3 clusters rolled out to "+version+" in 2 waves")
	requireAllAt(t, version)

	first := clusters[len(clusters)-1].Name // wave 0
	assert.Contains(t, run.Stdout, "wave 1 of 2: default/"+first+"\n")
	done := rolledOutAt(t, first)
	for _, c := range clusters {
		revs := clusterRevisions(t, c.Name)
		require.Len(t, revs, before[c.Name]+1, "cluster %s: one revision more, the upgrade's", c.Name)
		if c.Name == first {
			continue
		}
		changed := revs[len(revs)-1].CreationTimestamp.Time
		// Timestamps are stored to the second.
		assert.GreaterOrEqual(t, changed.Sub(done), soak-time.Second,
			"cluster %s's topology changed at %s, %s after %s was rolled out (%s); the soak is %s", c.Name, changed.Format(time.RFC3339), changed.Sub(done), first, done.Format(time.RFC3339), soak)
	}

	// Status groups the fleet by wave.
	st := cli(t, "status", "cluster", "-l", fleetSelector, "--watch=false")
	require.Equal(t, rollout.ExitOK, st.Code, st.Stderr)
	assert.Contains(t, st.Stdout, "wave 0 (1 cluster): 1 done\n  "+first)
	assert.Contains(t, st.Stdout, "wave 2 (1 cluster): 1 done\n  "+clusters[0].Name)

	// Run again: every cluster is at the version, nothing is edited.
	again := cli(t, "cluster", "-l", fleetSelector, "--version", version, "--waves", "1,100%")
	require.Equal(t, rollout.ExitOK, again.Code, again.Stderr)
	assert.Contains(t, again.Stdout, "at "+version+" already")
	for _, c := range clusters {
		assert.Len(t, clusterRevisions(t, c.Name), before[c.Name]+1, "cluster %s: no edit when run again", c.Name)
	}
}

// labelWave puts the cluster in wave w (label rollout-guard.io/wave), or in
// none when w is "".
func labelWave(t *testing.T, name, w string) {
	c := clusterOf(t, name)
	patch := client.MergeFrom(c.DeepCopy())
	if w == "" {
		delete(c.Labels, waves.Label)
	} else {
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		c.Labels[waves.Label] = w
	}
	require.NoError(t, sb.Client.Patch(context.Background(), c, patch))
}

// pauseNewDevMachines pauses every DevMachine of cluster created from now
// on (Cluster API's paused annotation: the in-memory infrastructure stops
// provisioning it), so that the cluster's new machines never become ready,
// until the returned function is called: it stops pausing, resumes those
// it paused, and returns their names.
func pauseNewDevMachines(t *testing.T, cluster string) func() []string {
	ctx, cancel := context.WithCancel(context.Background())
	list := func() []infrav1.DevMachine {
		l := &infrav1.DevMachineList{}
		require.NoError(t, sb.Client.List(context.Background(), l, client.InNamespace(sandbox.DefaultNamespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}))
		return l.Items
	}
	old := sets.New[string]()
	for _, m := range list() {
		old.Insert(m.Name)
	}
	var mu sync.Mutex
	paused := sets.New[string]()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			l := &infrav1.DevMachineList{}
			if err := sb.Client.List(ctx, l, client.InNamespace(sandbox.DefaultNamespace), client.MatchingLabels{clusterv1.ClusterNameLabel: cluster}); err == nil {
				for i := range l.Items {
					m := &l.Items[i]
					if old.Has(m.Name) || m.Annotations[clusterv1.PausedAnnotation] != "" {
						continue
					}
					p := client.MergeFrom(m.DeepCopy())
					if m.Annotations == nil {
						m.Annotations = map[string]string{}
					}
					m.Annotations[clusterv1.PausedAnnotation] = "true"
					if err := sb.Client.Patch(ctx, m, p); err == nil {
						mu.Lock()
						paused.Insert(m.Name)
						mu.Unlock()
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() []string {
		cancel()
		wg.Wait()
		for _, m := range list() {
			if !paused.Has(m.Name) {
				continue
			}
			p := client.MergeFrom(m.DeepCopy())
			delete(m.Annotations, clusterv1.PausedAnnotation)
			require.NoError(t, sb.Client.Patch(context.Background(), &m, p))
		}
		return sets.List(paused)
	}
}

// TestStagedRolloutHaltsAndResumes stalls the first wave (its cluster's
// new machine never becomes ready): the rollout exits 3 naming it, and the
// other clusters' versions are unchanged. Once the machine recovers, the
// same command goes on where it stopped: it waits for the first cluster
// without editing it again (one revision of the upgrade), then rolls the
// others.
func TestStagedRolloutHaltsAndResumes(t *testing.T) {
	const from, version = "v1.34.3", "v1.35.2"
	requireAllAt(t, from)
	first := clusters[0].Name
	before := map[string]int{}
	for _, c := range clusters {
		before[c.Name] = len(clusterRevisions(t, c.Name))
	}
	args := []string{"cluster", "-l", fleetSelector, "--version", version, "--waves", "1,100%", "--soak", "5s", "--progress-deadline", "20s"}

	resume := pauseNewDevMachines(t, first)
	halted := cli(t, args...)
	paused := resume()
	require.NotEmpty(t, paused, "a new machine of %s was paused", first)
	require.Equal(t, rollout.ExitStalled, halted.Code, "stdout: %s\nstderr: %s", halted.Stdout, halted.Stderr)
	assert.Contains(t, halted.Stderr, "halted in wave 1 of 2: cluster default/"+first+" stalled")
	assert.Contains(t, halted.Stderr, "later waves not touched: default/"+clusters[1].Name+", default/"+clusters[2].Name)
	assert.Equal(t, version, clusterOf(t, first).Spec.Topology.Version)
	for _, c := range clusters[1:] {
		assert.Equal(t, from, clusterOf(t, c.Name).Spec.Topology.Version, "cluster %s is not touched", c.Name)
		assert.Len(t, clusterRevisions(t, c.Name), before[c.Name], "cluster %s is not touched", c.Name)
	}

	resumed := cli(t, args...)
	require.Equal(t, rollout.ExitOK, resumed.Code, resumed.Stderr)
	assert.Contains(t, resumed.Stdout, "default/"+first+": at "+version+" already: waiting for it to roll out")
	assert.NotContains(t, resumed.Stdout, "default/"+first+": rolling out to")
	requireAllAt(t, version)
	for _, c := range clusters {
		assert.Len(t, clusterRevisions(t, c.Name), before[c.Name]+1, "cluster %s: one revision of the upgrade, whatever the runs", c.Name)
	}
	assert.True(t, strings.Contains(resumed.Stdout, "3 clusters rolled out to "+version), resumed.Stdout)
}

// TestStagedRolloutRefusedBeforeTheFirstEdit asks for a downgrade of the
// fleet: every cluster's change is judged before the first edit, the
// command exits 6 naming them, and nothing is stored; the same rollout
// with --emit prints the refusal the same way.
func TestStagedRolloutRefusedBeforeTheFirstEdit(t *testing.T) {
	const version = "v1.34.3"
	before := specState(t, "demo-class")
	run := cli(t, "cluster", "-l", fleetSelector, "--version", version)
	require.Equal(t, rollout.ExitRefused, run.Code, "stdout: %s\nstderr: %s", run.Stdout, run.Stderr)
	assert.Contains(t, run.Stderr, "3 of 3 clusters would be refused (default/demo-cc, default/demo-cc-2, default/demo-cc-3): nothing was changed")
	assert.Contains(t, run.Stdout, "refused: 0 control-plane")
	emit := cli(t, "cluster", "-l", fleetSelector, "--version", version, "--emit", "yaml")
	assert.Equal(t, rollout.ExitRefused, emit.Code, "--emit: stdout: %s\nstderr: %s", emit.Stdout, emit.Stderr)
	assert.NotContains(t, emit.Stdout, "kind: Cluster", "--emit prints no manifest of a refused change")
	assert.Equal(t, before, specState(t, "demo-class"), "nothing is stored")
}

// TestStagedRolloutDryRunAndEmitStoreNothing previews the next upgrade of
// the fleet: --dry-run=server sends every cluster's edit as a server-side
// dry run, wave by wave, and --emit yaml prints the Clusters to commit,
// wave by wave; neither stores anything.
func TestStagedRolloutDryRunAndEmitStoreNothing(t *testing.T) {
	from := clusterOf(t, clusters[0].Name).Spec.Topology.Version
	i := slices.Index(sandbox.ClassKubernetesVersions, from)
	require.True(t, i >= 0 && i+1 < len(sandbox.ClassKubernetesVersions), "%s has a next version", from)
	version := sandbox.ClassKubernetesVersions[i+1]
	before := specState(t, "demo-class")

	dry := cli(t, "cluster", "-l", fleetSelector, "--version", version, "--dry-run=server")
	require.Equal(t, rollout.ExitOK, dry.Code, dry.Stderr)
	for wave, c := range map[int]string{1: clusters[0].Name, 2: clusters[1].Name} {
		assert.Contains(t, dry.Stdout, "wave "+strconv.Itoa(wave)+": cluster default/"+c+": rolling out to "+version+" (server dry run)")
	}

	emit := cli(t, "cluster", "-l", fleetSelector, "--version", version, "--emit", "yaml")
	require.Equal(t, rollout.ExitOK, emit.Code, emit.Stderr)
	first, second, ok := strings.Cut(emit.Stdout, "# Wave 2 of 2")
	require.True(t, ok, emit.Stdout)
	assert.Contains(t, first, "# Wave 1 of 2: commit these first")
	assert.Contains(t, first, "name: "+clusters[0].Name+"\n")
	assert.Contains(t, second, "name: "+clusters[1].Name+"\n")
	assert.Contains(t, second, "name: "+clusters[2].Name+"\n")
	assert.Equal(t, 3, strings.Count(emit.Stdout, "version: "+version), "three Clusters at %s", version)

	assert.Equal(t, before, specState(t, "demo-class"), "nothing is stored")
}
