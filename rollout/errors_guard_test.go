package rollout

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestExplainGuardUnavailable: when the API server could not call one of
// the guard's webhooks, the CLI says the guard is unavailable, that nothing
// changed and how to check, keeping the API server's message; other
// webhooks' failures and the guard's refusals are passed on as they are.
func TestExplainGuardUnavailable(t *testing.T) {
	c := call{verb: "patch", gr: schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machinedeployments"}, kind: "MachineDeployment",
		namespace: "ns", name: "md", purpose: "restart MachineDeployment ns/md"}
	const refused = `Internal error occurred: failed calling webhook "stamp.machinedeployment.rollout-guard.io": failed to call webhook: Post "https://rollout-guard-webhook.rollout-guard-system.svc:443/mutate": dial tcp 10.0.0.1:443: connect: connection refused`
	for _, tc := range []struct {
		name  string
		err   string
		wants []string
		same  bool // passed on as the API server wrote it
		guard bool // an answer about the guard (a guardError)
	}{
		{name: "guard down", err: refused, guard: true, wants: []string{
			`cannot restart MachineDeployment ns/md: rollout-guard is unavailable: the API server could not call its admission webhook "stamp.machinedeployment.rollout-guard.io"`,
			"nothing was changed", "kubectl -n rollout-guard-system get pods", refused,
		}},
		{name: "another webhook down", err: `Internal error occurred: failed calling webhook "default.machinedeployment.cluster.x-k8s.io": failed to call webhook: connection refused`, same: true},
		{name: "guard refusal", err: `admission webhook "validate.machinedeployment.rollout-guard.io" denied the request: [rule X]`, same: true, guard: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.explain(errors.New(tc.err))
			var ge guardError
			if errors.As(got, &ge) != tc.guard {
				t.Fatalf("explain(%q) = %T; an answer about the guard: %v", tc.err, got, tc.guard)
			}
			if tc.same && !strings.HasSuffix(got.Error(), tc.err) {
				t.Errorf("explain(%q) = %q, want the API server's message kept", tc.err, got.Error())
			}
			if tc.same && strings.Contains(got.Error(), "rollout-guard is unavailable") {
				t.Errorf("explain(%q) = %q, says the guard is unavailable", tc.err, got.Error())
			}
			for _, want := range tc.wants {
				if !strings.Contains(got.Error(), want) {
					t.Errorf("explain(%q) = %q, want it to contain %q", tc.err, got.Error(), want)
				}
			}
		})
	}
}

// TestIsTransient: status watches again after failures the API server
// recovers from by itself, and gives up on the others.
func TestIsTransient(t *testing.T) {
	gr := schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machinedeployments"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", &url.Error{Op: "Get", URL: "https://127.0.0.1:6443", Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, true},
		{"service unavailable", apierrors.NewServiceUnavailable("apiserver is shutting down"), true},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), true},
		{"timeout", apierrors.NewTimeoutError("request did not complete", 1), true},
		{"not found", apierrors.NewNotFound(gr, "md"), false},
		{"forbidden", apierrors.NewForbidden(gr, "md", errors.New("no")), false},
		{"other", errors.New("decoding failed"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isTransient(tc.err); got != tc.want {
				t.Errorf("isTransient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestWaitTransientNotesAnOutageOnce: status retries a lost API server
// every second; the note on stderr is printed once per distinct failure,
// not once per retry.
func TestWaitTransientNotesAnOutageOnce(t *testing.T) {
	defer func(d time.Duration) { transientRetryInterval = d }(transientRetryInterval)
	transientRetryInterval = time.Millisecond
	var stderr strings.Builder
	o := &StatusOptions{c: &cli{Options: Options{IOStreams: genericiooptions.IOStreams{ErrOut: &stderr}}}}
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443", Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	unavailable := apierrors.NewServiceUnavailable("apiserver is shutting down")
	for _, err := range []error{refused, refused, refused, unavailable, unavailable} {
		if !o.waitTransient(context.Background(), err) {
			t.Fatalf("waitTransient(%v) = false, want true", err)
		}
	}
	if got := strings.Count(stderr.String(), "lost the API server"); got != 2 {
		t.Errorf("printed %d notes for two distinct failures, want 2:\n%s", got, stderr.String())
	}
	if o.waitTransient(context.Background(), apierrors.NewNotFound(schema.GroupResource{Resource: "machinedeployments"}, "md")) {
		t.Error("waitTransient(NotFound) = true, want false: not a failure the API server recovers from")
	}
}
