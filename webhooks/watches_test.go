package webhooks

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/policy"
)

// TestWatchesFollowsWatchStreams drives Watches with real HTTP streams: a
// watch is lost from the end of its stream until a new one is answered, and
// lists, failed watches and refused watches change nothing.
func TestWatchesFollowsWatchStreams(t *testing.T) {
	const machines = "/apis/cluster.x-k8s.io/v1beta2/machines"
	end := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("watch") == "":
			_, _ = io.WriteString(w, `{"kind":"List","items":[]}`)
		case r.URL.Path == "/forbidden":
			http.Error(w, "forbidden", http.StatusForbidden)
		default:
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-end:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()

	watches := NewWatches()
	c := &http.Client{Transport: watches.Wrap(http.DefaultTransport)}
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := c.Get(srv.URL + path)
		require.NoError(t, err)
		return resp
	}

	// A list is no watch; a refused watch never opened.
	resp := get(machines)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp = get("/forbidden?watch=true")
	resp.Body.Close()
	assert.Empty(t, watches.Lost(), "lists and refused watches are not watches that ended")

	// An open watch is not lost; its end is.
	resp = get(machines + "?watch=true&resourceVersion=5")
	assert.Empty(t, watches.Lost())
	close(end)
	_, _ = io.Copy(io.Discard, resp.Body)
	lost := watches.Lost()
	require.Len(t, lost, 1, "the end of the only watch of machines")
	assert.Equal(t, machines, lost[0].Path)
	assert.False(t, lost[0].Since.IsZero())
	resp.Body.Close() // a second end of the same watch changes nothing
	require.Len(t, watches.Lost(), 1)

	// A new watch answered with 200 brings it back.
	resp = get(machines + "?watch=1")
	defer resp.Body.Close()
	assert.Empty(t, watches.Lost(), "the watch is back")
}

// errReader fails every read with its own name, so a test sees which reader
// a decision used.
type errReader struct{ name string }

func (e errReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New(e.name)
}

func (e errReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New(e.name)
}

// TestFreshPolicyReadsLiveWhileAWatchIsDown checks which reader judges.
func TestFreshPolicyReadsLiveWhileAWatchIsDown(t *testing.T) {
	watches := NewWatches()
	fresh := FreshPolicy{
		Cached:  policy.Policy{Reader: errReader{"cached read"}, Indexed: true},
		Live:    policy.Policy{Reader: errReader{"live read"}},
		Watches: watches,
	}
	kcp := func(version string) *controlplanev1.KubeadmControlPlane {
		return &controlplanev1.KubeadmControlPlane{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cp", Labels: map[string]string{clusterv1.ClusterNameLabel: "c1"}},
			Spec:       controlplanev1.KubeadmControlPlaneSpec{Version: version},
		}
	}
	tests := []struct {
		name  string
		watch func()
		want  string
	}{
		{"every watch up", func() {}, "cached read"},
		{"a watch ended", func() { watches.opened("/m"); watches.closed("/m") }, "live read"},
		{"the watch is back", func() { watches.opened("/m") }, "cached read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.watch()
			_, _, err := fresh.Decide(context.Background(), kcp("v1.35.2"), kcp("v1.36.0"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
