package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/history"
)

// watchPersisted notes every version of the soaked objects of one kind the
// API server persists, until ctx ends: a list, then a watch resumed from
// the last resourceVersion seen whenever it ends (as API server restarts
// end it). A watch the API server can no longer resume (410 Gone: its
// watch cache starts after the version asked) is a gap: the harness lists
// again and counts it, since versions in between may be missed.
func (s *soak) watchPersisted(ctx context.Context, c client.WithWatch, newList func() client.ObjectList) {
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			list := newList()
			if err := c.List(ctx, list, client.InNamespace(s.ns)); err != nil {
				sleepCtx(ctx, time.Second)
				continue
			}
			items, _ := meta.ExtractList(list)
			for _, item := range items {
				if obj, ok := item.(client.Object); ok {
					s.noteSeen(obj)
				}
			}
			rv = list.(metav1.ListInterface).GetResourceVersion()
		}
		w, err := c.Watch(ctx, newList(), client.InNamespace(s.ns),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				s.gap()
				rv = ""
			}
			sleepCtx(ctx, time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Bookmark:
				obj, ok := ev.Object.(client.Object)
				if !ok {
					continue
				}
				rv = obj.GetResourceVersion()
				if ev.Type != watch.Bookmark {
					s.noteSeen(obj)
				}
			case watch.Error:
				if st, ok := ev.Object.(*metav1.Status); ok && (st.Code == http.StatusGone || st.Reason == metav1.StatusReasonExpired || st.Reason == metav1.StatusReasonGone) {
					s.gap()
					rv = ""
				}
			}
		}
		w.Stop()
	}
}

func (s *soak) gap() {
	s.mu.Lock()
	s.watchGaps++
	s.mu.Unlock()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// objectHistory is the result of the history check of one soaked object.
type objectHistory struct {
	object   string
	check    Completeness
	notes    []string
	highest  int64
	restarts int
	// longestList is the most revision numbers one RolloutRevision
	// holds (a content the object came back to again and again).
	longestList int
}

// checkHistories compares, for every soaked object, what was persisted
// with what history holds.
func (s *soak) checkHistories(ctx context.Context) ([]objectHistory, error) {
	objs := []client.Object{
		&controlplanev1.KubeadmControlPlane{},
		&clusterv1.MachineDeployment{},
	}
	names := []string{s.demo.ControlPlaneName(), s.demo.MachineDeploymentName()}
	for _, p := range append(append([]string(nil), s.pools...), s.restartPool) {
		objs = append(objs, &clusterv1.MachineDeployment{})
		names = append(names, p)
	}
	s.mu.Lock()
	gaps := s.watchGaps
	seen := map[string][]Seen{}
	for k, v := range s.seen {
		seen[k] = append([]Seen(nil), v...)
	}
	s.mu.Unlock()
	var out []objectHistory
	for i, obj := range objs {
		if err := s.sb.Client.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: names[i]}, obj); err != nil {
			return nil, fmt.Errorf("reading %s: %w", names[i], err)
		}
		key := objectKey(obj)
		revs, bad, err := history.List(ctx, s.sb.Client, s.ns, string(obj.GetUID()))
		if err != nil {
			return nil, err
		}
		var recorded []Recorded
		oh := objectHistory{object: key}
		for _, r := range revs {
			nums := r.Record.History
			if len(nums) == 0 {
				nums = []int64{r.Record.Revision}
			}
			recorded = append(recorded, Recorded{Hash: r.Snapshot.Hash, Numbers: nums})
			oh.highest = max(oh.highest, r.Record.Revision)
			oh.restarts += len(r.Record.Restarts)
			oh.longestList = max(oh.longestList, len(nums))
		}
		oh.check, oh.notes = CheckHistory(key, seen[key], recorded, gaps)
		for _, e := range bad {
			oh.check.Problems = append(oh.check.Problems, fmt.Sprintf("%s: damaged RolloutRevision: %v", key, e))
		}
		out = append(out, oh)
	}
	return out, nil
}
