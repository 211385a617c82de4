package metricsauth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// These tests play the API server's answers with client-go's fake
// clientset: what is cached under which key, and which failures are asked
// again. TestMetricsAnswerOnlyAuthorizedCallers (test/install) shows the
// filter against a real API server.

// fastBackoff keeps the retries of these tests short.
func fastBackoff(t *testing.T) {
	t.Helper()
	saved := reviewBackoff
	reviewBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 5}
	t.Cleanup(func() { reviewBackoff = saved })
}

// accessReviews returns a Reviewer whose SubjectAccessReviews are answered
// by answer, and the reviews it was asked.
func accessReviews(answer func(n int, spec authorizationv1.SubjectAccessReviewSpec) (bool, error)) (*Reviewer, *[]authorizationv1.SubjectAccessReviewSpec) {
	cs := fake.NewClientset()
	var asked []authorizationv1.SubjectAccessReviewSpec
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		asked = append(asked, sar.Spec)
		allowed, err := answer(len(asked), sar.Spec)
		if err != nil {
			return true, nil, err
		}
		out := sar.DeepCopy()
		out.Status.Allowed = allowed
		return true, out, nil
	})
	return newReviewer(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews()), &asked
}

func TestAnswersAreKeptPerWholeReview(t *testing.T) {
	alice := authenticationv1.UserInfo{Username: "alice", UID: "1", Groups: []string{"a", "b"}}
	scoped := alice
	scoped.Extra = map[string]authenticationv1.ExtraValue{"scopes": {"metrics-only"}}
	commaGroup := alice
	commaGroup.Groups = []string{"a,b"}
	for _, tc := range []struct {
		name         string
		first, again authenticationv1.UserInfo
		againPath    string
		wantAsked    int
	}{
		{"the same review twice: asked once", alice, alice, "/metrics", 1},
		{"another extra: asked again", alice, scoped, "/metrics", 2},
		{"groups a,b against a and b: asked again", alice, commaGroup, "/metrics", 2},
		{"another path: asked again", alice, alice, "/debug", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Only the first review is allowed: a wrong cache hit would
			// answer the second with the first's yes.
			r, asked := accessReviews(func(n int, _ authorizationv1.SubjectAccessReviewSpec) (bool, error) { return n == 1, nil })
			ok, err := r.authorize(context.Background(), tc.first, "get", "/metrics")
			require.NoError(t, err)
			assert.True(t, ok)
			ok, err = r.authorize(context.Background(), tc.again, "get", tc.againPath)
			require.NoError(t, err)
			assert.Len(t, *asked, tc.wantAsked)
			assert.Equal(t, tc.wantAsked == 1, ok, "the second answer is the first's only when it is the same review")
		})
	}
}

func TestTheWholeUserIsReviewed(t *testing.T) {
	r, asked := accessReviews(func(int, authorizationv1.SubjectAccessReviewSpec) (bool, error) { return true, nil })
	user := authenticationv1.UserInfo{Username: "alice", UID: "1", Groups: []string{"g"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes": {"x", "y"}}}
	_, err := r.authorize(context.Background(), user, "get", "/metrics")
	require.NoError(t, err)
	require.Len(t, *asked, 1)
	assert.Equal(t, authorizationv1.SubjectAccessReviewSpec{
		User: "alice", UID: "1", Groups: []string{"g"},
		Extra:                 map[string]authorizationv1.ExtraValue{"scopes": {"x", "y"}},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}, (*asked)[0])
}

func TestTransientFailuresAreAskedAgain(t *testing.T) {
	fastBackoff(t)
	gr := schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}
	user := authenticationv1.UserInfo{Username: "alice"}
	for _, tc := range []struct {
		name      string
		failures  int
		err       error
		wantAsked int
		wantErr   bool
	}{
		{"two 503s, then an answer", 2, apierrors.NewServiceUnavailable("restarting"), 3, false},
		{"a 429, then an answer", 1, apierrors.NewTooManyRequests("slow down", 1), 2, false},
		{"a lost connection, then an answer", 1, errors.New("read tcp 127.0.0.1:6443: connection reset by peer"), 2, false},
		{"unavailable every time: given up after 5", 99, apierrors.NewServiceUnavailable("down"), 5, true},
		{"forbidden: not asked again", 99, apierrors.NewForbidden(gr, "", errors.New("no RBAC")), 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, asked := accessReviews(func(n int, _ authorizationv1.SubjectAccessReviewSpec) (bool, error) {
				if n <= tc.failures {
					return false, tc.err
				}
				return true, nil
			})
			ok, err := r.authorize(context.Background(), user, "get", "/metrics")
			assert.Len(t, *asked, tc.wantAsked)
			if tc.wantErr {
				require.Error(t, err)
				assert.False(t, ok)
				return
			}
			require.NoError(t, err)
			assert.True(t, ok)
		})
	}
}

func TestTokenReviewsAreAskedAgainWhenTransient(t *testing.T) {
	fastBackoff(t)
	cs := fake.NewClientset()
	asked := 0
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		asked++
		if asked == 1 {
			return true, nil, apierrors.NewInternalError(errors.New("etcd leader changed"))
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "prometheus"}}
		return true, tr, nil
	})
	r := newReviewer(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews())
	user, ok, err := r.authenticate(context.Background(), "token")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "prometheus", user.Username)
	assert.Equal(t, 2, asked)
	_, _, err = r.authenticate(context.Background(), "token")
	require.NoError(t, err)
	assert.Equal(t, 2, asked, "the answer is kept")
}
