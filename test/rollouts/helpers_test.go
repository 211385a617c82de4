package rollouts

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/sandbox"
)

const (
	// rolloutTimeout bounds one rollout of the small demo.
	rolloutTimeout = 3 * time.Minute
	// pollInterval is how often the tests read the cluster.
	pollInterval = time.Second
)

// machines lists the demo's Machines matching labels, by name.
func machines(t *testing.T, labels client.MatchingLabels) map[string]*clusterv1.Machine {
	t.Helper()
	list := &clusterv1.MachineList{}
	require.NoError(t, sb.Client.List(context.Background(), list, client.InNamespace(demo.Namespace), labels))
	byName := map[string]*clusterv1.Machine{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	return byName
}

// workerLabels select the demo's worker Machines.
func workerLabels() client.MatchingLabels {
	return client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: demo.MachineDeploymentName()}
}

// controlPlaneLabels select the demo's control-plane Machines.
func controlPlaneLabels() client.MatchingLabels {
	return client.MatchingLabels{clusterv1.MachineControlPlaneNameLabel: demo.ControlPlaneName()}
}

// names returns the sorted keys of m.
func names(m map[string]*clusterv1.Machine) []string {
	out := make([]string, 0, len(m))
	for name := range m {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// requireClusterReady fails the test unless the demo is ready (every
// machine ready, nothing rolling), waiting for it a little: each test
// starts from a ready cluster.
func requireClusterReady(t *testing.T) sandbox.ClusterState {
	t.Helper()
	return sb.RequireClusterReady(t, demo.Namespace, demo.Name, rolloutTimeout)
}

// replaced describes the end of a rollout: which machines the rolled
// object must have, and what each must look like.
type replaced struct {
	// what names the rolled object in messages.
	what string
	// labels select its machines.
	labels client.MatchingLabels
	// old are the machines that must all be gone.
	old map[string]*clusterv1.Machine
	// replicas is how many machines there must be.
	replicas int
	// check, if set, must hold for every new machine (nil error).
	check func(*clusterv1.Machine) error
	// progress is called with every change of the rolled object's state.
	progress func() (sandbox.RolloutState, error)
}

// waitReplaced waits until every old machine is gone and exactly
// r.replicas machines exist, all ready and passing r.check, while the
// object's status is complete, on several consecutive reads. It returns
// when that first held.
func waitReplaced(t *testing.T, r replaced) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rolloutTimeout)
	defer cancel()
	var (
		lastText   string
		doneSince  time.Time
		doneInARow int
	)
	for {
		text, done := r.describe(t)
		if text != lastText {
			t.Logf("%s: %s", r.what, text)
			lastText = text
		}
		if done {
			if doneInARow == 0 {
				doneSince = time.Now()
			}
			doneInARow++
			if doneInARow >= 3 {
				return doneSince
			}
		} else {
			doneInARow = 0
		}
		select {
		case <-ctx.Done():
			require.FailNowf(t, "rollout not done", "%s: not rolled out within %s; last: %s", r.what, rolloutTimeout, lastText)
		case <-time.After(pollInterval):
		}
	}
}

// describe reads the rolled object and its machines once: a line saying
// where the rollout stands, and whether it is done.
func (r replaced) describe(t *testing.T) (string, bool) {
	t.Helper()
	state, err := r.progress()
	require.NoError(t, err)
	current := machines(t, r.labels)
	done := state.Complete() && len(current) == r.replicas
	var parts []string
	for _, name := range names(current) {
		m := current[name]
		tag := "new"
		if _, isOld := r.old[name]; isOld {
			tag, done = "old", false
		}
		ready := "not ready"
		if sandbox.MachineReady(m) {
			ready = "ready"
		} else {
			done = false
		}
		if r.check != nil {
			if err := r.check(m); err != nil {
				done = false
				if tag == "new" {
					ready += " (" + err.Error() + ")"
				}
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s %s %s", name, tag, m.Status.Phase, ready))
	}
	return fmt.Sprintf("%s | %s", state, strings.Join(parts, ", ")), done
}
