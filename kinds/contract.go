package kinds

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// Contract returns the kind of a control-plane kind of another provider
// (gvk), read as unstructured objects at the fields of Cluster API's
// control-plane contract: its revisions are spec.version and
// spec.machineTemplate, its restarts spec.rollout.after where the provider
// has it. It is decoded and cached whole (but its managed fields): the
// guard knows no more of its shape than the contract says.
func Contract(gvk schema.GroupVersionKind) Kind {
	return Kind{
		GVK: gvk,
		New: func() client.Object {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			return u
		},
		Snapshot: func(o client.Object) (revisions.Snapshot, error) {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				return revisions.Snapshot{}, fmt.Errorf("expected a %s as an unstructured object, got %T", gvk.Kind, o)
			}
			return revisions.ForContractControlPlane(u)
		},
		RolloutAfter: func(o client.Object) string {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				return ""
			}
			after, _, _ := unstructured.NestedString(u.Object, "spec", "rollout", "after")
			return after
		},
		ClusterName:   func(o client.Object) string { return clusterName(o, "") },
		Decide:        decideAs(gvk.Kind, Judge.DecideContractControlPlane),
		ContentCached: true,
	}
}
