package status

import (
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// Observer follows the Clusters a namespace and a label selector select,
// with their control planes, worker pools and machines (one list and one
// watch per kind), and judges each cluster as status cluster/NAME does:
// its report, its state in a fleet, and a tracker of its own for stalls.
// A staged rollout waits on it, wave by wave.
type Observer struct {
	w        *watcher
	grace    time.Duration
	deadline time.Duration
	trackers map[string]*StatusTracker
}

// NewObserver returns an Observer of the Clusters of namespace ("" for
// every namespace) that selector selects, judged with the grace period and
// the progress deadline of status; what it watches of the API server's
// outages is noted on notes. Start it before reading it.
func NewObserver(ctx context.Context, cl *core.Clients, namespace string, selector labels.Selector, grace, deadline time.Duration, notes io.Writer) (*Observer, error) {
	f := fleetScope{name: "cluster", namespace: namespace, selector: selector}
	if !selector.Empty() {
		f.name = "cluster -l " + selector.String()
	}
	_, pools, err := core.ListMachinePools(ctx, cl, namespace, "watch "+f.name, client.Limit(1))
	if err != nil {
		return nil, err
	}
	return &Observer{w: newFleetWatcher(cl, f, pools, notes), grace: grace, deadline: deadline, trackers: map[string]*StatusTracker{}}, nil
}

// Start lists and watches until ctx ends.
func (o *Observer) Start(ctx context.Context) { o.w.run(ctx) }

// ObservedCluster is a watched cluster's state, with the Cluster as read.
type ObservedCluster struct {
	FleetCluster
	Cluster *clusterv1.Cluster
}

// Clusters returns each watched cluster's state at now, by
// "NAMESPACE/NAME"; nil until every kind has been listed. A cluster's
// stall is judged from when the Observer first saw it, so a cluster waited
// on is forgotten (Forget) when a new change starts it again.
func (o *Observer) Clusters(now time.Time) (map[string]ObservedCluster, error) {
	if !o.w.allSynced() {
		return nil, nil
	}
	members, err := fleetMembers(o.w)
	if err != nil {
		return nil, err
	}
	out := make(map[string]ObservedCluster, len(members))
	for _, m := range members {
		k := objectKey(m.Cluster)
		tr := o.trackers[k]
		if tr == nil {
			tr = &StatusTracker{Grace: o.grace, ProgressDeadline: o.deadline}
			o.trackers[k] = tr
		}
		r := EvaluateFleetMember(m, now)
		out[k] = ObservedCluster{FleetCluster: FleetStateOf(m.Cluster, r, tr.Observe(r.Cluster, now), o.deadline), Cluster: m.Cluster}
	}
	return out, nil
}

// Forget drops what the Observer judged of the cluster NAMESPACE/NAME so
// far: its grace period and progress deadline start again at its next
// read.
func (o *Observer) Forget(key string) { delete(o.trackers, key) }

// Confirmed reads the clusters once more, listing them afresh, and reports
// whether each of keys is rolled out on that read (see readComplete).
func (o *Observer) Confirmed(ctx context.Context, keys []string) (bool, error) {
	complete, err := readComplete(ctx, o.w)
	if err != nil {
		return false, err
	}
	for _, k := range keys {
		if !complete[k] {
			return false, nil
		}
	}
	return true, nil
}

// Wait returns after the next change of what the Observer watches, or
// after d: a watch that failed for good ends it with the failure.
func (o *Observer) Wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-o.w.failed:
		return fmt.Errorf("watching the clusters: %w", err)
	case <-t.C:
		return nil
	case <-o.w.changed:
		return nil
	}
}
