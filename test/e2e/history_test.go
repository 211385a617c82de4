package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// overrideGroup is the group the guard of these tests lets use the break-glass override.
const overrideGroup = "platform-admins"

// writer is one client of the concurrency test: a user, the field manager its
// requests name, and how it writes.
type writer struct {
	user    string
	manager string
	mode    editMode
}

// recordedManager is the field manager the API server records for the
// writer's requests: the one they name, else the name of the client's user
// agent (client-go's default, the test binary's name).
func (wr writer) recordedManager() string {
	if wr.manager != "" {
		return wr.manager
	}
	name, _, _ := strings.Cut(rest.DefaultKubernetesUserAgent(), "/")
	return name
}

var writers = []writer{
	{user: "alice", manager: "rollout-e2e-editor", mode: typedV1beta2},
	{user: "bob", manager: "", mode: mergePatch},
	{user: "system:serviceaccount:argocd:argocd-application-controller", manager: gitOpsManager, mode: serverSideApply},
}

// observed is one version of an object as the API server persisted it.
type observed struct {
	resourceVersion string
	hash            string
	record          revisions.Record
}

// TestHistoryRecordsEveryPersistedTemplate runs three writers at once — a
// typed update with retry on conflict, a JSON merge patch and a server-side
// apply under a GitOps controller's field manager — on one MachineDeployment
// and one KubeadmControlPlane, 300 changes in all, with refused and dry-run
// edits mixed in, while a watch notes every template the API server
// persisted. History must hold each persisted template exactly once, with
// strictly increasing revision numbers naming the right user and field
// manager, and nothing from refused or dry-run edits. The guard is the one
// built with the race detector, for this test: the concurrent admissions
// and records are where its races would show, and one it reports fails
// the test.
func TestHistoryRecordsEveryPersistedTemplate(t *testing.T) {
	const perWriterPerObject = 50 // 3 writers x 2 objects x 50 = 300 changes
	ctx := context.Background()
	env.WithRaceGuard(t)
	w := newWorld(t, framework.WorldSpec{Version: "v1.34.2", WorkerVersion: "v1.34.2"})

	objects := []struct {
		obj      client.Object
		kind     kinds.Kind
		infra    []string // path of the infrastructure reference
		labels   []string // path of the template labels
		annots   []string // path of the template annotations
		infraKnd string
	}{
		{w.MD, kinds.MachineDeployment, []string{"spec", "template", "spec", "infrastructureRef"}, []string{"spec", "template", "metadata", "labels"}, []string{"spec", "template", "metadata", "annotations"}, "DevMachineTemplate"},
		{w.KCP, kinds.KubeadmControlPlane, []string{"spec", "machineTemplate", "spec", "infrastructureRef"}, []string{"spec", "machineTemplate", "metadata", "labels"}, []string{"spec", "machineTemplate", "metadata", "annotations"}, "DevMachineTemplate"},
	}

	// Watch every persisted version of both objects.
	watcher, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var seenMu sync.Mutex
	seen := map[string][]observed{} // by kind
	var watchers sync.WaitGroup
	for _, o := range objects {
		list := map[string]client.ObjectList{"MachineDeployment": &clusterv1.MachineDeploymentList{}, "KubeadmControlPlane": &controlplanev1.KubeadmControlPlaneList{}}[o.kind.GVK.Kind]
		wi, err := watcher.Watch(watchCtx, list, client.InNamespace(w.Namespace), client.MatchingFields{"metadata.name": o.obj.GetName()})
		require.NoError(t, err)
		watchers.Add(1)
		go func(kind kinds.Kind, wi watch.Interface) {
			defer watchers.Done()
			defer wi.Stop()
			for {
				select {
				case <-watchCtx.Done():
					return
				case ev, ok := <-wi.ResultChan():
					if !ok {
						return
					}
					obj, isObj := ev.Object.(client.Object)
					if !isObj || ev.Type == watch.Error || ev.Type == watch.Bookmark {
						continue
					}
					snap, err := kind.Snapshot(obj)
					if err != nil {
						t.Errorf("snapshot of a watched %s: %v", kind.GVK.Kind, err)
						continue
					}
					rec, err := revisions.RecordFromAnnotations(obj.GetAnnotations())
					if err != nil {
						t.Errorf("stamps of a watched %s: %v", kind.GVK.Kind, err)
					}
					seenMu.Lock()
					seen[kind.GVK.Kind] = append(seen[kind.GVK.Kind], observed{obj.GetResourceVersion(), snap.Hash, rec})
					seenMu.Unlock()
				}
			}
		}(o.kind, wi)
	}

	// Who made each revision, from the writers' own successful responses.
	type made struct{ user, manager string }
	var madeMu sync.Mutex
	madeBy := map[string]map[int64]made{"MachineDeployment": {}, "KubeadmControlPlane": {}}
	dryRunHashes := map[string][]string{}

	var wg sync.WaitGroup
	for wi, wr := range writers {
		c := framework.UserClient(t, env, wr.user)
		for _, o := range objects {
			wg.Add(1)
			go func(wi int, wr writer, c client.Client) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(wi*7 + len(o.kind.GVK.Kind))))
				for n := range perWriterPerObject {
					// Every write changes the template (a unique annotation), so
					// each success is exactly one new revision; the
					// infrastructure reference and a label repeat values, so
					// rollouts and in-place changes mix.
					changes := map[string]any{}
					set := func(value any, path ...string) {
						assert.NoError(t, unstructured.SetNestedField(changes, value, path...))
					}
					set(fmt.Sprintf("%s-%d", wr.user, n), append(o.annots, "e2e.rollout-guard.io/step")...)
					set(map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": o.infraKnd, "name": fmt.Sprintf("tmpl-%d", rng.Intn(3))}, o.infra...)
					set([]string{"gold", "silver"}[rng.Intn(2)], append(o.labels, "tier")...)
					got, err := writeChanges(ctx, c, wr, o.obj, changes, false)
					if !assert.NoError(t, err, "%s %s write %d", wr.user, o.kind.GVK.Kind, n) {
						return
					}
					rec, err := revisions.RecordFromAnnotations(got.GetAnnotations())
					assert.NoError(t, err)
					madeMu.Lock()
					madeBy[o.kind.GVK.Kind][rec.Revision] = made{wr.user, wr.recordedManager()}
					madeMu.Unlock()

					if n%10 == 5 {
						// A dry-run edit: answered, never recorded.
						set(fmt.Sprintf("%s-dry-run-%d", wr.user, n), append(o.annots, "e2e.rollout-guard.io/step")...)
						dry, err := writeChanges(ctx, c, wr, o.obj, changes, true)
						if !assert.NoError(t, err, "dry-run write") {
							return
						}
						snap, err := o.kind.Snapshot(dry)
						assert.NoError(t, err)
						madeMu.Lock()
						dryRunHashes[o.kind.GVK.Kind] = append(dryRunHashes[o.kind.GVK.Kind], snap.Hash)
						madeMu.Unlock()
					}
					if n%10 == 7 && o.kind.GVK.Kind == "KubeadmControlPlane" {
						// A refused edit: a downgrade, which must not consume a revision number.
						err := c.Patch(ctx, o.obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"version":"v1.33.1"}}`)))
						if assert.Error(t, err, "a downgrade went through") {
							assert.Contains(t, err.Error(), "[rule ControlPlaneDowngrade]")
						}
					}
				}
			}(wi, wr, c)
		}
	}
	wg.Wait()

	for _, o := range objects {
		kind := o.kind.GVK.Kind
		live := o.kind.New()
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(o.obj), live))
		liveSnap, err := o.kind.Snapshot(live)
		require.NoError(t, err)

		// The watch has seen the last version; the reconciler has recorded the live revision.
		require.Eventually(t, func() bool {
			seenMu.Lock()
			defer seenMu.Unlock()
			s := seen[kind]
			return len(s) > 0 && s[len(s)-1].resourceVersion == live.GetResourceVersion()
		}, 20*time.Second, 50*time.Millisecond, "the watch never saw the last %s", kind)
		var revs []revisions.Revision
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			revs, _, err = history.List(ctx, env.Client, w.Namespace, string(live.GetUID()))
			require.NoError(c, err)
			assert.True(c, slices.ContainsFunc(revs, func(r revisions.Revision) bool { return r.Snapshot.Hash == liveSnap.Hash }),
				"the live %s (%s) among the recorded: %s", kind, liveSnap.Hash, framework.DescribeHistory(revs))
		}, 20*time.Second, 100*time.Millisecond, "the live %s revision was never recorded", kind)

		seenMu.Lock()
		events := append([]observed(nil), seen[kind]...)
		seenMu.Unlock()

		// Revision numbers: +1 on every new template, unchanged otherwise.
		persisted := map[string][]int64{} // hash -> revision numbers it was persisted under
		for i, ev := range events {
			if i > 0 {
				prev := events[i-1]
				if ev.hash == prev.hash {
					assert.Equal(t, prev.record.Revision, ev.record.Revision, "%s: revision changed without a template change at %s", kind, ev.resourceVersion)
				} else {
					assert.Equal(t, prev.record.Revision+1, ev.record.Revision, "%s: revision numbers must increase by one per persisted template (at %s)", kind, ev.resourceVersion)
				}
			}
			if !containsInt(persisted[ev.hash], ev.record.Revision) {
				persisted[ev.hash] = append(persisted[ev.hash], ev.record.Revision)
			}
		}
		last := events[len(events)-1].record.Revision
		assert.EqualValues(t, 1+len(writers)*perWriterPerObject, last, "%s: one revision per successful write, none for refused or dry-run ones", kind)

		// History: exactly one record per persisted template, listing every
		// number it was live under, naming who made its latest one.
		byHash := map[string]revisions.Revision{}
		for _, r := range revs {
			_, dup := byHash[r.Snapshot.Hash]
			assert.False(t, dup, "%s: template %s recorded twice", kind, r.Snapshot.Hash)
			byHash[r.Snapshot.Hash] = r
			require.Len(t, r.Record.History, len(persisted[r.Snapshot.Hash]), "%s: revision %d", kind, r.Record.Revision)
		}
		assert.Len(t, byHash, len(persisted), "%s: every persisted template is in history", kind)
		for hash, numbers := range persisted {
			r, ok := byHash[hash]
			if !assert.True(t, ok, "%s: persisted template %s (revisions %v) missing from history", kind, hash, numbers) {
				continue
			}
			sort.Slice(numbers, func(i, j int) bool { return numbers[i] < numbers[j] })
			assert.Equal(t, numbers, r.Record.History, "%s: template %s", kind, hash)
			if r.Record.Revision == 1 {
				assert.Equal(t, "created", r.Record.ChangeType)
				continue
			}
			want := madeBy[kind][r.Record.Revision]
			assert.Equal(t, want.user, r.Record.ChangedBy, "%s revision %d: changed-by", kind, r.Record.Revision)
			assert.Equal(t, want.manager, r.Record.FieldManager, "%s revision %d: field manager", kind, r.Record.Revision)
			assert.Contains(t, []string{"rollout", "in-place"}, r.Record.ChangeType)
			assert.NotEmpty(t, r.Record.ChangeCause)
		}
		for _, h := range dryRunHashes[kind] {
			_, recorded := byHash[h]
			assert.False(t, recorded, "%s: a dry-run template was recorded", kind)
		}
		assertOwnedBy(t, w.Namespace, live)
	}
	stopWatch()
	watchers.Wait()
}

// writeChanges applies changes (a partial object) to obj as wr does.
func writeChanges(ctx context.Context, c client.Client, wr writer, obj client.Object, changes map[string]any, dryRun bool) (client.Object, error) {
	var opts []client.PatchOption
	if wr.manager != "" {
		opts = append(opts, client.FieldOwner(wr.manager))
	}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	out := obj.DeepCopyObject().(client.Object)
	switch wr.mode {
	case typedV1beta2:
		// Three writers contend for one object, and the two patch writers
		// are retried by the API server itself: retry as long as a real
		// controller would, not the five tries of retry.DefaultRetry. (No
		// Cap: reaching it ends a wait.Backoff's steps.)
		backoff := wait.Backoff{Steps: 1000, Duration: 10 * time.Millisecond, Factor: 1, Jitter: 1}
		err := retry.RetryOnConflict(backoff, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), out); err != nil {
				return err
			}
			u, err := toMap(out)
			if err != nil {
				return err
			}
			mergeInto(u, changes)
			if err := fromMap(u, out); err != nil {
				return err
			}
			var uopts []client.UpdateOption
			if wr.manager != "" {
				uopts = append(uopts, client.FieldOwner(wr.manager))
			}
			if dryRun {
				uopts = append(uopts, client.DryRunAll)
			}
			return c.Update(ctx, out, uopts...)
		})
		return out, err
	case mergePatch:
		data, err := json.Marshal(changes)
		if err != nil {
			return nil, err
		}
		return out, c.Patch(ctx, out, client.RawPatch(types.MergePatchType, data), opts...)
	case serverSideApply:
		gvk := map[string]string{"*v1beta2.MachineDeployment": "cluster.x-k8s.io/v1beta2", "*v1beta2.KubeadmControlPlane": "controlplane.cluster.x-k8s.io/v1beta2"}[fmt.Sprintf("%T", obj)]
		applied := map[string]any{
			"apiVersion": gvk,
			"kind":       strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1beta2."),
			"metadata":   map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace()},
		}
		mergeInto(applied, changes)
		data, err := json.Marshal(applied)
		if err != nil {
			return nil, err
		}
		return out, c.Patch(ctx, out, client.RawPatch(types.ApplyPatchType, data), append(opts, client.ForceOwnership)...)
	}
	return nil, fmt.Errorf("unknown mode %s", wr.mode)
}

// assertOwnedBy checks that every RolloutRevision of obj names it as owner, by UID.
func assertOwnedBy(t *testing.T, namespace string, obj client.Object) {
	t.Helper()
	list := &rgv1alpha1.RolloutRevisionList{}
	require.NoError(t, env.Client.List(context.Background(), list, client.InNamespace(namespace), client.MatchingLabels{revisions.LabelOwnerUID: string(obj.GetUID())}))
	require.NotEmpty(t, list.Items)
	for _, cr := range list.Items {
		owner := metav1.GetControllerOf(&cr)
		if assert.NotNil(t, owner, "RolloutRevision %s has no controller owner", cr.Name) {
			assert.Equal(t, obj.GetUID(), owner.UID, "RolloutRevision %s", cr.Name)
			assert.Equal(t, obj.GetName(), owner.Name, "RolloutRevision %s", cr.Name)
		}
	}
}

func containsInt(list []int64, v int64) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
