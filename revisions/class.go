package revisions

import (
	"encoding/json"
	"errors"
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// ForClusterClass returns the Snapshot of cc's spec: a ClusterClass's
// revision is all of its spec (templates, workers, variables, patches,
// upgrade, kubernetesVersions), since any of it may change what the
// topology controller writes for every Cluster of the class.
func ForClusterClass(cc *clusterv1.ClusterClass) (Snapshot, error) {
	if cc == nil {
		return Snapshot{}, errors.New("snapshot of ClusterClass: the object is nil")
	}
	raw, err := json.Marshal(&cc.Spec)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of ClusterClass %s/%s: %w", cc.Namespace, cc.Name, err)
	}
	s, err := snapshotOf(KindClusterClass, raw)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of ClusterClass %s/%s: %w", cc.Namespace, cc.Name, err)
	}
	return s, nil
}

// ForClusterTopology returns the Snapshot of c's spec.topology (its class,
// version, control plane and worker topologies, variables): what an
// operator asks of a ClusterClass cluster. A Cluster without a topology
// has the empty content ({}); the rest of its spec (controlPlaneRef,
// infrastructureRef, paused, which Cluster API's controllers write) and its
// status are not part of it.
func ForClusterTopology(c *clusterv1.Cluster) (Snapshot, error) {
	if c == nil {
		return Snapshot{}, errors.New("snapshot of a Cluster's topology: the object is nil")
	}
	raw, err := json.Marshal(&c.Spec.Topology)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of the topology of Cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	s, err := snapshotOf(KindCluster, raw)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of the topology of Cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	return s, nil
}

// classRules are the canonical form's rules of a ClusterClass's and a
// Cluster topology's content: the generic ones only (no defaults dropped,
// no annotations of the project's inside a spec).
var classRules = kindRules{}

// clusterClassShape is the shape of a ClusterClass's revision, its spec. A
// change of the metadata the class gives its control plane or worker
// classes is propagated in place; any other change may have the topology
// controller replace machines of every Cluster of the class (which ones
// shows in their control planes' and worker pools' own revisions).
var clusterClassShape = shape{
	at:    []string{},
	rules: &classRules,
	rollsOut: func(has func(p ...string) bool) bool {
		return !has("controlPlane", "metadata") && !has("workers", "*", "*", "metadata")
	},
	refs: [][]string{{"infrastructure", "templateRef"}, {"controlPlane", "templateRef"}, {"controlPlane", "machineInfrastructure", "templateRef"}},
	summary: func(data []byte) (Summary, error) {
		var spec clusterv1.ClusterClassSpec
		if err := json.Unmarshal(data, &spec); err != nil {
			return Summary{}, err
		}
		sum := Summary{}
		if r := spec.Infrastructure.TemplateRef; r.Name != "" {
			sum.Infrastructure = r.Kind + "/" + r.Name
		}
		if n := len(spec.KubernetesVersions); n > 0 {
			sum.Version = spec.KubernetesVersions[n-1]
		}
		return sum, nil
	},
}

// clusterTopologyShape is the shape of a Cluster's revision, its
// spec.topology. A change of replicas or of the metadata of the control
// plane or a worker pool is carried out in place; any other change (the
// version, the class, a variable, a pool added, removed or moved to
// another class, a rollout.after) may have the topology controller replace
// machines.
var clusterTopologyShape = shape{
	at:    []string{"topology"},
	rules: &classRules,
	rollsOut: func(has func(p ...string) bool) bool {
		switch {
		case has("controlPlane", "replicas"), has("controlPlane", "metadata"),
			has("workers", "*", "*", "replicas"), has("workers", "*", "*", "metadata"):
			return false
		}
		return true
	},
	summary: func(data []byte) (Summary, error) {
		var t clusterv1.Topology
		if err := json.Unmarshal(data, &t); err != nil {
			return Summary{}, err
		}
		sum := Summary{Version: t.Version, Class: t.ClassRef.Name}
		if t.ClassRef.Namespace != "" {
			sum.Class = t.ClassRef.Namespace + "/" + t.ClassRef.Name
		}
		return sum, nil
	},
}
