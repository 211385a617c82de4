package history

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
)

// printRevision prints one revision as data: -o yaml|json the revision as
// the object it is a revision of (revisionObject), -o name its
// RolloutRevision.
func (o *HistoryOptions) printRevision(set *core.RevisionSet, r revisions.Revision) error {
	if strings.ToLower(o.PrintFlags.Output) == "name" {
		if r.Name == "" {
			return fmt.Errorf("%s of %s is live and not recorded in a RolloutRevision yet (rollout-guard records it shortly after each change); try again in a moment, or print it with -o yaml",
				core.Label(r), core.Describe(set.Obj, set.Kind))
		}
		_, err := fmt.Fprintf(o.Session.IOStreams.Out, "rolloutrevision.rollout-guard.io/%s\n", r.Name)
		return err
	}
	u, err := revisionObject(set, r)
	if err != nil {
		return err
	}
	p, err := o.PrintFlags.ToPrinter("")
	if err != nil {
		return err
	}
	return p.PrintObj(u, o.Session.IOStreams.Out)
}

// revisionObject is revision r of set's object as that object: kubectl
// prints a revision as the object that holds it (a ReplicaSet, a
// RolloutRevision); a revision here is part of a MachineDeployment or
// KubeadmControlPlane, so it is printed as one: the object's apiVersion,
// kind, name and namespace, the revision's stamps as its annotations (as the
// object carried them while the revision was live, with the numbers it was
// live under and its restarts), and the revision's content at its place in
// the spec (a MachineDeployment's or MachinePool's spec.template; a KubeadmControlPlane's
// spec.version, spec.machineTemplate and spec.kubeadmConfigSpec). It is what
// a manifest in Git holds at those paths.
func revisionObject(set *core.RevisionSet, r revisions.Revision) (*unstructured.Unstructured, error) {
	var content map[string]any
	if err := json.Unmarshal(r.Snapshot.Data, &content); err != nil {
		return nil, fmt.Errorf("reading %s of %s: %w", core.Label(r), core.Describe(set.Obj, set.Kind), err)
	}
	spec := content
	if path := set.Kind.Revision.Path; path != "" {
		spec = map[string]any{path: content}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(set.Kind.GVK)
	u.SetNamespace(set.Obj.GetNamespace())
	u.SetName(set.Obj.GetName())
	// The RolloutRevision codec writes a record's stamps as the object
	// carries them; the content's digest, its run and its Cluster are the
	// record's, never stamps.
	cr := revisions.RolloutRevision(set.Obj, set.Kind.GVK, r.Snapshot, r.Record)
	delete(cr.Annotations, revisions.AnnotationDigest)
	delete(cr.Annotations, revisions.AnnotationRun)
	u.SetAnnotations(cr.Annotations)
	return u, nil
}
