package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout"
)

const (
	// raceRounds is how many writes each writer makes.
	raceRounds = 8
	// gitOpsManager and gitOpsUser are the GitOps writer's field manager
	// and user, as Argo CD's application controller names them.
	gitOpsManager = "argocd-controller"
	gitOpsUser    = "system:serviceaccount:argocd:argocd-application-controller"
)

// persisted is one version of the pool as the API server persisted it.
type persisted struct {
	resourceVersion string
	hash            string
	record          revisions.Record
	infra           string
}

// TestWritersRacing races three writers on one worker pool: `rollout undo`
// and `rollout md/X --template devmachinetemplate/Y` (two CLIs, in-process,
// each as a user would run it) and a GitOps controller's server-side apply
// (field manager argocd-controller, forcing conflicts as Argo CD does) that
// puts the pool back on its original template, while a watch notes every
// version the API server persisted. The final template must be one a
// writer asked for, made by that writer; every persisted content must be
// in history under the revision number it was stamped with; no revision
// number may name two contents and none may be lost.
func TestWritersRacing(t *testing.T) {
	requireClusterReady(t)
	ctx := context.Background()
	base := getMD(t)
	original, spare := base.Spec.Template.Spec.InfrastructureRef.Name, demo.SpareWorkerTemplate()

	// The pool: no machines, so the race costs no rollouts; the Cluster API
	// controllers still reconcile it.
	name := demo.Name + "-race"
	labels := map[string]string{"faults.rollout-guard.io/pool": name, clusterv1.ClusterNameLabel: demo.Name}
	pool := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: demo.Namespace, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: demo.Name}},
		Spec:       *base.Spec.DeepCopy(),
	}
	pool.Spec.Replicas = ptr.To[int32](0)
	pool.Spec.Selector = metav1.LabelSelector{MatchLabels: labels}
	pool.Spec.Template.ObjectMeta.Labels = labels
	require.NoError(t, sb.Client.Create(ctx, pool))
	t.Cleanup(func() {
		if err := sb.Client.Delete(context.Background(), pool); err != nil {
			t.Errorf("deleting the pool: %v", err)
		}
	})
	// A second revision, so that undo has something to go back to from the start.
	r := runRollout(t, "md/"+name, "--template", "devmachinetemplate/"+spare)
	require.Equal(t, 0, r.Code, "the first template switch; stderr:\n%s", r.Stderr)

	// Watch every persisted version.
	watcher, err := client.NewWithWatch(sb.Config, client.Options{Scheme: sb.Scheme})
	require.NoError(t, err)
	fresh := &clusterv1.MachineDeployment{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKeyFromObject(pool), fresh))
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	wi, err := watcher.Watch(watchCtx, &clusterv1.MachineDeploymentList{}, client.InNamespace(demo.Namespace),
		client.MatchingFields{"metadata.name": name}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: fresh.ResourceVersion}})
	require.NoError(t, err)
	var seenMu sync.Mutex
	seen := []persisted{}
	noteVersion := func(md *clusterv1.MachineDeployment) {
		snap, err := history.MachineDeployment.Snapshot(md)
		assert.NoError(t, err)
		rec, err := revisions.RecordFromAnnotations(md.Annotations)
		assert.NoError(t, err)
		seenMu.Lock()
		seen = append(seen, persisted{md.ResourceVersion, snap.Hash, rec, md.Spec.Template.Spec.InfrastructureRef.Name})
		seenMu.Unlock()
	}
	noteVersion(fresh)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ev := range wi.ResultChan() {
			if md, ok := ev.Object.(*clusterv1.MachineDeployment); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				noteVersion(md)
			}
		}
	}()

	// Who wrote what, from the writers' own successful results.
	var madeMu sync.Mutex
	var outcomes []string
	note := func(format string, args ...any) {
		madeMu.Lock()
		defer madeMu.Unlock()
		outcomes = append(outcomes, fmt.Sprintf(format, args...))
	}
	gitOps, err := sb.ClientAs(gitOpsUser, "system:masters")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // CLI 1: undo
		defer wg.Done()
		for n := range raceRounds {
			r := runRollout(t, "undo", "md/"+name)
			note("undo %d: exit %d %s", n, r.Code, r.Stderr)
		}
	}()
	go func() { // CLI 2: template switches, to the spare and back
		defer wg.Done()
		for n := range raceRounds {
			target := []string{original, spare}[n%2]
			r := runRollout(t, "md/"+name, "--template", "devmachinetemplate/"+target)
			note("template %s %d: exit %d %s", target, n, r.Code, r.Stderr)
		}
	}()
	go func() { // GitOps: server-side apply of the original template
		defer wg.Done()
		for n := range raceRounds {
			applied := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": clusterv1.GroupVersion.String(),
				"kind":       "MachineDeployment",
				"metadata":   map[string]any{"namespace": demo.Namespace, "name": name},
				"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
					"clusterName":       demo.Name,
					"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachineTemplate", "name": original},
				}}},
			}}
			err := gitOps.Patch(ctx, applied, client.Apply, client.FieldOwner(gitOpsManager), client.ForceOwnership)
			note("apply %d: %v", n, err)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	wg.Wait()

	final := &clusterv1.MachineDeployment{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKeyFromObject(pool), final))
	finalSnap, err := history.MachineDeployment.Snapshot(final)
	require.NoError(t, err)
	finalRec, err := revisions.RecordFromAnnotations(final.Annotations)
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "the watch to see the final version and history to record it", func() (bool, string) {
		seenMu.Lock()
		last := seen[len(seen)-1].resourceVersion
		seenMu.Unlock()
		// The reconciler records the live revision's number on its content.
		live := revisionWithHash(historyOf(t, final.UID), finalSnap.Hash).Record
		recorded := live.Revision == finalRec.Revision || slices.Contains(live.History, finalRec.Revision)
		return last == final.ResourceVersion && recorded, fmt.Sprintf("last seen %s, live %s, live revision %d recorded: %v", last, final.ResourceVersion, finalRec.Revision, recorded)
	})
	stopWatch()
	<-watchDone

	for _, o := range outcomes {
		t.Log(o)
	}
	revs := historyOf(t, final.UID)
	t.Logf("history:\n%s", describeHistory(revs))

	// The final state is one a writer asked for, stamped with that writer.
	assert.Contains(t, []string{original, spare}, final.Spec.Template.Spec.InfrastructureRef.Name)
	assert.Contains(t, []string{rollout.FieldManager, gitOpsManager}, finalRec.FieldManager, "the final revision's field manager")

	// History matches what the API server persisted.
	recorded := byHash(t, revs) // fails on a revision number used twice
	seenMu.Lock()
	versions := append([]persisted(nil), seen...)
	seenMu.Unlock()
	contents := map[string]bool{}
	numbers := map[int64]bool{}
	var lastNumber int64
	lastHash := ""
	for _, v := range versions {
		nums, ok := recorded[v.hash]
		if !assert.True(t, ok, "persisted content %s (resourceVersion %s, revision %d) is not in history", v.hash, v.resourceVersion, v.record.Revision) {
			continue
		}
		assert.Contains(t, nums, v.record.Revision, "content %s was stamped revision %d but history records it as %v", v.hash, v.record.Revision, nums)
		if v.hash != lastHash {
			assert.Greater(t, v.record.Revision, lastNumber, "revision numbers go up with each new content (resourceVersion %s)", v.resourceVersion)
			lastNumber, lastHash = v.record.Revision, v.hash
		}
		contents[v.hash] = true
		numbers[v.record.Revision] = true
	}
	for _, rev := range revs {
		assert.True(t, contents[rev.Snapshot.Hash], "history holds content %s (revision %d) that the API server never persisted", rev.Snapshot.Hash, rev.Record.Revision)
	}
	succeeded := 0
	for _, o := range outcomes {
		if strings.Contains(o, ": exit 0") || strings.HasSuffix(o, ": <nil>") {
			succeeded++
		}
	}
	recordFigure("writers racing: %d undo + %d template switch + %d server-side apply on one pool, %d succeeded; %d persisted versions, %d contents, revisions %v, all in history",
		raceRounds, raceRounds, raceRounds, succeeded, len(versions), len(contents), sortedInts(numbers))
}
