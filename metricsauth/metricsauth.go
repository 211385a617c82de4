// Package metricsauth lets only authorized callers read the guard's
// metrics: it authenticates the caller's bearer token with a TokenReview
// and authorizes the request with a SubjectAccessReview (verb get on the
// non-resource URL /metrics), both answered by the API server, as kubelet
// and kube-rbac-proxy do.
//
// controller-runtime's own filter (pkg/metrics/filters) does the same
// through k8s.io/apiserver's delegating authenticator and authorizer; that
// library brings CEL, gRPC and OpenTelemetry with it, code that the guard
// would map and keep resident for two API calls (test/bench/history.md,
// Scale). The answers are the same: 401 without a
// valid token, 403 when the caller may not get the path, 500 when the API
// server cannot be asked. As there, an answer is kept for the whole review
// asked (extra included), and a review the API server could not answer for
// a moment is asked again with backoff.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long answers are reused, as controller-runtime's filter does: a
// scraper asks every few seconds, and each answer costs the API server a
// review. A refusal is kept shorter than an admission so that a new
// RoleBinding takes effect soon.
const (
	authenticatedTTL   = time.Minute
	unauthenticatedTTL = 10 * time.Second
	allowedTTL         = 5 * time.Minute
	deniedTTL          = 30 * time.Second
	cacheSize          = 1024
	reviewTimeout      = 10 * time.Second
)

// reviewBackoff spaces the retries of a review the API server could not
// answer for a moment (a restart, a 429, a lost connection), with the
// values k8s.io/apiserver's delegating authenticator and authorizer use
// for theirs (DefaultAuthWebhookRetryBackoff): 5 tries over about 4 s,
// within the request's reviewTimeout.
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// transient tells a failure worth asking again (the API server restarting,
// overloaded, or the connection lost) from an answer that will not change
// (e.g. the guard may not create reviews).
func transient(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// Reviewer asks the API server who a token belongs to and what they may do.
type Reviewer struct {
	tokens  authenticationclient.TokenReviewInterface
	access  authorizationclient.SubjectAccessReviewInterface
	users   *cache.LRUExpireCache
	answers *cache.LRUExpireCache
}

// NewFilter is a metricsserver.Options FilterProvider: it returns a filter
// that serves only authorized callers.
func NewFilter(c *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	r, err := NewReviewer(c, httpClient)
	if err != nil {
		return nil, err
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return r.Wrap(log, next), nil
	}, nil
}

// NewReviewer returns a Reviewer asking the API server of c.
func NewReviewer(c *rest.Config, httpClient *http.Client) (*Reviewer, error) {
	authn, err := authenticationclient.NewForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the TokenReview client: %w", err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, fmt.Errorf("building the SubjectAccessReview client: %w", err)
	}
	return newReviewer(authn.TokenReviews(), authz.SubjectAccessReviews()), nil
}

func newReviewer(tokens authenticationclient.TokenReviewInterface, access authorizationclient.SubjectAccessReviewInterface) *Reviewer {
	return &Reviewer{
		tokens:  tokens,
		access:  access,
		users:   cache.NewLRUExpireCache(cacheSize),
		answers: cache.NewLRUExpireCache(cacheSize),
	}
}

// Wrap returns next behind authentication and authorization.
func (r *Reviewer) Wrap(log logr.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
		defer cancel()
		token, ok := bearerToken(req)
		if !ok {
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		user, ok, err := r.authenticate(ctx, token)
		if err != nil {
			log.Error(err, "authenticating a metrics request")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(req.Method)
		allowed, err := r.authorize(ctx, user, verb, req.URL.Path)
		if err != nil {
			log.Error(err, "authorizing a metrics request", "user", user.Username)
			http.Error(w, "Authorization failed", http.StatusInternalServerError)
			return
		}
		if !allowed {
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", user.Username, verb, req.URL.Path), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// bearerToken is the token of an "Authorization: Bearer" header.
func bearerToken(req *http.Request) (string, bool) {
	scheme, token, found := strings.Cut(req.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !found || !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", false
	}
	return token, true
}

// authenticated is a TokenReview's answer.
type authenticated struct {
	user authenticationv1.UserInfo
	ok   bool
}

// authenticate returns the user the token belongs to; ok is false when the
// API server does not know the token.
func (r *Reviewer) authenticate(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	key := sha256.Sum256([]byte(token)) // never keep the token itself
	if v, hit := r.users.Get(key); hit {
		a := v.(authenticated)
		return a.user, a.ok, nil
	}
	var review *authenticationv1.TokenReview
	err := retry.OnError(reviewBackoff, transient, func() (err error) {
		review, err = r.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return authenticationv1.UserInfo{}, false, fmt.Errorf("creating a TokenReview: %w", err)
	}
	a := authenticated{user: review.Status.User, ok: review.Status.Authenticated && review.Status.Error == ""}
	ttl := authenticatedTTL
	if !a.ok {
		ttl = unauthenticatedTTL
	}
	r.users.Add(key, a, ttl)
	return a.user, a.ok, nil
}

// authorize says whether user may do verb on the non-resource path.
func (r *Reviewer) authorize(ctx context.Context, user authenticationv1.UserInfo, verb, path string) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		Extra:                 extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	// The answer is kept for the whole review asked, extra included (an
	// authorizer may decide on it, e.g. a scoped token's), never for a
	// part of it.
	raw, err := json.Marshal(spec) // map keys sorted: one key per review
	if err != nil {
		return false, fmt.Errorf("encoding a SubjectAccessReview: %w", err)
	}
	key := sha256.Sum256(raw)
	if v, hit := r.answers.Get(key); hit {
		return v.(bool), nil
	}
	var review *authorizationv1.SubjectAccessReview
	err = retry.OnError(reviewBackoff, transient, func() (err error) {
		review, err = r.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("creating a SubjectAccessReview: %w", err)
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	ttl := allowedTTL
	if !allowed {
		ttl = deniedTTL
	}
	r.answers.Add(key, allowed, ttl)
	return allowed, nil
}
