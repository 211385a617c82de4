package rollout

import (
	"fmt"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// ExitSuperseded: with --revision N, the object is already past revision N
// (a later change replaced it), so revision N will never be the one rolled
// out.
const ExitSuperseded = 5

// revisionWait is where an object stands against --revision N.
type revisionWait struct {
	// live is the object's revision (rollout-guard's stamp).
	live int64
	// waiting reports that revision N is not live yet.
	waiting bool
}

// checkRevision compares the guard's revision stamp on obj with want
// (--revision; 0 means any). The object must carry the stamp. A live
// revision past want is final: revision numbers only grow, so want will
// never be rolled out and waiting would last until --timeout; it is the
// superseded verdict (exit 5), where kubectl answers "desired revision (N)
// is different from the running revision (M)".
func checkRevision(obj client.Object, want int64) (revisionWait, error) {
	if want <= 0 {
		return revisionWait{}, nil
	}
	what := kindOf(obj).Singular() + "/" + obj.GetName()
	raw, ok := obj.GetAnnotations()[revisions.AnnotationRevision]
	if !ok || raw == "" {
		return revisionWait{}, fmt.Errorf("cannot wait for revision %d of %s: it has no annotation %s; the guard stamps every MachineDeployment and KubeadmControlPlane, so check that rollout-guard is installed (rollout history %s), or drop --revision", want, what, revisions.AnnotationRevision, what)
	}
	live, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return revisionWait{}, fmt.Errorf("cannot wait for revision %d of %s: its annotation %s is %q, not a number; drop --revision", want, what, revisions.AnnotationRevision, raw)
	}
	if live > want {
		return revisionWait{live: live}, statusError{code: ExitSuperseded, msg: fmt.Sprintf(
			"%s is at revision %d, past the desired revision %d: a later change superseded it, so revision %d will not be rolled out; see rollout history %s, and wait for --revision %d (or without --revision) instead",
			what, live, want, want, what, live)}
	}
	return revisionWait{live: live, waiting: live < want}, nil
}
