package core

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/revisions"
)

// TopologyRestart is a restart through a Cluster's topology: the control
// plane and/or worker pools by their topology names.
type TopologyRestart struct {
	// Cluster is the Cluster's name.
	Cluster string
	// ControlPlane restarts spec.topology.controlPlane.
	ControlPlane bool
	// workers are names in spec.topology.workers.machineDeployments; nil
	// with AllWorkers restarts every one.
	workers    []string
	AllWorkers bool
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// RestartThroughCluster sets rollout.after = at in the Cluster's topology
// with one JSON patch that carries the Cluster's resourceVersion as a
// precondition, names each pool it touches (a "test" of its name at its
// index) and the change-cause; on a conflict it reads the Cluster again and
// rebuilds the patch. It returns the patched Cluster and the fields set.
func (c *Session) RestartThroughCluster(ctx context.Context, cl *Clients, namespace string, r TopologyRestart, at time.Time, cause string) (*unstructured.Unstructured, []string, error) {
	purpose := fmt.Sprintf("restart through Cluster %s/%s", namespace, r.Cluster)
	var u *unstructured.Unstructured
	var fields []string
	err, exhausted := RetryConflicts(func() error {
		u = &unstructured.Unstructured{}
		u.SetGroupVersionKind(Cluster.GVK)
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: r.Cluster}, u); err != nil {
			return Call{Verb: "get", GR: Cluster.GroupResource(), Kind: "Cluster", Namespace: namespace, Name: r.Cluster, Purpose: purpose}.Explain(err)
		}
		ops, set, err := TopologyRestartOps(u, r, at.UTC().Format(time.RFC3339), cause)
		if err != nil {
			return fmt.Errorf("cannot %s: %w", purpose, err)
		}
		fields = set
		data, err := json.Marshal(ops)
		if err != nil {
			return fmt.Errorf("cannot %s: encoding the patch: %w", purpose, err)
		}
		return c.Send(ctx, cl, u, types.JSONPatchType, data, DryRunNone, purpose)
	}, func() error {
		c.Notef("conflict: Cluster %s/%s changed while restarting; reading it again", namespace, r.Cluster)
		return nil
	})
	if exhausted {
		return nil, nil, fmt.Errorf("cannot %s: it kept changing (%d conflicts): %w", purpose, MaxAttempts, err)
	}
	if err != nil {
		return nil, nil, err
	}
	return u, fields, nil
}

// TopologyRestartOps builds the JSON patch of a topology restart of u.
func TopologyRestartOps(u *unstructured.Unstructured, r TopologyRestart, after, cause string) ([]jsonPatchOp, []string, error) {
	ops := []jsonPatchOp{{Op: "replace", Path: "/metadata/resourceVersion", Value: u.GetResourceVersion()}}
	if cause != "" {
		if u.GetAnnotations() == nil {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]any{revisions.AnnotationChangeCause: cause}})
		} else {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations/" + pointerEscape(revisions.AnnotationChangeCause), Value: cause})
		}
	}
	topology, ok, _ := unstructured.NestedMap(u.Object, "spec", "topology")
	if !ok {
		return nil, nil, fmt.Errorf("Cluster %s/%s has no spec.topology", u.GetNamespace(), u.GetName())
	}
	var fields []string
	if r.ControlPlane {
		cp, _, _ := unstructured.NestedMap(topology, "controlPlane")
		ops = append(ops, setAfter("/spec/topology/controlPlane", cp, after)...)
		fields = append(fields, "spec.topology.controlPlane.rollout.after")
	}
	mds, _, _ := unstructured.NestedSlice(topology, "workers", "machineDeployments")
	found := map[string]bool{}
	for i, item := range mds {
		md, _ := item.(map[string]any)
		name, _ := md["name"].(string)
		if !r.AllWorkers && !slices.Contains(r.workers, name) {
			continue
		}
		found[name] = true
		base := fmt.Sprintf("/spec/topology/workers/machineDeployments/%d", i)
		ops = append(ops, jsonPatchOp{Op: "test", Path: base + "/name", Value: name})
		ops = append(ops, setAfter(base, md, after)...)
		fields = append(fields, fmt.Sprintf("spec.topology.workers.machineDeployments[name=%s].rollout.after", name))
	}
	for _, w := range r.workers {
		if !found[w] {
			return nil, nil, fmt.Errorf("Cluster %s/%s has no spec.topology.workers.machineDeployments[name=%s]", u.GetNamespace(), u.GetName(), w)
		}
	}
	return ops, fields, nil
}

// setAfter sets rollout.after under the object at path (which may lack
// rollout or be absent itself), keeping its other fields.
func setAfter(path string, obj map[string]any, after string) []jsonPatchOp {
	switch {
	case obj == nil:
		return []jsonPatchOp{{Op: "add", Path: path, Value: map[string]any{"rollout": map[string]any{"after": after}}}}
	case obj["rollout"] == nil:
		return []jsonPatchOp{{Op: "add", Path: path + "/rollout", Value: map[string]any{"after": after}}}
	}
	return []jsonPatchOp{{Op: "add", Path: path + "/rollout/after", Value: after}}
}

// pointerEscape escapes one JSON pointer segment (RFC 6901).
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// TopologyRestartOf is the restart of a topology-managed object through its
// Cluster: spec.topology.controlPlane, or the object's entry in
// spec.topology.workers. what is the verb of its errors ("restart", "plan
// the restart of").
func TopologyRestartOf(obj client.Object, what string) (TopologyRestart, error) {
	kind := KindOf(obj)
	cluster := kind.clusterName(obj)
	if cluster == "" {
		return TopologyRestart{}, fmt.Errorf("cannot %s %s: it is managed by a Cluster topology (label %s) but names no Cluster (label %s)", what, Describe(obj, kind), clusterv1.ClusterTopologyOwnedLabel, clusterv1.ClusterNameLabel)
	}
	r := TopologyRestart{Cluster: cluster}
	if kind.Topology.ControlPlane {
		r.ControlPlane = true
		return r, nil
	}
	name := kind.Topology.name(obj)
	if name == "" {
		return TopologyRestart{}, fmt.Errorf("cannot %s %s: it is managed by the topology of Cluster %s but has no label %s naming its place in spec.topology.workers.%s", what, Describe(obj, kind), cluster, kind.Topology.nameLabel, kind.Topology.workers)
	}
	r.workers = []string{name}
	return r, nil
}

// TopologyOwned reports whether the topology controller manages obj.
func TopologyOwned(obj client.Object) bool {
	_, ok := obj.GetLabels()[clusterv1.ClusterTopologyOwnedLabel]
	return ok
}

// TopologyName is the name of a topology-managed worker pool in its
// Cluster's spec.topology.workers.
func TopologyName(obj client.Object) string { return KindOf(obj).Topology.name(obj) }

// TopologyError refuses a direct edit of a topology-managed object, saying
// what to change instead.
func TopologyError(verb string, obj client.Object, instead string) error {
	kind := KindOf(obj)
	cluster := ClusterNameOf(obj)
	if cluster == "" {
		cluster = "<its Cluster>"
	}
	return fmt.Errorf("cannot %s %s: it is managed by the topology of Cluster %s (label %s), and the topology controller would revert a direct edit; %s",
		verb, Describe(obj, kind), cluster, clusterv1.ClusterTopologyOwnedLabel, strings.ReplaceAll(instead, "CLUSTER", cluster))
}

// TopologyPath names a topology-managed object's place in its Cluster's
// topology, for messages.
func TopologyPath(obj client.Object) string { return KindOf(obj).Topology.path(obj) }

// The parts of a topology upgrade (UpgradeStep.Part).
const (
	// PartControlPlane is the Cluster's control plane.
	PartControlPlane = "controlPlane"
	// PartWorkers are the topology's MachineDeployments and MachinePools.
	PartWorkers = "workers"
)

// MachinesWithLabel returns the machines whose label key is value.
func MachinesWithLabel(machines []clusterv1.Machine, key, value string) []clusterv1.Machine {
	var out []clusterv1.Machine
	for _, m := range machines {
		if m.Labels[key] == value {
			out = append(out, m)
		}
	}
	return out
}

// PartName names a part in messages.
func PartName(part string) string {
	if part == PartControlPlane {
		return "control plane"
	}
	return "workers"
}
