package rollout

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// TestRetryConflicts: a write is tried again only after a conflict, on the
// object read again, at most maxAttempts times in all; anything else, and
// an error reading again, ends it at once.
func TestRetryConflicts(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machinedeployments"}, "md-0", errors.New("the object has been modified"))
	refused := apierrors.NewForbidden(schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machinedeployments"}, "md-0", errors.New("denied"))
	rereadFailed := errors.New("reading it again failed")
	for _, tc := range []struct {
		name          string
		answers       []error // what each attempt returns, in order
		againErr      error
		wantErr       error
		wantExhausted bool
		wantTries     int
		wantAgain     int
	}{
		{name: "success at once", answers: []error{nil}, wantTries: 1},
		{name: "a conflict, then success", answers: []error{conflict, nil}, wantTries: 2, wantAgain: 1},
		{name: "conflicts until the attempts run out", answers: []error{conflict, conflict, conflict, nil}, wantErr: conflict, wantExhausted: true, wantTries: core.MaxAttempts, wantAgain: core.MaxAttempts - 1},
		{name: "a refusal is not tried again", answers: []error{refused, nil}, wantErr: refused, wantTries: 1},
		{name: "a conflict, then a refusal", answers: []error{conflict, refused}, wantErr: refused, wantTries: 2, wantAgain: 1},
		{name: "reading again fails", answers: []error{conflict, nil}, againErr: rereadFailed, wantErr: rereadFailed, wantTries: 1, wantAgain: 1},
		{name: "reading again decides to stop with a conflict of its own", answers: []error{conflict, nil}, againErr: conflict, wantErr: conflict, wantTries: 1, wantAgain: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries, again := 0, 0
			err, exhausted := core.RetryConflicts(func() error {
				tries++
				return tc.answers[tries-1]
			}, func() error {
				again++
				return tc.againErr
			})
			assert.Equal(t, tc.wantErr, err)
			assert.Equal(t, tc.wantExhausted, exhausted)
			assert.Equal(t, tc.wantTries, tries, "attempts")
			assert.Equal(t, tc.wantAgain, again, "reads again")
		})
	}
}
