package webhooks

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// maxAdmissionTime bounds one admission request once it no longer follows
// the manager's context: the longest an API server waits for a webhook.
const maxAdmissionTime = 30 * time.Second

// DrainingServer is the webhook server with request contexts detached from
// the manager's. controller-runtime's server derives every request's
// context from the manager's, so when shutdown begins the requests in
// flight lose their API calls ("context canceled") and are answered with an
// error — the API server then refuses an edit that would have passed —
// while the server itself waits for them to finish. Detached, they finish
// while the server drains.
type DrainingServer struct {
	webhook.Server
}

// Register registers hook at path, serving each request with a context
// that keeps the request's values but not its cancellation, bounded by
// maxAdmissionTime.
func (s DrainingServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), maxAdmissionTime)
		defer cancel()
		hook.ServeHTTP(w, r.WithContext(ctx))
	}))
}

// NotDraining is a readiness check that fails once draining is set (at the
// first SIGTERM), so the Service stops sending new connections while the
// requests in flight finish.
func NotDraining(draining *atomic.Bool) healthz.Checker {
	return func(*http.Request) error {
		if draining.Load() {
			return errors.New("shutting down")
		}
		return nil
	}
}
