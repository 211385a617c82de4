package core

import (
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// MaxAttempts bounds how often a write is re-read, re-checked and re-sent
// after a conflict.
const MaxAttempts = 3

// conflictBackoff paces the attempts of a write that met a conflict: at
// most MaxAttempts in all, about 10 ms apart (client-go's
// retry.DefaultRetry pace).
var conflictBackoff = wait.Backoff{Steps: MaxAttempts, Duration: 10 * time.Millisecond, Factor: 1, Jitter: 0.1}

// stopRetry carries an error of a retry's preparation out of
// retry.RetryOnConflict unretried, whatever it is.
type stopRetry struct{ err error }

// Error is the error of the preparation that stopped the retries.
func (s stopRetry) Error() string { return s.err.Error() }

// RetryConflicts runs try until it returns anything but a conflict, at most
// MaxAttempts times, with client-go's retry.RetryOnConflict. Before each
// attempt after the first it calls again, which reads the object again
// (and says so, or decides that trying again makes no sense: its error
// ends the retries and is returned). It returns the last error, and
// whether the attempts ran out on conflicts.
func RetryConflicts(try func() error, again func() error) (err error, exhausted bool) {
	first := true
	err = retry.RetryOnConflict(conflictBackoff, func() error {
		if !first {
			if err := again(); err != nil {
				return stopRetry{err}
			}
		}
		first = false
		return try()
	})
	if s, ok := err.(stopRetry); ok {
		return s.err, false
	}
	return err, IsConflict(err)
}
