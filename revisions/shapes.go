package revisions

import (
	"encoding/json"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// shape is what the package knows of one kind of revision content: where it
// lives in its object, its canonical form, which of its changes replace
// machines, where its references are and how it is summarized. Each kind
// with revisions has one (shapes); nothing else in the package tells the
// kinds apart.
type shape struct {
	// template says the content is a machine template (an object's
	// spec.template).
	template bool
	// controlPlane says the content is a control plane's spec fields,
	// version and machineTemplate at the root of the content.
	controlPlane bool
	// at is where the content sits under the object's spec: ["template"],
	// [] for fields of spec itself, ["topology"].
	at []string
	// rules are the canonical form's rules.
	rules *kindRules
	// rollsOut reports whether a change at a data path replaces machines;
	// has says whether the path starts with p.
	rollsOut func(has func(p ...string) bool) bool
	// refs are the data paths of the content's contract references.
	refs [][]string
	// summary returns the gist of content data.
	summary func(data []byte) (Summary, error)
}

// shapes are the shapes of the kinds with revisions, by Snapshot.Kind.
var shapes = map[string]*shape{
	KindMachineDeployment:    &templateShape,
	KindMachinePool:          &templateShape,
	KindKubeadmControlPlane:  &kubeadmControlPlaneShape,
	KindContractControlPlane: &contractShape,
	KindClusterClass:         &clusterClassShape,
	KindCluster:              &clusterTopologyShape,
}

// knownKinds lists the kinds with revisions, for messages.
const knownKinds = KindMachineDeployment + ", " + KindMachinePool + ", " + KindKubeadmControlPlane + ", " + KindContractControlPlane + ", " + KindClusterClass + " or " + KindCluster

// templateShape is the shape of a worker pool's revision, its spec.template
// (MachineDeployments and MachinePools): a change of the version, the
// bootstrap, the infrastructure or the failure domain replaces machines;
// of metadata and timeouts it does not.
var templateShape = shape{
	template: true,
	at:       []string{"template"},
	rules:    &mdRules,
	rollsOut: func(has func(p ...string) bool) bool {
		return has("spec", "version") || has("spec", "bootstrap") || has("spec", "infrastructureRef") || has("spec", "failureDomain")
	},
	refs: [][]string{{"spec", "infrastructureRef"}, {"spec", "bootstrap", "configRef"}},
	summary: func(data []byte) (Summary, error) {
		var t clusterv1.MachineTemplateSpec
		if err := json.Unmarshal(data, &t); err != nil {
			return Summary{}, err
		}
		sum := Summary{Version: t.Spec.Version, Infrastructure: refString(t.Spec.InfrastructureRef)}
		switch {
		case t.Spec.Bootstrap.ConfigRef.IsDefined():
			sum.Bootstrap = refString(t.Spec.Bootstrap.ConfigRef)
		case t.Spec.Bootstrap.DataSecretName != nil:
			sum.Bootstrap = "secret:" + *t.Spec.Bootstrap.DataSecretName
		}
		return sum, nil
	},
}

// kubeadmControlPlaneShape is the shape of a KubeadmControlPlane's
// revision: spec.version, spec.machineTemplate and spec.kubeadmConfigSpec.
// A change of the version, the infrastructure or the kubeadm configuration
// replaces machines, but of what Cluster API's KubeadmControlPlane
// controller changes in place (DNS, the control-plane endpoint, discovery,
// health-check timeouts).
var kubeadmControlPlaneShape = shape{
	controlPlane: true,
	at:           []string{},
	rules:        &kcpRules,
	rollsOut: func(has func(p ...string) bool) bool {
		switch {
		case has("version"), has("machineTemplate", "spec", "infrastructureRef"):
			return true
		case has("kubeadmConfigSpec", "clusterConfiguration", "dns"),
			has("kubeadmConfigSpec", "clusterConfiguration", "controlPlaneEndpoint"),
			has("kubeadmConfigSpec", "joinConfiguration", "discovery"),
			has("kubeadmConfigSpec", "initConfiguration", "timeouts", "controlPlaneComponentHealthCheckSeconds"),
			has("kubeadmConfigSpec", "joinConfiguration", "timeouts", "controlPlaneComponentHealthCheckSeconds"):
			return false
		case has("kubeadmConfigSpec"):
			return true
		}
		return false
	},
	refs: [][]string{{"machineTemplate", "spec", "infrastructureRef"}},
	summary: func(data []byte) (Summary, error) {
		var c kcpContent
		if err := json.Unmarshal(data, &c); err != nil {
			return Summary{}, err
		}
		return Summary{
			Version:        c.Version,
			Infrastructure: refString(c.MachineTemplate.Spec.InfrastructureRef),
			EtcdImageTag:   c.KubeadmConfigSpec.ClusterConfiguration.Etcd.Local.ImageTag,
		}, nil
	},
}

// contractShape is the shape of the revision of a control plane of another
// provider, read at the fields of Cluster API's control-plane contract:
// spec.version and spec.machineTemplate. The contract has the provider
// propagate machineTemplate.metadata without a rollout; any other change
// of its fields is taken to replace machines.
var contractShape = shape{
	controlPlane: true,
	at:           []string{},
	rules:        &contractRules,
	rollsOut:     func(has func(p ...string) bool) bool { return !has("machineTemplate", "metadata") },
	refs:         [][]string{{"machineTemplate", "spec", "infrastructureRef"}},
	summary: func(data []byte) (Summary, error) {
		var c struct {
			Version         string `json:"version"`
			MachineTemplate struct {
				Spec struct {
					InfrastructureRef clusterv1.ContractVersionedObjectReference `json:"infrastructureRef"`
				} `json:"spec"`
			} `json:"machineTemplate"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			return Summary{}, err
		}
		return Summary{Version: c.Version, Infrastructure: refString(c.MachineTemplate.Spec.InfrastructureRef)}, nil
	},
}

// isTemplateKind reports whether a revision of kind is a machine template
// (spec.template), as MachineDeployments' and MachinePools' are.
func isTemplateKind(kind string) bool {
	sh, ok := shapes[kind]
	return ok && sh.template
}

// isControlPlaneKind reports whether a revision of kind is a control
// plane's spec (version and machineTemplate at the root of the content).
func isControlPlaneKind(kind string) bool {
	sh, ok := shapes[kind]
	return ok && sh.controlPlane
}
