package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

const (
	// raceRounds is how many writes each writer makes.
	raceRounds = 8
	// gitOpsManager and gitOpsUser are the GitOps writer's field manager
	// and user, as Argo CD's application controller names them.
	gitOpsManager = "argocd-controller"
	gitOpsUser    = "system:serviceaccount:argocd:argocd-application-controller"
)

// writeOutcome is the result of one write of a racing writer.
type writeOutcome struct {
	writer, want    string // who wrote, and the template it asked for ("" for undo)
	n               int    // the writer's attempt
	ok              bool   // it reported success
	conflict        bool   // it failed on a conflict (server-side apply)
	resourceVersion string // the version it made, on success
	infra           string // that version's infrastructure template
	message         string // its error output
}

// String is how the test logs an outcome.
func (o writeOutcome) String() string {
	if o.ok {
		return fmt.Sprintf("%s %d: ok, resourceVersion %s, template %s", o.writer, o.n, o.resourceVersion, o.infra)
	}
	return fmt.Sprintf("%s %d: failed: %s", o.writer, o.n, o.message)
}

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
	pool := emptyPool(base, name, labels)
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
		snap, err := kinds.MachineDeployment.Snapshot(md)
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

	// Who wrote what, from the writers' own results: each write's outcome,
	// and for a success the version it made (resourceVersion, template).
	var madeMu sync.Mutex
	var outcomes []writeOutcome
	note := func(o writeOutcome) {
		madeMu.Lock()
		defer madeMu.Unlock()
		outcomes = append(outcomes, o)
	}
	cliOutcome := func(writer string, n int, want string, r sandbox.CLIRun) writeOutcome {
		o := writeOutcome{writer: writer, n: n, want: want, message: strings.TrimSpace(r.Stderr)}
		if r.Code != 0 {
			return o
		}
		o.ok = true
		written := &clusterv1.MachineDeployment{}
		if err := json.Unmarshal([]byte(r.Stdout), written); err != nil {
			o.message = fmt.Sprintf("exit 0 but -o json printed no MachineDeployment: %v: %s", err, r.Stdout)
			return o
		}
		o.resourceVersion, o.infra = written.ResourceVersion, written.Spec.Template.Spec.InfrastructureRef.Name
		return o
	}
	gitOps := framework.UserClient(t, sb, gitOpsUser)
	var wg sync.WaitGroup
	wg.Add(3)
	// The GitOps writer's field manager makes the CLI stop a live undo or
	// switch of this object (Argo CD would revert it); the operators here
	// race it on purpose, so they force, as one would to fix a cluster
	// before Git catches up.
	go func() { // CLI 1: undo
		defer wg.Done()
		for n := range raceRounds {
			note(cliOutcome("undo", n, "", runRollout(t, "undo", "md/"+name, "--force", "-o", "json")))
		}
	}()
	go func() { // CLI 2: template switches, to the spare and back
		defer wg.Done()
		for n := range raceRounds {
			target := []string{original, spare}[n%2]
			note(cliOutcome("template", n, target, runRollout(t, "md/"+name, "--template", "devmachinetemplate/"+target, "--force", "-o", "json")))
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
			o := writeOutcome{writer: "apply", n: n, want: original, ok: err == nil, conflict: apierrors.IsConflict(err)}
			if err != nil {
				o.message = err.Error()
			} else {
				o.resourceVersion = applied.GetResourceVersion()
				o.infra, _, _ = unstructured.NestedString(applied.Object, "spec", "template", "spec", "infrastructureRef", "name")
			}
			note(o)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	wg.Wait()

	final := &clusterv1.MachineDeployment{}
	require.NoError(t, sb.Client.Get(ctx, client.ObjectKeyFromObject(pool), final))
	finalSnap, err := kinds.MachineDeployment.Snapshot(final)
	require.NoError(t, err)
	finalRec, err := revisions.RecordFromAnnotations(final.Annotations)
	require.NoError(t, err)
	framework.WaitFor(t, 30*time.Second, pollInterval, "the watch to see the final version and history to record it", func() (bool, string) {
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
	// Every writer got through at least once; every failure is a conflict it
	// gave up on or a refusal, never anything else; and no write is lost:
	// each success made a version the API server persisted, with the
	// template that writer asked for.
	persistedInfra := map[string]string{}
	seenMu.Lock()
	for _, v := range seen {
		persistedInfra[v.resourceVersion] = v.infra
	}
	seenMu.Unlock()
	succeededBy := map[string]int{}
	for _, o := range outcomes {
		if !o.ok {
			assert.True(t, o.conflict || strings.Contains(o.message, "conflict") || strings.Contains(o.message, "[rule "),
				"%s %d failed with neither a conflict nor a refusal: %s", o.writer, o.n, o.message)
			continue
		}
		succeededBy[o.writer]++
		infra, ok := persistedInfra[o.resourceVersion]
		if assert.True(t, ok, "%s %d succeeded with resourceVersion %s, which the API server never persisted (a lost write)", o.writer, o.n, o.resourceVersion) && o.want != "" {
			assert.Equal(t, o.want, infra, "%s %d: the version it made has the template it asked for", o.writer, o.n)
		}
	}
	for _, writer := range []string{"undo", "template", "apply"} {
		assert.Positive(t, succeededBy[writer], "%s never got through in %d attempts", writer, raceRounds)
	}
	revs := historyOf(t, final.UID)
	t.Logf("history:\n%s", framework.DescribeHistory(revs))

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
	succeeded := succeededBy["undo"] + succeededBy["template"] + succeededBy["apply"]
	recordFigure("writers racing: %d undo + %d template switch + %d server-side apply on one pool, %d succeeded; %d persisted versions, %d contents, revisions %v, all in history",
		raceRounds, raceRounds, raceRounds, succeeded, len(versions), len(contents), sortedInts(numbers))
}
