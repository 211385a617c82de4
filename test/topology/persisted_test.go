package topology

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/watch"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	revhistory "github.com/rollout-guard/rollout-guard/history"
	"github.com/rollout-guard/rollout-guard/kinds"
	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/test/framework"
)

// persistedVersion is one version of a MachineDeployment as the API server
// persisted it.
type persistedVersion struct {
	resourceVersion string
	// hash is its revision content's hash, revision the number it was
	// stamped with (rollout-guard.io/revision), version its
	// spec.template.spec.version.
	hash     string
	revision int64
	version  string
	// afterGap: the watch could not resume before this version was noted
	// (410 Gone after a kube-apiserver restart) and listed again, so
	// versions persisted between the one before and this one may be
	// missing.
	afterGap bool
}

// poolWatch notes every version of a cluster's MachineDeployments that the
// API server persists: a list, then a watch resumed from the last
// resourceVersion seen whenever it ends (a kube-apiserver restart ends it),
// listed again when the API server can no longer resume it (410 Gone: its
// new watch cache starts after the version asked).
type poolWatch struct {
	cluster string
	cancel  context.CancelFunc
	done    chan struct{}

	mu       sync.Mutex
	names    map[types.UID]string
	seen     map[types.UID][]persistedVersion
	inGap    map[types.UID]bool
	gaps     int
	problems []string
}

// watchPools starts noting the versions of the MachineDeployments of
// Cluster name; the first list is noted before it returns.
func watchPools(t *testing.T, name string) *poolWatch {
	t.Helper()
	c, err := client.NewWithWatch(sb.Config, client.Options{Scheme: sb.Scheme})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	p := &poolWatch{cluster: name, cancel: cancel, done: make(chan struct{}),
		names: map[types.UID]string{}, seen: map[types.UID][]persistedVersion{}, inGap: map[types.UID]bool{}}
	rv, err := p.list(ctx, c)
	require.NoError(t, err, "listing the MachineDeployments of %s", name)
	require.NotEmpty(t, p.uids(), "Cluster %s has no MachineDeployment", name)
	go p.run(ctx, c, rv)
	t.Cleanup(p.stop)
	return p
}

// stop ends the watch and waits for it.
func (p *poolWatch) stop() {
	p.cancel()
	<-p.done
}

func (p *poolWatch) selector() []client.ListOption {
	return []client.ListOption{client.InNamespace(cc.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: p.cluster}}
}

// list notes every MachineDeployment of the cluster and returns the list's
// resourceVersion.
func (p *poolWatch) list(ctx context.Context, c client.WithWatch) (string, error) {
	list := &clusterv1.MachineDeploymentList{}
	if err := c.List(ctx, list, p.selector()...); err != nil {
		return "", err
	}
	for i := range list.Items {
		p.note(&list.Items[i])
	}
	return list.ResourceVersion, nil
}

func (p *poolWatch) run(ctx context.Context, c client.WithWatch, rv string) {
	defer close(p.done)
	pause := func() {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	for ctx.Err() == nil {
		if rv == "" {
			var err error
			if rv, err = p.list(ctx, c); err != nil {
				rv = ""
				pause()
				continue
			}
		}
		w, err := c.Watch(ctx, &clusterv1.MachineDeploymentList{},
			append(p.selector(), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})...)
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				p.gap()
				rv = ""
			}
			pause()
			continue
		}
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Bookmark:
				md, ok := ev.Object.(*clusterv1.MachineDeployment)
				if !ok {
					continue
				}
				rv = md.ResourceVersion
				if ev.Type != watch.Bookmark {
					p.note(md)
				}
			case watch.Error:
				if st, ok := ev.Object.(*metav1.Status); ok && (st.Code == http.StatusGone || st.Reason == metav1.StatusReasonExpired || st.Reason == metav1.StatusReasonGone) {
					p.gap()
					rv = ""
				}
			}
		}
		w.Stop()
	}
}

// gap notes that the watch must list again: the next version noted of each
// MachineDeployment follows a gap.
func (p *poolWatch) gap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gaps++
	for uid := range p.seen {
		p.inGap[uid] = true
	}
}

// note records one persisted version.
func (p *poolWatch) note(md *clusterv1.MachineDeployment) {
	snap, err := kinds.MachineDeployment.Snapshot(md)
	var rec revisions.Record
	if err == nil {
		rec, err = revisions.RecordFromAnnotations(md.Annotations)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.problems = append(p.problems, fmt.Sprintf("MachineDeployment %s at resourceVersion %s: %v", md.Name, md.ResourceVersion, err))
		return
	}
	seen := p.seen[md.UID]
	if n := len(seen); n > 0 && seen[n-1].resourceVersion == md.ResourceVersion {
		p.inGap[md.UID] = false // listed again at the version seen last: nothing missed
		return
	}
	p.names[md.UID] = md.Name
	p.seen[md.UID] = append(seen, persistedVersion{
		resourceVersion: md.ResourceVersion, hash: snap.Hash, revision: rec.Revision,
		version: md.Spec.Template.Spec.Version, afterGap: p.inGap[md.UID],
	})
	p.inGap[md.UID] = false
}

// uids returns the MachineDeployments seen.
func (p *poolWatch) uids() []types.UID {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []types.UID
	for uid := range p.seen {
		out = append(out, uid)
	}
	slices.Sort(out)
	return out
}

// namesSeen returns the names of the MachineDeployments seen.
func (p *poolWatch) namesSeen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, name := range p.names {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// versions returns the versions of uid seen, in the order persisted.
func (p *poolWatch) versions(uid types.UID) []persistedVersion {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen[uid])
}

// settle waits until the watch has seen the live version of every
// MachineDeployment of the cluster and history records its content under
// the number it was stamped with (the reconciler records the live
// revision), then stops the watch.
func (p *poolWatch) settle(t *testing.T) {
	t.Helper()
	framework.WaitFor(t, time.Minute, pollInterval, "the watch to see the live MachineDeployments and history to record them", func() (bool, string) {
		list := &clusterv1.MachineDeploymentList{}
		if err := sb.Client.List(context.Background(), list, p.selector()...); err != nil {
			return false, err.Error()
		}
		var waiting []string
		for i := range list.Items {
			md := &list.Items[i]
			seen := p.versions(md.UID)
			if len(seen) == 0 || seen[len(seen)-1].resourceVersion != md.ResourceVersion {
				waiting = append(waiting, fmt.Sprintf("%s: resourceVersion %s not seen yet", md.Name, md.ResourceVersion))
				continue
			}
			live := seen[len(seen)-1]
			revs, _, err := revhistory.List(context.Background(), sb.Client, cc.Namespace, string(md.UID))
			if err != nil {
				return false, err.Error()
			}
			if !slices.ContainsFunc(revs, func(r revisions.Revision) bool {
				return r.Snapshot.Hash == live.hash && slices.Contains(numbersOf(r), live.revision)
			}) {
				waiting = append(waiting, fmt.Sprintf("%s: content %s revision %d not recorded yet", md.Name, live.hash, live.revision))
			}
		}
		return len(list.Items) > 0 && len(waiting) == 0, fmt.Sprintf("%d MachineDeployments; %v", len(list.Items), waiting)
	})
	p.stop()
}

// numbersOf returns every revision number r's content was live under.
func numbersOf(r revisions.Revision) []int64 {
	if len(r.Record.History) > 0 {
		return r.Record.History
	}
	return []int64{r.Record.Revision}
}

// checkHistory compares what the API server persisted of each
// MachineDeployment with the history the guard recorded for it:
//   - every persisted version was stamped with a revision number, and
//     numbers rise with each new content;
//   - every persisted content is recorded, once, under the number it was
//     stamped with, and no number names two contents;
//   - the numbers history holds are exactly 1 to the live revision's: one
//     per change of content (1 on create, +1 on each change), so a content
//     persisted while the watch could not see it (a gap) is recorded too;
//   - history holds no content that was never persisted, unless numbered
//     within a gap of the watch;
//   - the first version seen ran from and the last ran to, and history's
//     contents, in number order, never go down a Kubernetes version.
//
// It returns a line per MachineDeployment, for the test's log.
func (p *poolWatch) checkHistory(t *testing.T, from, to string) []string {
	t.Helper()
	p.mu.Lock()
	problems, gaps := slices.Clone(p.problems), p.gaps
	p.mu.Unlock()
	assert.Empty(t, problems, "versions the watch could not read")
	var out []string
	for _, uid := range p.uids() {
		seen := p.versions(uid)
		name := p.names[uid]
		revs, bad, err := revhistory.List(context.Background(), sb.Client, cc.Namespace, string(uid))
		require.NoError(t, err)
		assert.Empty(t, bad, "MachineDeployment %s: damaged RolloutRevisions", name)
		described := framework.DescribeHistory(revs)

		recorded := map[string][]int64{}
		owner := map[int64]string{}
		for _, r := range revs {
			_, dup := recorded[r.Snapshot.Hash]
			assert.False(t, dup, "MachineDeployment %s: content %s recorded in two RolloutRevisions\n%s", name, r.Snapshot.Hash, described)
			recorded[r.Snapshot.Hash] = numbersOf(r)
			for _, n := range numbersOf(r) {
				if other, taken := owner[n]; taken && other != r.Snapshot.Hash {
					t.Errorf("MachineDeployment %s: revision %d names both %s and %s\n%s", name, n, other, r.Snapshot.Hash, described)
				}
				owner[n] = r.Snapshot.Hash
			}
		}

		contents := map[string]bool{}
		var lastNumber int64
		lastHash := ""
		for _, v := range seen {
			contents[v.hash] = true
			if !assert.Positive(t, v.revision, "MachineDeployment %s at resourceVersion %s carries no revision number", name, v.resourceVersion) {
				continue
			}
			if nums, ok := recorded[v.hash]; assert.True(t, ok, "MachineDeployment %s: persisted content %s (%s, resourceVersion %s, revision %d) is not in history\n%s", name, v.hash, v.version, v.resourceVersion, v.revision, described) {
				assert.Contains(t, nums, v.revision, "MachineDeployment %s: content %s was stamped revision %d, history records it as %v", name, v.hash, v.revision, nums)
			}
			if v.hash != lastHash {
				assert.Greater(t, v.revision, lastNumber, "MachineDeployment %s: revision numbers go up with each new content (resourceVersion %s)", name, v.resourceVersion)
				lastNumber, lastHash = v.revision, v.hash
			}
		}
		if !assert.NotEmpty(t, seen, "MachineDeployment %s: no version seen", name) {
			continue
		}
		live := seen[len(seen)-1]
		assert.Equal(t, from, seen[0].version, "MachineDeployment %s: the first version seen", name)
		assert.Equal(t, to, live.version, "MachineDeployment %s: the live version", name)

		var numbers []int64
		for n := range owner {
			numbers = append(numbers, n)
		}
		slices.Sort(numbers)
		var want []int64
		for n := int64(1); n <= live.revision; n++ {
			want = append(want, n)
		}
		assert.Equal(t, want, numbers, "MachineDeployment %s: history numbers every content from 1 to the live revision %d, each once\n%s", name, live.revision, described)

		for _, r := range revs {
			if contents[r.Snapshot.Hash] {
				continue
			}
			for _, n := range numbersOf(r) {
				inGap := false
				for i := 1; i < len(seen); i++ {
					if seen[i].afterGap && seen[i-1].revision < n && n < seen[i].revision {
						inGap = true
					}
				}
				assert.True(t, inGap, "MachineDeployment %s: history holds content %s (revision %d) that was never seen persisted, numbered outside every gap of the watch\n%s", name, r.Snapshot.Hash, n, described)
			}
		}

		// In number order, no recorded content is older than the one before.
		byNumber := slices.Clone(revs)
		slices.SortFunc(byNumber, func(a, b revisions.Revision) int { return int(a.Record.Revision - b.Record.Revision) })
		var versions []string
		var last *version.Version
		for _, r := range byNumber {
			tmpl := clusterv1.MachineTemplateSpec{}
			if !assert.NoError(t, json.Unmarshal(r.Snapshot.Data, &tmpl), "MachineDeployment %s: revision %d's content", name, r.Record.Revision) {
				continue
			}
			versions = append(versions, tmpl.Spec.Version)
			v, err := version.ParseSemantic(tmpl.Spec.Version)
			if !assert.NoError(t, err, "MachineDeployment %s: revision %d's version", name, r.Record.Revision) {
				continue
			}
			if last != nil {
				assert.False(t, v.LessThan(last), "MachineDeployment %s: revision %d (%s) is older than the one before (%s)", name, r.Record.Revision, v, last)
			}
			last = v
		}
		out = append(out, fmt.Sprintf("MachineDeployment %s: %d persisted versions seen, %d contents, history %v numbered 1–%d, %d watch gaps",
			name, len(seen), len(contents), strings.Join(versions, " → "), live.revision, gaps))
	}
	return out
}
