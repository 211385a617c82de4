package topology

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

const (
	// chaosCluster is the ClusterClass cluster the chaos test upgrades.
	chaosCluster = "demo-chaos"
	// killEvery is how often a guard replica is killed during the upgrade,
	// at the latest: a replica is also killed as soon as the cluster's
	// Machines change (a step of the upgrade).
	killEvery = 6 * time.Second
	// machinesEvery is how often the killer looks at the cluster's Machines.
	machinesEvery = 500 * time.Millisecond
	// gitOpsEvery is how often the GitOps writer re-applies the old manifest.
	gitOpsEvery = 2 * time.Second
	// labelEvery is how often the label writer edits a label.
	labelEvery = time.Second
)

// TestChaosDuringAChainedUpgrade: while Cluster API walks a ClusterClass
// cluster from v1.33.5 to v1.36.1 (three minors, one kubectl patch), two
// guard replicas behind a stand-in Service are killed in turn (SIGKILL and
// SIGTERM alternately, each brought back), kube-apiserver is restarted once,
// a GitOps writer keeps re-applying the cluster's old manifest (v1.33.5: a
// downgrade) and a label writer keeps editing a label. The upgrade
// completes; the old manifest is never admitted; the guard refuses none of
// Cluster API's own edits (the API server's count of denials by any of the
// guard's webhooks, validating or stamping, for updates or creates, stays 0
// but for the Cluster webhook's refusals of the old manifest); the control
// plane's history holds each version it ran exactly once, each number once;
// and the worker pool's history holds every content the API server
// persisted (a watch notes each version) under the number it was stamped
// with, no number naming two contents.
func TestChaosDuringAChainedUpgrade(t *testing.T) {
	ctx := context.Background()
	spec, err := sb.CreateClassCluster(ctx, sandbox.ClassClusterSpec{
		Name: chaosCluster, Namespace: cc.Namespace, Class: sandbox.DefaultClass(cc.Namespace),
		ControlPlaneMachines: 1, WorkerMachines: 1, KubernetesVersion: "v1.33.5",
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		// Free the machines for the tests that follow; the controllers delete them.
		_ = sb.Client.Delete(context.Background(), builder.Cluster(cc.Namespace, chaosCluster).Build())
	})
	requireAllAt(t, chaosCluster, "v1.33.5")

	replicas, err := sb.Env.StartGuardReplicas(ctx, framework.ReplicaOptions{Replicas: 2})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, replicas.Stop())
		assert.NoError(t, sb.Env.StartGuard(context.Background()), "back to one guard")
	})

	pools := watchPools(t, chaosCluster)
	denials := &denialCounter{t: t}
	denials.start()
	begin := time.Now()
	mustKubectl(t, "patch", "cluster", chaosCluster, "--type", "merge", "-p", `{"spec":{"topology":{"version":"v1.36.1"}}}`)

	chaosCtx, stopChaos := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var kills []string
	// The Machines of the cluster at each kill made when they had changed:
	// kills paced by the upgrade's steps, so many whatever its speed.
	var killedAtSteps []string
	wg.Add(1)
	go func() { // Guard replicas killed in turn, each brought back.
		defer wg.Done()
		lastStep := chaosMachines(chaosCluster)
		for n := 0; ; n++ {
			timeout := time.After(killEvery)
			step := ""
		wait:
			for {
				select {
				case <-chaosCtx.Done():
					return
				case <-timeout:
					break wait
				case <-time.After(machinesEvery):
					if m := chaosMachines(chaosCluster); m != "" && m != lastStep {
						step, lastStep = m, m
						break wait
					}
				}
			}
			i, sig := n%2, []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM}[(n/2)%2]
			if err := replicas.Signal(i, sig); err != nil {
				t.Errorf("signalling replica %d: %v", i, err)
				return
			}
			_ = replicas.Wait(i)
			// Brought back as a kubelet would: a replica that starts while
			// kube-apiserver is down exits, and is started again.
			var startErr error
			for attempt := 0; attempt < 60; attempt++ {
				if startErr = replicas.Start(context.Background(), i); startErr == nil {
					break
				}
				time.Sleep(time.Second)
			}
			if startErr != nil {
				t.Errorf("starting replica %d again: %v", i, startErr)
				return
			}
			kills = append(kills, fmt.Sprintf("%s %d", sig, i))
			if step != "" {
				killedAtSteps = append(killedAtSteps, step)
			}
		}
	}()
	gitOps := &writerLog{}
	wg.Add(1)
	go func() { // GitOps: the cluster's manifest as it was, v1.33.5.
		defer wg.Done()
		c, err := sb.ClientAs("system:serviceaccount:argocd:argocd-application-controller", "system:masters")
		if err != nil {
			t.Errorf("GitOps client: %v", err)
			return
		}
		for chaosCtx.Err() == nil {
			old := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": clusterv1.GroupVersion.String(), "kind": "Cluster",
				"metadata": map[string]any{"namespace": cc.Namespace, "name": chaosCluster},
				"spec":     map[string]any{"topology": map[string]any{"version": "v1.33.5"}},
			}}
			gitOps.note(c.Patch(context.Background(), old, client.Apply, client.FieldOwner("argocd-controller"), client.ForceOwnership))
			select {
			case <-chaosCtx.Done():
			case <-time.After(gitOpsEvery):
			}
		}
	}()
	labels := &writerLog{}
	wg.Add(1)
	go func() { // A label writer on the Cluster: never policed.
		defer wg.Done()
		for n := 0; chaosCtx.Err() == nil; n++ {
			patch := fmt.Appendf(nil, `{"metadata":{"labels":{"chaos.rollout-guard.io/tick":"t%d"}}}`, n)
			target := &clusterv1.Cluster{}
			target.Namespace, target.Name = cc.Namespace, chaosCluster
			labels.note(sb.Client.Patch(context.Background(), target, client.RawPatch(types.MergePatchType, patch)))
			select {
			case <-chaosCtx.Done():
			case <-time.After(labelEvery):
			}
		}
	}()

	// kube-apiserver restarted once, once the control plane is on its way.
	waitForControlPlaneMachineAt(t, chaosCluster, "v1.34.3")
	denials.beforeRestart()
	restarted, err := sb.Env.RestartAPIServer(ctx, framework.APIServerRestart{Down: 5 * time.Second})
	require.NoError(t, err)
	denials.afterRestart()

	requireAllAt(t, chaosCluster, "v1.36.1")
	took := time.Since(begin)
	stopChaos()
	wg.Wait()
	got := denials.stop()
	t.Logf("upgrade took %s; kube-apiserver down %s (stopped in %s, ready in %s); guard replicas killed: %v",
		took.Round(time.Second), (restarted.Stopped + 5*time.Second + restarted.Ready).Round(100*time.Millisecond), restarted.Stopped.Round(100*time.Millisecond), restarted.Ready.Round(100*time.Millisecond), kills)
	t.Logf("GitOps re-applies: %s", gitOps.summary())
	t.Logf("label edits: %s", labels.summary())
	t.Logf("the guard's denials by webhook, as the API server counts them: %v", got)

	// The upgrade completed, through every step.
	h := history(t, "kcp/"+spec.ControlPlaneName())
	var versions []string
	numbers := map[int64]string{}
	var highest int64
	for _, r := range h.Revisions {
		versions = append(versions, r.Version)
		for _, n := range append([]int64{r.Revision}, r.History...) {
			if other, ok := numbers[n]; ok && other != r.Hash {
				t.Errorf("revision %d names two contents: %s and %s", n, other, r.Hash)
			}
			numbers[n] = r.Hash
			highest = max(highest, n)
		}
	}
	assert.Equal(t, []string{"v1.33.5", "v1.34.3", "v1.35.2", "v1.36.1"}, versions, "each version the control plane ran, once: %+v", h.Revisions)
	// One number per change of content, 1 to the highest: none persisted
	// and left out.
	assert.Len(t, numbers, int(highest), "the control plane's history numbers every content from 1 to %d: %+v", highest, h.Revisions)
	// The worker pool: every content persisted is in its history, under
	// the number it was stamped with.
	pools.settle(t)
	for _, line := range pools.checkHistory(t, "v1.33.5", "v1.36.1") {
		t.Log(line)
	}
	assert.Contains(t, pools.namesSeen(), spec.MachineDeploymentName(), "the topology's worker pool was watched")
	// The cluster's Machines change at least 3 times as its control plane
	// walks three minors (a new Machine each): a kill at each change seen.
	assert.GreaterOrEqual(t, len(killedAtSteps), 3, "guard replicas killed at steps of the upgrade: %v", killedAtSteps)

	// The old manifest was never admitted; the guard refused it when it
	// could answer, and it failed closed when no replica could.
	assert.Zero(t, gitOps.ok, "the GitOps writer's downgrade was admitted: %s", gitOps.summary())
	assert.Positive(t, gitOps.total(), "the GitOps writer made no attempt")
	for _, e := range gitOps.errors {
		assert.True(t, apierrors.IsInvalid(e) || apierrors.IsForbidden(e) || strings.Contains(e.Error(), "failed calling webhook") || strings.Contains(e.Error(), "connection refused") || apierrors.IsServiceUnavailable(e) || apierrors.IsInternalError(e),
			"the downgrade failed for another reason: %v", e)
	}
	assert.Positive(t, got[guardClusterWebhook], "the guard refused the downgrade at least once")
	// Cluster API's own edits were never refused by the guard: by none of
	// its webhooks, validating or stamping, for updates or for creates.
	for name, n := range got {
		if name != guardClusterWebhook {
			assert.Zero(t, n, "webhook %s refused an edit", name)
		}
	}
	for _, name := range []string{guardKCPWebhook, guardMDWebhook, guardStampKCPWebhook, guardStampMDWebhook} {
		assert.Contains(t, got, name, "the denials of %s are counted", name)
	}
	// Label edits never reach the guard: they fail only while the API server is down.
	assert.Positive(t, labels.ok, "label edits went through")
	for _, e := range labels.errors {
		assert.NotContains(t, e.Error(), "webhook", "a label edit reached a webhook: %v", e)
	}
	recordTiming(fmt.Sprintf("chained upgrade under chaos (%d guard kills, 1 API server restart)", len(kills)), took)
}

// chaosMachines describes the Machines of Cluster name not being deleted
// (name and version, sorted), "" when they cannot be read: the state of an
// upgrade the chaos paces its kills by. It reports no failure: it runs
// beside the test, and a reading missed is made again.
func chaosMachines(name string) string {
	list := &clusterv1.MachineList{}
	if err := sb.Client.List(context.Background(), list, client.InNamespace(cc.Namespace),
		client.MatchingLabels{clusterv1.ClusterNameLabel: name}); err != nil {
		return ""
	}
	var out []string
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() {
			out = append(out, m.Name+"@"+m.Spec.Version)
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// writerLog counts a writer's outcomes.
type writerLog struct {
	mu     sync.Mutex
	ok     int
	errors []error
}

func (w *writerLog) note(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.ok++
		return
	}
	w.errors = append(w.errors, err)
}

func (w *writerLog) total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ok + len(w.errors)
}

func (w *writerLog) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	kinds := map[string]int{}
	for _, e := range w.errors {
		switch {
		case apierrors.IsInvalid(e) || apierrors.IsForbidden(e):
			kinds["refused"]++
		case strings.Contains(e.Error(), "failed calling webhook"):
			kinds["failed closed"]++
		default:
			kinds["API server unreachable or other"]++
		}
	}
	return fmt.Sprintf("%d admitted, %d failed %v", w.ok, len(w.errors), kinds)
}

// denialCounter sums the API server's count of denials by each of the
// guard's webhooks (apiserver_admission_webhook_rejection_count with
// error_type no_error) across one kube-apiserver restart, which resets it.
type denialCounter struct {
	t                      *testing.T
	first, beforeRestartAt map[string]float64
	afterStart             map[string]float64
}

func (d *denialCounter) start()         { d.first = guardRejections(d.t, true) }
func (d *denialCounter) beforeRestart() { d.beforeRestartAt = guardRejections(d.t, true) }
func (d *denialCounter) afterRestart()  { d.afterStart = guardRejections(d.t, true) }

// stop returns the denials counted since start, by webhook: every webhook
// counted at any of the four readings.
func (d *denialCounter) stop() map[string]float64 {
	last := guardRejections(d.t, true)
	out := map[string]float64{}
	for _, counts := range []map[string]float64{d.first, d.beforeRestartAt, d.afterStart, last} {
		for name := range counts {
			out[name] = d.beforeRestartAt[name] - d.first[name] + last[name] - d.afterStart[name]
		}
	}
	return out
}
