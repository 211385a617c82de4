package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/builder"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

const (
	// burstWriters is how many clients edit at once, each its own
	// MachineDeployment (so no edit fails on a conflict).
	burstWriters = 4
	// burstLead is how many edits each client makes before a replica is signalled.
	burstLead = 10
	// burstTail is how many edits each client makes after the signalled
	// replica exited and the balancer took it out.
	burstTail = 10
)

// shippedShutdown reads the guard's --shutdown-delay and the pod's
// terminationGracePeriodSeconds from config/manager/manager.yaml.
func shippedShutdown(t *testing.T) (delay, grace time.Duration) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(sb.Env.RepoRoot, "config", "manager", "manager.yaml"))
	require.NoError(t, err)
	m := regexp.MustCompile(`--shutdown-delay=(\S+)`).FindSubmatch(data)
	require.NotNil(t, m, "config/manager/manager.yaml sets no --shutdown-delay")
	delay, err = time.ParseDuration(string(m[1]))
	require.NoError(t, err)
	g := regexp.MustCompile(`terminationGracePeriodSeconds: (\d+)`).FindSubmatch(data)
	require.NotNil(t, g, "config/manager/manager.yaml sets no terminationGracePeriodSeconds")
	seconds, err := strconv.Atoi(string(g[1]))
	require.NoError(t, err)
	return delay, time.Duration(seconds) * time.Second
}

// TestGuardReplicaKilledDuringBurst runs two guard replicas behind a
// readiness-aware balancer (the stand-in for the guard's Service) and, while
// four clients make policed edits as fast as they can, signals the replica
// that serves the API server's connection. With the shipped configuration
// (--shutdown-delay in config/manager, SIGTERM as a pod deletion, node drain
// or rolling update sends it), no edit may fail: the replica fails /readyz
// at once, keeps serving while the balancer takes it out, and the API
// server's next connection reaches the other replica. Without the delay,
// and with SIGKILL (a crash, an OOM kill), the test reports how many edits
// failed: kube-apiserver retries no webhook call that failed to connect or
// lost its connection (see docs/reliability.md).
func TestGuardReplicaKilledDuringBurst(t *testing.T) {
	requireClusterReady(t)
	ctx := context.Background()
	delay, grace := shippedShutdown(t)
	// The delay plus the drain of in-flight requests (at most the webhooks'
	// 10 s timeout) must fit in the pod's grace period, or the kubelet's
	// SIGKILL cuts the drain short.
	assert.GreaterOrEqual(t, grace, delay+10*time.Second, "terminationGracePeriodSeconds leaves no room for --shutdown-delay and the drain")

	pools := burstPools(t)
	t.Cleanup(func() {
		if err := sb.Env.StartGuard(context.Background()); err != nil {
			t.Errorf("starting the single guard again: %v", err)
		}
	})

	// Without the delay, or with SIGKILL, the edits that fail are those
	// in flight on the dying replica (one per client at most) and those the
	// balancer still sends it before its readiness poll notices (one more
	// per client at most): never more than twice the clients, all failing
	// closed ("failed calling webhook"), all ended after the signal and
	// begun before the replica had exited and the balancer had taken it
	// out; every edit begun after that goes through. Runs measured 0–3 and
	// 3–6 (docs/reliability.md).
	for _, tc := range []struct {
		name      string
		sig       syscall.Signal
		args      []string
		maxFailed int
	}{
		{name: "SIGTERM with the shipped shutdown delay", sig: syscall.SIGTERM, args: []string{"--shutdown-delay=" + delay.String()}, maxFailed: 0},
		{name: "SIGTERM without a shutdown delay", sig: syscall.SIGTERM, args: []string{"--shutdown-delay=0s"}, maxFailed: 2 * burstWriters},
		{name: "SIGKILL", sig: syscall.SIGKILL, args: []string{"--shutdown-delay=" + delay.String()}, maxFailed: 2 * burstWriters},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replicas, err := sb.Env.StartGuardReplicas(ctx, framework.ReplicaOptions{Replicas: 2, Args: tc.args})
			require.NoError(t, err)
			defer func() { assert.NoError(t, replicas.Stop()) }()

			b := startBurst(t, pools)
			// The burst under way, through a connection of the API server.
			framework.WaitFor(t, time.Minute, 20*time.Millisecond, "the burst's first edits", func() (bool, string) {
				open := replicas.Open()
				return b.ended(time.Time{}) >= burstLead*burstWriters && open[0]+open[1] > 0, fmt.Sprintf("%d edits, open connections %v", b.ended(time.Time{}), open)
			})
			// The replica the API server is connected to.
			victim := 0
			if open := replicas.Open(); open[1] > open[0] {
				victim = 1
			}
			t.Logf("open connections before the signal: %v", replicas.Open())
			signalled := time.Now()
			require.NoError(t, replicas.Signal(victim, tc.sig))
			exit := replicas.Wait(victim)
			exited := time.Since(signalled)
			framework.WaitFor(t, time.Minute, 20*time.Millisecond, "the balancer to take the signalled replica out", func() (bool, string) {
				return !replicas.Ready(victim), fmt.Sprintf("replica %d still gets new connections", victim)
			})
			out := time.Now()
			framework.WaitFor(t, time.Minute, 20*time.Millisecond, "edits begun after the replica was out", func() (bool, string) {
				n := b.ended(out)
				return n >= burstTail*burstWriters, fmt.Sprintf("%d edits", n)
			})
			edits, failures := b.stop()

			t.Logf("replica %d got %s and exited after %s (%v); routed %v, reset %d; %d edits, %d failed",
				victim, tc.sig, exited.Round(100*time.Millisecond), exit, replicas.Routed(), replicas.Reset(), edits, len(failures))
			for i, f := range failures {
				if i == 5 {
					break
				}
				t.Logf("failed edit: %s", f)
			}
			recordFigure("guard replica %s during a burst: %d edits by %d clients, %d failed; exited %s after the signal; connections routed %v, reset %d",
				tc.name, edits, burstWriters, len(failures), exited.Round(100*time.Millisecond), replicas.Routed(), replicas.Reset())
			require.Greater(t, edits, 0, "the burst made no edit")
			assert.LessOrEqual(t, len(failures), tc.maxFailed, "%s: more edits failed than the bound", tc.name)
			for _, f := range failures {
				assert.Contains(t, f.err, "failed calling webhook", "a failed edit failed closed at the webhook: %s", f)
				// Ordered by the events of the replica's end, not by a time bound.
				assert.True(t, f.at.After(signalled), "a failed edit ended before the signal: %s", f)
				assert.True(t, f.began.Before(out), "an edit begun once the replica had exited and was out of the balancer failed: %s", f)
			}
		})
	}
}

// burstPools creates the MachineDeployments the burst edits: empty pools
// (no machines) of the demo cluster, deleted at the end of the test.
func burstPools(t *testing.T) []client.ObjectKey {
	t.Helper()
	base := getMD(t)
	var keys []client.ObjectKey
	for i := range burstWriters {
		name := fmt.Sprintf("%s-burst-%d", demo.Name, i)
		labels := map[string]string{"faults.rollout-guard.io/pool": name, clusterv1.ClusterNameLabel: demo.Name}
		md := emptyPool(base, name, labels)
		require.NoError(t, sb.Client.Create(context.Background(), md))
		keys = append(keys, client.ObjectKeyFromObject(md))
		t.Cleanup(func() {
			if err := sb.Client.Delete(context.Background(), md); err != nil {
				t.Errorf("deleting %s: %v", name, err)
			}
		})
	}
	return keys
}

// burst is a set of clients editing as fast as they can.
type burst struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	edits    int
	began    []time.Time // when each ended edit was sent
	failures []burstFailure
}

// ended returns how many of the burst's edits sent after since have ended.
func (b *burst) ended(since time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, at := range b.began {
		if at.After(since) {
			n++
		}
	}
	return n
}

// burstFailure is one failed edit of a burst.
type burstFailure struct {
	pool string
	// began and at are when the edit was sent and when it failed.
	began, at time.Time
	err       string
}

// String is how the test logs a failed edit.
func (f burstFailure) String() string {
	return fmt.Sprintf("%s sent at %s, failed at %s: %s", f.pool, f.began.Format("15:04:05.000"), f.at.Format("15:04:05.000"), f.err)
}

// startBurst starts one client per pool, each changing its pool's template
// label (a policed, stamped edit) in a loop, as a JSON merge patch without a
// resourceVersion, so that no edit can fail on a conflict.
func startBurst(t *testing.T, pools []client.ObjectKey) *burst {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b := &burst{cancel: cancel}
	c := framework.UserClient(t, sb, "burst@example.com")
	for i, key := range pools {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				md := builder.MachineDeployment(key.Namespace, key.Name).Build()
				patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"labels":{"faults.rollout-guard.io/step":"w%d-%d"}}}}}`, i, n)
				// The edit itself is not bounded by the burst's context: an
				// edit the test cut short would count as a failure.
				began := time.Now()
				err := c.Patch(context.Background(), md, client.RawPatch(types.MergePatchType, []byte(patch)))
				b.mu.Lock()
				b.edits++
				b.began = append(b.began, began)
				if err != nil {
					b.failures = append(b.failures, burstFailure{pool: key.Name, began: began, at: time.Now(), err: err.Error()})
				}
				b.mu.Unlock()
			}
		}()
	}
	return b
}

// stop ends the burst and returns the number of edits and the failures.
func (b *burst) stop() (int, []burstFailure) {
	b.cancel()
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.edits, append([]burstFailure(nil), b.failures...)
}
