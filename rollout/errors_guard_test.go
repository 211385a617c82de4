package rollout

import (
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/status"
)

// TestExplainGuardUnavailable: when the API server could not call one of
// the guard's webhooks, the CLI says the guard is unavailable, that nothing
// changed and how to check, keeping the API server's message; other
// webhooks' failures and the guard's refusals are passed on as they are.
// A webhook's refusal exits 6, the guard or another webhook down 1.
func TestExplainGuardUnavailable(t *testing.T) {
	c := core.Call{Verb: "patch", GR: schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machinedeployments"}, Kind: "MachineDeployment",
		Namespace: "ns", Name: "md", Purpose: "restart MachineDeployment ns/md"}
	const refused = `Internal error occurred: failed calling webhook "stamp.machinedeployment.rollout-guard.io": failed to call webhook: Post "https://rollout-guard-webhook.rollout-guard-system.svc:443/mutate": dial tcp 10.0.0.1:443: connect: connection refused`
	for _, tc := range []struct {
		name  string
		err   string
		wants []string
		same  bool // passed on as the API server wrote it
		guard bool // an answer about the guard (a guardError)
		code  int  // the exit code
	}{
		{name: "guard down", err: refused, guard: true, code: core.ExitError, wants: []string{
			`cannot restart MachineDeployment ns/md: rollout-guard is unavailable: the API server could not call its admission webhook "stamp.machinedeployment.rollout-guard.io"`,
			"nothing was changed", "kubectl -n rollout-guard-system get pods", refused,
		}},
		{name: "another webhook down", err: `Internal error occurred: failed calling webhook "default.machinedeployment.cluster.x-k8s.io": failed to call webhook: connection refused`, same: true, code: core.ExitError},
		{name: "guard refusal", err: `admission webhook "validate.machinedeployment.rollout-guard.io" denied the request: [rule X]`, same: true, guard: true, code: core.ExitRefused},
		{name: "an admission policy's refusal", err: `machinedeployments.cluster.x-k8s.io "md" is forbidden: ValidatingAdmissionPolicy 'freeze' with binding 'freeze' denied request: restarts are frozen`, same: true, code: core.ExitRefused,
			wants: []string{"cannot restart MachineDeployment ns/md: the API server's admission refused it, nothing was changed: "}},
		{name: "another webhook's refusal", err: `admission webhook "validation.machinedeployment.cluster.x-k8s.io" denied the request: spec.replicas: Invalid value`, same: true, guard: true, code: core.ExitRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.Explain(errors.New(tc.err))
			var ge core.GuardError
			if errors.As(got, &ge) != tc.guard {
				t.Fatalf("explain(%q) = %T; an answer about the guard: %v", tc.err, got, tc.guard)
			}
			if code := core.ExitCode(got); code != tc.code {
				t.Errorf("explain(%q) exits %d, want %d", tc.err, code, tc.code)
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
			if got := core.IsTransient(tc.err); got != tc.want {
				t.Errorf("isTransient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestOutageNotedOnce: status retries a lost API server every second, on
// every source it watches; the note on stderr is printed once per distinct
// failure, not once per retry nor once per source, and anew after every
// source was answered again.
func TestOutageNotedOnce(t *testing.T) {
	refused := func(path string) error {
		return &url.Error{Op: "Get", URL: "https://127.0.0.1:6443" + path, Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	}
	unavailable := apierrors.NewServiceUnavailable("apiserver is shutting down")
	var o status.Outage
	var notes []string
	lose := func(source int, err error) {
		if note, ok := o.Lost(source, err); ok {
			notes = append(notes, note)
		}
	}
	lose(0, refused("/apis/cluster.x-k8s.io/v1beta2/namespaces/demo/machinedeployments"))
	lose(1, refused("/apis/cluster.x-k8s.io/v1beta2/namespaces/demo/machines"))
	lose(0, refused("/apis/cluster.x-k8s.io/v1beta2/namespaces/demo/machinedeployments"))
	lose(0, unavailable)
	lose(1, unavailable)
	if len(notes) != 2 || !strings.HasPrefix(notes[0], "lost the API server (Get \"https://127.0.0.1:6443/apis/cluster.x-k8s.io/v1beta2/namespaces/demo/machinedeployments\": dial: connect: connection refused); watching again") {
		t.Fatalf("notes for two distinct failures of two sources, want 2:\n%s", strings.Join(notes, "\n"))
	}
	o.Recovered(0)
	lose(0, unavailable)
	if len(notes) != 2 {
		t.Errorf("source 1 still fails: the outage goes on, noted already:\n%s", strings.Join(notes, "\n"))
	}
	o.Recovered(0)
	o.Recovered(1)
	lose(1, unavailable)
	if len(notes) != 3 {
		t.Errorf("every source was answered: a new failure is a new outage, noted:\n%s", strings.Join(notes, "\n"))
	}
}

// TestExplainHistoryStoreNotServed: where the API server serves no
// RolloutRevisions (rollout-guard not installed, or a release from before
// them), reading history says what is missing and the way out; another
// kind not served still points at Cluster API's CRDs.
func TestExplainHistoryStoreNotServed(t *testing.T) {
	history := core.Call{Verb: "list", GR: schema.GroupResource{Group: "rollout-guard.io", Resource: "rolloutrevisions"}, Kind: "RolloutRevision",
		Namespace: "ns", Purpose: "show the history of machinedeployment/md"}
	noMatch := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "rollout-guard.io", Kind: "RolloutRevision"}, SearchedVersions: []string{"v1alpha1"}}
	got := history.Explain(noMatch).Error()
	for _, want := range []string{
		"cannot show the history of machinedeployment/md: the API server does not serve rolloutrevisions.rollout-guard.io, where rollout-guard keeps history",
		"install or upgrade rollout-guard with its CRD (config/crd)",
		noMatch.Error(),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("explain = %q, want it to contain %q", got, want)
		}
	}
	templates := core.Call{Verb: "get", GR: schema.GroupResource{Group: "infrastructure.cluster.x-k8s.io", Resource: "devmachinetemplates"}, Kind: "DevMachineTemplate",
		Namespace: "ns", Name: "t", Purpose: "switch the template"}
	other := templates.Explain(&meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "infrastructure.cluster.x-k8s.io", Kind: "DevMachineTemplate"}}).Error()
	if !strings.Contains(other, "are the Cluster API CRDs installed?") || strings.Contains(other, "rollout-guard keeps history") {
		t.Errorf("explain of another kind not served = %q", other)
	}
}
