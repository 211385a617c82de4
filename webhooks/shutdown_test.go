package webhooks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// registered is a webhook.Server that keeps the last handler registered.
type registered struct {
	webhook.Server
	handler http.Handler
}

func (r *registered) Register(_ string, h http.Handler) { r.handler = h }

// TestDrainingServerDetachesRequests: a request whose context the manager
// cancels at shutdown keeps running, with its values, within a bound.
func TestDrainingServerDetachesRequests(t *testing.T) {
	inner := &registered{}
	type key struct{}
	var sawErr error
	var sawValue any
	var deadline time.Time
	DrainingServer{Server: inner}.Register("/x", http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		sawErr, sawValue = r.Context().Err(), r.Context().Value(key{})
		deadline, _ = r.Context().Deadline()
	}))
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "kept"))
	cancel() // shutdown began
	inner.handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/x", nil).WithContext(ctx))
	assert.NoError(t, sawErr, "the request must not see the manager's cancellation")
	assert.Equal(t, "kept", sawValue)
	assert.WithinDuration(t, time.Now().Add(maxAdmissionTime), deadline, 5*time.Second)
}

// TestNotDraining fails readiness once draining is set.
func TestNotDraining(t *testing.T) {
	var draining atomic.Bool
	check := NotDraining(&draining)
	assert.NoError(t, check(nil))
	draining.Store(true)
	assert.EqualError(t, check(nil), "shutting down")
}
