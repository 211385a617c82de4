package core

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	rgv1alpha1 "github.com/rollout-guard/rollout-guard/api/v1alpha1"
)

// GuardError is an answer of an admission webhook (the guard's refusal, or
// the guard being unreachable): its message is the API server's, as is.
type GuardError struct {
	// Err is the API server's error.
	Err error
}

// Error is the API server's message, as is.
func (e GuardError) Error() string { return e.Err.Error() }

// Unwrap returns the API server's error.
func (e GuardError) Unwrap() error { return e.Err }

// ExitCode is ExitRefused when a webhook denied the change, ExitError when
// the API server could not call one.
func (e GuardError) ExitCode() int {
	if strings.Contains(e.Err.Error(), "denied the request") {
		return ExitRefused
	}
	return ExitError
}

// isAdmissionAnswer reports whether err comes from an admission webhook.
func isAdmissionAnswer(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "admission webhook") && (strings.Contains(msg, "denied the request") || strings.Contains(msg, "failed calling webhook"))
}

// AdmissionRefusal is a refusal by the API server's own admission control:
// a ValidatingAdmissionPolicy denied the change.
type AdmissionRefusal struct {
	// Err is the API server's error, with what the CLI was doing.
	Err error
}

// Error is what the CLI was doing and the API server's message.
func (e AdmissionRefusal) Error() string { return e.Err.Error() }

// Unwrap returns the API server's error.
func (e AdmissionRefusal) Unwrap() error { return e.Err }

// ExitCode is ExitRefused.
func (e AdmissionRefusal) ExitCode() int { return ExitRefused }

// isPolicyDenial reports whether err is a ValidatingAdmissionPolicy's
// denial: `ValidatingAdmissionPolicy 'p' with binding 'b' denied request: ...`.
func isPolicyDenial(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "ValidatingAdmissionPolicy") && strings.Contains(msg, "denied request")
}

// failedCallingGuard finds the guard's webhook in the API server's
// message when it could not call it: `failed calling webhook
// "stamp.machinedeployment.rollout-guard.io": failed to call webhook: ...`.
var failedCallingGuard = regexp.MustCompile(`failed calling webhook "([^"]*\.rollout-guard\.io)"`)

// guardUnavailable reports whether err says the API server could not reach
// one of the guard's webhooks, and which.
func guardUnavailable(err error) (string, bool) {
	m := failedCallingGuard.FindStringSubmatch(err.Error())
	if m == nil {
		return "", false
	}
	return m[1], true
}

// IsGuardUnavailable reports whether err says the API server could not
// reach one of the guard's webhooks.
func IsGuardUnavailable(err error) bool {
	_, down := guardUnavailable(err)
	return down
}

// userInForbidden finds the user in the API server's Forbidden message:
// `... is forbidden: User "viewer" cannot patch resource ...`.
var userInForbidden = regexp.MustCompile(`User "([^"]*)" cannot`)

// Call describes one API request, for error messages.
type Call struct {
	// Verb is the RBAC verb: get, list, patch, update.
	Verb string
	// GR is the resource, e.g. machinedeployments.cluster.x-k8s.io.
	GR schema.GroupResource
	// Kind names the kind in messages, e.g. "MachineDeployment".
	Kind string
	// Namespace and name of the object ("" name for a list).
	Namespace, Name string
	// Purpose is what the CLI was doing, e.g. "restart MachineDeployment ns/md-0".
	Purpose string
}

// Explain turns an API error into a message that names the object, the
// field or permission involved and the way out. Admission webhook answers
// (the guard's refusals) are returned as the API server wrote them.
func (c Call) Explain(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case IsGuardUnavailable(err):
		name, _ := guardUnavailable(err)
		return GuardError{fmt.Errorf("cannot %s: rollout-guard is unavailable: the API server could not call its admission webhook %q, so it refused the change (failurePolicy Fail) and nothing was changed; check the guard's pods with kubectl -n rollout-guard-system get pods, and retry once one is ready: %w",
			c.Purpose, name, err)}
	case isAdmissionAnswer(err):
		return GuardError{err}
	case isPolicyDenial(err):
		return AdmissionRefusal{fmt.Errorf("cannot %s: the API server's admission refused it, nothing was changed: %w", c.Purpose, err)}
	case apierrors.IsNotFound(err) && c.Name != "":
		return fmt.Errorf("%s %q not found in namespace %q: check the name and the namespace (-n), e.g. with kubectl get %s -n %s",
			c.Kind, c.Name, c.Namespace, c.GR.String(), c.Namespace)
	case apierrors.IsForbidden(err):
		who := "you"
		if m := userInForbidden.FindStringSubmatch(err.Error()); m != nil {
			who = fmt.Sprintf("user %q", m[1])
		}
		where := "at cluster scope"
		if c.Namespace != "" {
			where = fmt.Sprintf("in namespace %q", c.Namespace)
		}
		return fmt.Errorf("cannot %s: %s may not %s %s %s (Forbidden); ask your cluster administrator for a Role granting %q on %q in API group %q: %w",
			c.Purpose, who, c.Verb, c.GR.String(), where, c.Verb, c.GR.Resource, c.GR.Group, APIStatusOf(err))
	case isUnreachable(err):
		return fmt.Errorf("cannot %s: the API server is not reachable (%w); check --kubeconfig, --context or --server", c.Purpose, err)
	case meta.IsNoMatchError(err) && c.GR == rgv1alpha1.Resource.GroupResource():
		return fmt.Errorf("cannot %s: the API server does not serve %s, where rollout-guard keeps history: install or upgrade rollout-guard with its CRD (config/crd); a release that kept history in ControllerRevisions is upgraded by the guard, which moves it: %w",
			c.Purpose, c.GR.String(), err)
	case meta.IsNoMatchError(err):
		return fmt.Errorf("cannot %s: the API server does not serve %s (are the Cluster API CRDs installed?): %w", c.Purpose, c.GR.String(), err)
	}
	return fmt.Errorf("cannot %s: %s %s: %w", c.Purpose, c.Verb, c.GR.String(), err)
}

// isUnreachable reports whether a request never got an answer from the API
// server (connection refused, DNS, TLS, timeout).
func isUnreachable(err error) bool {
	var uerr *url.Error
	var status apierrors.APIStatus
	return errors.As(err, &uerr) && !errors.As(err, &status)
}

// APIStatusOf returns the API server's own error inside err (without the
// context other packages wrapped around it), or err.
func APIStatusOf(err error) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if e, ok := status.(error); ok {
			return e
		}
	}
	return err
}

// IsConflict reports whether err is a failed resourceVersion precondition.
func IsConflict(err error) bool {
	var ge GuardError
	if errors.As(err, &ge) {
		return false
	}
	return apierrors.IsConflict(err)
}

// IsTransient reports whether err is a failure the API server recovers from
// by itself: it was not reachable (restarting, a load balancer switching),
// or it answered that it is unavailable, overloaded or timed out.
func IsTransient(err error) bool {
	return isUnreachable(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// StatusError is a verdict other than done, with its exit code.
type StatusError struct {
	// Code is the exit code; Msg says why.
	Code int
	Msg  string
	// Verdict marks an answer to what was asked rather than a failure
	// (status not yet rolled out, plan --fail-on-replace): it is printed
	// without "error: ".
	Verdict bool
}

// IsVerdict reports whether the error is printed as a verdict, without
// "error: ".
func (e StatusError) IsVerdict() bool { return e.Verdict }

// IsVerdict reports whether err is a verdict, printed without "error: ".
func IsVerdict(err error) bool {
	var v interface{ IsVerdict() bool }
	return errors.As(err, &v) && v.IsVerdict()
}

// Error is the verdict's message.
func (e StatusError) Error() string { return e.Msg }

// ExitCode is the verdict's exit code.
func (e StatusError) ExitCode() int { return e.Code }
