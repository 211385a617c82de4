package rollout

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
)

// guardError is an answer of an admission webhook (the guard's refusal, or
// the guard being unreachable): its message is the API server's, as is.
type guardError struct{ err error }

// Error is the API server's message, as is.
func (e guardError) Error() string { return e.err.Error() }

// Unwrap returns the API server's error.
func (e guardError) Unwrap() error { return e.err }

// isAdmissionAnswer reports whether err comes from an admission webhook.
func isAdmissionAnswer(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "admission webhook") && (strings.Contains(msg, "denied the request") || strings.Contains(msg, "failed calling webhook"))
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

// isGuardUnavailable reports whether err says the API server could not
// reach one of the guard's webhooks.
func isGuardUnavailable(err error) bool {
	_, down := guardUnavailable(err)
	return down
}

// userInForbidden finds the user in the API server's Forbidden message:
// `... is forbidden: User "viewer" cannot patch resource ...`.
var userInForbidden = regexp.MustCompile(`User "([^"]*)" cannot`)

// call describes one API request, for error messages.
type call struct {
	// verb is the RBAC verb: get, list, patch, update.
	verb string
	// gr is the resource, e.g. machinedeployments.cluster.x-k8s.io.
	gr schema.GroupResource
	// kind names the kind in messages, e.g. "MachineDeployment".
	kind string
	// namespace and name of the object ("" name for a list).
	namespace, name string
	// purpose is what the CLI was doing, e.g. "restart MachineDeployment ns/md-0".
	purpose string
}

// explain turns an API error into a message that names the object, the
// field or permission involved and the way out. Admission webhook answers
// (the guard's refusals) are returned as the API server wrote them.
func (c call) explain(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case isGuardUnavailable(err):
		name, _ := guardUnavailable(err)
		return guardError{fmt.Errorf("cannot %s: rollout-guard is unavailable: the API server could not call its admission webhook %q, so it refused the change (failurePolicy Fail) and nothing was changed; check the guard's pods with kubectl -n rollout-guard-system get pods, and retry once one is ready: %w",
			c.purpose, name, err)}
	case isAdmissionAnswer(err):
		return guardError{err}
	case apierrors.IsNotFound(err) && c.name != "":
		return fmt.Errorf("%s %q not found in namespace %q: check the name and the namespace (-n), e.g. with kubectl get %s -n %s",
			c.kind, c.name, c.namespace, c.gr.String(), c.namespace)
	case apierrors.IsForbidden(err):
		who := "you"
		if m := userInForbidden.FindStringSubmatch(err.Error()); m != nil {
			who = fmt.Sprintf("user %q", m[1])
		}
		where := "at cluster scope"
		if c.namespace != "" {
			where = fmt.Sprintf("in namespace %q", c.namespace)
		}
		return fmt.Errorf("cannot %s: %s may not %s %s %s (Forbidden); ask your cluster administrator for a Role granting %q on %q in API group %q: %w",
			c.purpose, who, c.verb, c.gr.String(), where, c.verb, c.gr.Resource, c.gr.Group, apiStatusOf(err))
	case isUnreachable(err):
		return fmt.Errorf("cannot %s: the API server is not reachable (%w); check --kubeconfig, --context or --server", c.purpose, err)
	case meta.IsNoMatchError(err):
		return fmt.Errorf("cannot %s: the API server does not serve %s (are the Cluster API CRDs installed?): %w", c.purpose, c.gr.String(), err)
	}
	return fmt.Errorf("cannot %s: %s %s: %w", c.purpose, c.verb, c.gr.String(), err)
}

// isUnreachable reports whether a request never got an answer from the API
// server (connection refused, DNS, TLS, timeout).
func isUnreachable(err error) bool {
	var uerr *url.Error
	var status apierrors.APIStatus
	return errors.As(err, &uerr) && !errors.As(err, &status)
}

// apiStatusOf returns the API server's own error inside err (without the
// context other packages wrapped around it), or err.
func apiStatusOf(err error) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if e, ok := status.(error); ok {
			return e
		}
	}
	return err
}

// isConflict reports whether err is a failed resourceVersion precondition.
func isConflict(err error) bool {
	var ge guardError
	if errors.As(err, &ge) {
		return false
	}
	return apierrors.IsConflict(err)
}

// isTransient reports whether err is a failure the API server recovers from
// by itself: it was not reachable (restarting, a load balancer switching),
// or it answered that it is unavailable, overloaded or timed out.
func isTransient(err error) bool {
	return isUnreachable(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// statusError is a verdict other than done, with its exit code.
type statusError struct {
	code int
	msg  string
}

// Error is the verdict's message.
func (e statusError) Error() string { return e.msg }

// ExitCode is the verdict's exit code.
func (e statusError) ExitCode() int { return e.code }
