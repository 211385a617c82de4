// Package metricsauth lets only authorized callers read the guard's
// metrics: it authenticates the caller's bearer token with a TokenReview
// and authorizes the request with a SubjectAccessReview (verb get on the
// non-resource URL /metrics), both answered by the API server, as kubelet
// and kube-rbac-proxy do.
//
// controller-runtime's own filter (pkg/metrics/filters) does the same
// through k8s.io/apiserver's delegating authenticator and authorizer; that
// library brings CEL, gRPC and OpenTelemetry with it, about 20 MB of code
// that the guard would map and keep resident for two API calls
// (docs/benchmarks.md, Scale). The answers are the same: 401 without a
// valid token, 403 when the caller may not get the path, 500 when the API
// server cannot be asked.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
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
	return &Reviewer{
		tokens:  authn.TokenReviews(),
		access:  authz.SubjectAccessReviews(),
		users:   cache.NewLRUExpireCache(cacheSize),
		answers: cache.NewLRUExpireCache(cacheSize),
	}, nil
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
	review, err := r.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
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
	key := fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s", user.UID, user.Username, strings.Join(user.Groups, ","), verb, path)
	if v, hit := r.answers.Get(key); hit {
		return v.(bool), nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	review, err := r.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		Extra:                 extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
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
