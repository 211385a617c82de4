package revisions

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// RollbackPatch returns a JSON merge patch (RFC 7386, content type
// application/merge-patch+json) that makes the revision content of live, a
// *MachineDeployment, *MachinePool, *KubeadmControlPlane, *ClusterClass or
// *Cluster (v1beta2), equal to target's.
//
// The patch sets metadata.resourceVersion to live's resourceVersion, a
// precondition: if the object changed since live was read, the API server
// refuses the patch with a conflict instead of overwriting the concurrent
// change. It touches only the revision fields (spec.template of a
// MachineDeployment or MachinePool; spec.version, spec.machineTemplate and
// spec.kubeadmConfigSpec of a KubeadmControlPlane; the spec of a
// ClusterClass; spec.topology of a Cluster), and of them exactly the
// fields the target revision changes against live: a field of live's
// canonical form that target lacks is set to null, a field that differs is
// set to target's value, and equal fields are left out. What the canonical
// form drops is never taken away: a default written out (a
// KubeadmControlPlane's format: cloud-config, imagePullPolicy:
// IfNotPresent…), an empty object or list, the template's rollout-guard.io/
// annotations. They are not revision content, and Cluster API's webhooks
// refuse some of them taken away (a kubeadmConfigSpec emptied), so every
// rollback the guard admits, the API server admits. Replicas, rollout,
// paused, status and every other part of metadata are left alone.
//
// The patch is not empty when the content already matches (it still holds
// the precondition); callers compare Snapshot hashes first to skip a rollback
// to the current content.
func RollbackPatch(live runtime.Object, target Snapshot) ([]byte, error) {
	var (
		kind    string
		liveRaw []byte
		err     error
	)
	switch o := live.(type) {
	case *clusterv1.MachineDeployment:
		if o == nil {
			return nil, fmt.Errorf("rollback patch: the live MachineDeployment is nil")
		}
		kind = KindMachineDeployment
		liveRaw, err = json.Marshal(&o.Spec.Template)
	case *clusterv1.MachinePool:
		if o == nil {
			return nil, fmt.Errorf("rollback patch: the live MachinePool is nil")
		}
		kind = KindMachinePool
		liveRaw, err = json.Marshal(&o.Spec.Template)
	case *controlplanev1.KubeadmControlPlane:
		if o == nil {
			return nil, fmt.Errorf("rollback patch: the live KubeadmControlPlane is nil")
		}
		kind = KindKubeadmControlPlane
		liveRaw, err = json.Marshal(kcpContentOf(o))
	case *clusterv1.ClusterClass:
		if o == nil {
			return nil, fmt.Errorf("rollback patch: the live ClusterClass is nil")
		}
		kind = KindClusterClass
		liveRaw, err = json.Marshal(&o.Spec)
	case *clusterv1.Cluster:
		if o == nil {
			return nil, fmt.Errorf("rollback patch: the live Cluster is nil")
		}
		kind = KindCluster
		liveRaw, err = json.Marshal(&o.Spec.Topology)
	case *unstructured.Unstructured:
		// A control plane of another provider, read through the contract.
		if o == nil {
			return nil, fmt.Errorf("rollback patch: the live control plane is nil")
		}
		kind = KindContractControlPlane
		var snap Snapshot
		if snap, err = ForContractControlPlane(o); err == nil {
			liveRaw = snap.Data
		}
	default:
		return nil, fmt.Errorf("rollback patch: %T has no revisions; want a *v1beta2 MachineDeployment, MachinePool, KubeadmControlPlane, ClusterClass or Cluster, or a contract control plane as *unstructured.Unstructured", live)
	}
	if err != nil {
		return nil, fmt.Errorf("rollback patch: encode the live %s: %w", kind, err)
	}
	acc, err := meta.Accessor(live)
	if err != nil {
		return nil, fmt.Errorf("rollback patch: %w", err)
	}
	obj := kind + " " + acc.GetNamespace() + "/" + acc.GetName()
	if u, ok := live.(*unstructured.Unstructured); ok {
		obj = u.GetKind() + " " + acc.GetNamespace() + "/" + acc.GetName()
	}
	if target.Kind != kind {
		return nil, fmt.Errorf("rollback patch for %s: the target is a %s revision", obj, target.Kind)
	}
	rv := acc.GetResourceVersion()
	if rv == "" {
		return nil, fmt.Errorf("rollback patch for %s: the live object has no resourceVersion to use as a precondition", obj)
	}
	canon, err := snapshotOf(kind, target.Data)
	if err != nil {
		return nil, fmt.Errorf("rollback patch for %s: target revision %s: %w", obj, target.Hash, err)
	}
	if target.Hash != "" && canon.Hash != target.Hash {
		return nil, fmt.Errorf("rollback patch for %s: target data hashes to %s, not %s", obj, canon.Hash, target.Hash)
	}
	liveMap, err := decodeObject(liveRaw)
	if err != nil {
		return nil, fmt.Errorf("rollback patch for %s: live content: %w", obj, err)
	}
	targetMap, err := decodeObject(canon.Data)
	if err != nil {
		return nil, fmt.Errorf("rollback patch for %s: target content: %w", obj, err)
	}

	content := mergeDiff(shapes[kind].rules, []string{}, liveMap, targetMap)
	patch := map[string]any{"metadata": map[string]any{"resourceVersion": rv}}
	if len(content) > 0 {
		var at any = content
		for i := len(shapes[kind].at) - 1; i >= 0; i-- {
			at = map[string]any{shapes[kind].at[i]: at}
		}
		patch["spec"] = at
	}
	out, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("rollback patch for %s: %w", obj, err)
	}
	return out, nil
}

func decodeObject(raw []byte) (map[string]any, error) {
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	return m, nil
}

// mergeDiff returns the merge patch that turns live into target at path:
// the fields of live's canonical form that target's lacks are set to null,
// those that differ are set to target's value, and what the canonical form
// drops from live (nulls, defaults written out, empty objects and lists, the
// template's rollout-guard.io/ annotations) is never touched.
//
// Why: the canonical form is for comparing, never for writing. Taking away
// a field the live object holds only because the canonical form leaves it
// out changes nothing of the revision, but Cluster API's webhooks see a
// change: a KubeadmControlPlane whose kubeadmConfigSpec is {format:
// cloud-config} would lose its whole kubeadmConfigSpec, which Cluster API
// refuses ("spec.kubeadmConfigSpec: Forbidden: cannot be modified").
func mergeDiff(r *kindRules, path []string, live, target map[string]any) map[string]any {
	out := map[string]any{}
	for k, lv := range live {
		if _, ok := target[k]; ok {
			continue
		}
		cp := appendPath(path, k)
		c, keep := canonicalAt(r, path, k, lv)
		if !keep {
			// Not content: nothing of the revision to take away.
			continue
		}
		if lm, ok := lv.(map[string]any); ok && !reflect.DeepEqual(c, lv) {
			// It holds something the canonical form drops: take away its
			// content field by field and leave that in place.
			if sub := mergeDiff(r, cp, lm, map[string]any{}); len(sub) > 0 {
				out[k] = sub
			}
			continue
		}
		out[k] = nil
	}
	for k, tv := range target {
		lv, ok := live[k]
		if ok {
			lm, lIsMap := lv.(map[string]any)
			tm, tIsMap := tv.(map[string]any)
			if lIsMap && tIsMap {
				if sub := mergeDiff(r, appendPath(path, k), lm, tm); len(sub) > 0 {
					out[k] = sub
				}
				continue
			}
			if c, keep := canonicalAt(r, path, k, lv); keep && reflect.DeepEqual(c, tv) {
				continue
			}
			if ll, lIsList := lv.([]any); lIsList {
				if tl, tIsList := tv.([]any); tIsList {
					out[k] = reuseElements(r, ll, tl)
					continue
				}
			}
		}
		out[k] = tv
	}
	return out
}

// reuseElements returns the list target, a merge patch replaces lists
// whole, with each of its elements that an element of live equals in
// canonical form written as live holds it: what the canonical form dropped
// from an element the rollback does not change (a variable's value {}, an
// empty object) stays.
func reuseElements(r *kindRules, live, target []any) []any {
	out := make([]any, len(target))
	used := make([]bool, len(live))
	for i, tv := range target {
		out[i] = tv
		for j, lv := range live {
			if used[j] {
				continue
			}
			if c, _ := canonicalize(r, nil, lv); reflect.DeepEqual(c, tv) {
				out[i], used[j] = lv, true
				break
			}
		}
	}
	return out
}

// canonicalAt returns the canonical form of v, the value of key k of the
// object at path, and whether the canonical form keeps it at all (false for
// a null, a default written out, an empty object or list, one of the
// template's rollout-guard.io/ annotations): canonicalize, with the checks
// it makes on an object's keys.
func canonicalAt(r *kindRules, path []string, k string, v any) (any, bool) {
	if equalPath(path, r.annotations) && strings.HasPrefix(k, Prefix) {
		return nil, false
	}
	cp := appendPath(path, k)
	if s, ok := v.(string); ok && r.isDefault(cp, s) {
		return nil, false
	}
	return canonicalize(r, cp, v)
}
