package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	infrav1 "sigs.k8s.io/cluster-api/test/infrastructure/docker/api/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rollout-guard/rollout-guard/test/builder"
)

const (
	// DefaultClassName is the ClusterClass of the ClusterClass-based demo
	// cluster; it lists ClassKubernetesVersions.
	DefaultClassName = "demo-class"
	// PlainClassName is a ClusterClass like DefaultClassName but without
	// kubernetesVersions: Cluster API then upgrades a topology one minor at
	// a time and refuses a jump of two minors (see PlainClass).
	PlainClassName = "demo-class-plain"
	// DefaultClassClusterName is the ClusterClass-based demo cluster.
	DefaultClassClusterName = "demo-cc"
	// DefaultClassKubernetesVersion is the version the ClusterClass-based
	// demo cluster starts at: one of ClassKubernetesVersions, with newer
	// minors to upgrade to and an older one to be refused.
	DefaultClassKubernetesVersion = "v1.33.5"
	// DefaultClassControlPlaneMachines is the default size of the
	// ClusterClass-based demo cluster's control plane.
	DefaultClassControlPlaneMachines = 1
	// DefaultClassWorkerMachines is the default size of its worker pool.
	DefaultClassWorkerMachines = 1
	// WorkerClass is the class's only MachineDeployment class.
	WorkerClass = "default-worker"
	// WorkerTopologyName is the name of the cluster topology's only
	// MachineDeployment topology, of class WorkerClass.
	WorkerTopologyName = "md-0"
	// PortVariable is the class variable that holds the local port of a
	// workload cluster's fake API server and etcd members; a class patch
	// writes it into the DevCluster's controlPlaneEndpoint (see
	// ClassObjects).
	PortVariable = "controlPlanePort"
	// WorkerImageVariable is the class variable that names the image of a
	// cluster's worker machines, as a real class's image variable does. The
	// in-memory backend runs no image, so a class patch writes the value
	// into the machine metadata of the worker DevMachineTemplate
	// (annotation WorkerImageAnnotation). That is a change of the
	// template's spec: the topology controller rotates the template (a
	// copy with a new name) and the MachineDeployment replaces every worker
	// machine, as a new image does on real infrastructure.
	WorkerImageVariable = "workerImage"
	// DefaultWorkerImage is WorkerImageVariable's default: a Cluster that
	// does not set the variable gets it from Cluster API's defaulting.
	DefaultWorkerImage = "sandbox-worker:v1"
	// WorkerImageAnnotation is the annotation of a worker DevMachine (and
	// of its template's machine metadata) that holds WorkerImageVariable.
	WorkerImageAnnotation = "sandbox.rollout-guard.io/worker-image"

	// classReadyTimeout bounds the wait until a new ClusterClass is reconciled.
	classReadyTimeout = 30 * time.Second
)

// ClassKubernetesVersions are the spec.kubernetesVersions of
// DefaultClassName: one version per minor, oldest first. With them Cluster
// API upgrades a topology through every minor in between ("chained
// upgrades") and accepts only these versions.
var ClassKubernetesVersions = []string{"v1.32.4", "v1.33.5", "v1.34.3", "v1.35.2", "v1.36.1"}

// ClassSpec describes a ClusterClass for the in-memory infrastructure,
// shaped like Cluster API's own infrastructure/docker/templates/
// clusterclass-in-memory.yaml (without MachineHealthChecks, which no
// controller of the sandbox runs). Its objects, all in Namespace:
//
//   - ClusterClass Name, with variables PortVariable and
//     WorkerImageVariable and naming templates
//     that name a cluster's KubeadmControlPlane CLUSTER-control-plane, its
//     MachineDeployments CLUSTER-TOPOLOGYNAME and its DevCluster CLUSTER;
//   - DevClusterTemplate Name-cluster;
//   - KubeadmControlPlaneTemplate and DevMachineTemplate Name-control-plane;
//   - KubeadmConfigTemplate and DevMachineTemplate Name-default-worker
//     (MachineDeployment class WorkerClass).
type ClassSpec struct {
	// Name of the ClusterClass; its templates' names start with it.
	Name string
	// Namespace of every object.
	Namespace string
	// KubernetesVersions is the class's spec.kubernetesVersions; empty
	// leaves it unset.
	KubernetesVersions []string
	// MachineStartup is how long each simulated start-up step of a machine
	// of the class takes (VM, node, API server, etcd member).
	MachineStartup time.Duration
	// UpgradePlanExtension is the class's
	// spec.upgrade.external.generateUpgradePlanExtension, a
	// GenerateUpgradePlan handler (HANDLER.EXTENSIONCONFIG) that Cluster
	// API asks for the steps of an upgrade; empty leaves it unset.
	UpgradePlanExtension string
}

// DefaultClass returns the spec of DefaultClassName in namespace, listing
// ClassKubernetesVersions.
func DefaultClass(namespace string) ClassSpec {
	return ClassSpec{
		Name: DefaultClassName, Namespace: namespace,
		KubernetesVersions: slices.Clone(ClassKubernetesVersions), MachineStartup: DefaultMachineStartup,
	}
}

// PlainClass returns the spec of PlainClassName in namespace: the same
// class without kubernetesVersions.
func PlainClass(namespace string) ClassSpec {
	return ClassSpec{Name: PlainClassName, Namespace: namespace, MachineStartup: DefaultMachineStartup}
}

// ClusterTemplateName is the name of the class's DevClusterTemplate.
func (c ClassSpec) ClusterTemplateName() string { return c.Name + "-cluster" }

// ControlPlaneTemplateName is the name of the class's
// KubeadmControlPlaneTemplate and control-plane DevMachineTemplate.
func (c ClassSpec) ControlPlaneTemplateName() string { return c.Name + "-control-plane" }

// WorkerTemplateName is the name of the class's KubeadmConfigTemplate and
// worker DevMachineTemplate.
func (c ClassSpec) WorkerTemplateName() string { return c.Name + "-" + WorkerClass }

// ClassClusterSpec describes a ClusterClass-based demo cluster: a Cluster
// Name whose topology, of Class, asks for ControlPlaneMachines control-plane
// machines and one MachineDeployment topology WorkerTopologyName of
// WorkerMachines machines. The topology controller creates the rest, named
// by the class: DevCluster Name, KubeadmControlPlane Name-control-plane,
// MachineDeployment Name-md-0 (see ControlPlaneName, MachineDeploymentName).
type ClassClusterSpec struct {
	// Name of the Cluster.
	Name string
	// Namespace of the Cluster; the class is in the same namespace.
	Namespace string
	// Class is the cluster's ClusterClass; CreateClassCluster creates it if
	// it does not exist yet.
	Class ClassSpec
	// ControlPlaneMachines is the topology's control-plane replicas.
	ControlPlaneMachines int32
	// WorkerMachines is the replicas of MachineDeployment topology
	// WorkerTopologyName.
	WorkerMachines int32
	// KubernetesVersion is the topology's version.
	KubernetesVersion string
	// Port is the local port of the workload cluster's fake API server and
	// etcd (the PortVariable variable). 0: CreateClassCluster picks a free one.
	Port int32
}

// ControlPlaneName is the name of the KubeadmControlPlane the topology
// controller creates for the cluster (the class's naming template).
func (c ClassClusterSpec) ControlPlaneName() string { return ClassControlPlaneName(c.Name) }

// MachineDeploymentName is the name of the MachineDeployment the topology
// controller creates for MachineDeployment topology WorkerTopologyName.
func (c ClassClusterSpec) MachineDeploymentName() string {
	return ClassMachineDeploymentName(c.Name, WorkerTopologyName)
}

// ClassControlPlaneName is the name of the KubeadmControlPlane of a cluster
// of a class of this package: "{{ .cluster.name }}-control-plane".
func ClassControlPlaneName(cluster string) string { return cluster + "-control-plane" }

// ClassMachineDeploymentName is the name of the MachineDeployment of
// MachineDeployment topology topologyName of a cluster of a class of this
// package: "{{ .cluster.name }}-{{ .machineDeployment.topologyName }}".
func ClassMachineDeploymentName(cluster, topologyName string) string {
	return cluster + "-" + topologyName
}

// ClassClusterName is the name of the i-th (from 0) ClusterClass-based demo
// cluster Start creates: DefaultClassClusterName, then "demo-cc-2",
// "demo-cc-3"…, as the plain demo clusters are "demo", "demo-2"…
func ClassClusterName(i int) string {
	if i == 0 {
		return DefaultClassClusterName
	}
	return fmt.Sprintf("%s-%d", DefaultClassClusterName, i+1)
}

// DefaultClassCluster returns the spec of the ClusterClass-based demo
// cluster DefaultClassClusterName in namespace, on DefaultClass, with the
// default sizes and version, and no port yet.
func DefaultClassCluster(namespace string) ClassClusterSpec {
	return ClassClusterSpec{
		Name: DefaultClassClusterName, Namespace: namespace, Class: DefaultClass(namespace),
		ControlPlaneMachines: DefaultClassControlPlaneMachines, WorkerMachines: DefaultClassWorkerMachines,
		KubernetesVersion: DefaultClassKubernetesVersion,
	}
}

// ClassObjects returns the objects of a ClusterClass (see ClassSpec), in
// the order to create them: the templates, then the class.
func ClassObjects(spec ClassSpec) []client.Object {
	ns := spec.Namespace
	infraVersion := infrav1.GroupVersion.String()
	machineTemplate := func(name string) client.Object {
		return builder.DevMachineTemplate(ns, name).WithInMemoryBackend(spec.MachineStartup).Build()
	}
	worker := builder.MachineDeploymentClass(WorkerClass).
		WithBootstrapTemplate(builder.TemplateRef(bootstrapv1.GroupVersion.String(), "KubeadmConfigTemplate", spec.WorkerTemplateName())).
		WithInfrastructureTemplate(builder.TemplateRef(infraVersion, builder.DevMachineTemplateKind, spec.WorkerTemplateName())).
		WithNamingTemplate("{{ .cluster.name }}-{{ .machineDeployment.topologyName }}").Build()
	class := builder.ClusterClass(ns, spec.Name).
		WithInfrastructureClusterTemplate(builder.TemplateRef(infraVersion, "DevClusterTemplate", spec.ClusterTemplateName()), "{{ .cluster.name }}").
		WithControlPlaneTemplate(
			builder.TemplateRef(controlplanev1.GroupVersion.String(), "KubeadmControlPlaneTemplate", spec.ControlPlaneTemplateName()),
			builder.TemplateRef(infraVersion, builder.DevMachineTemplateKind, spec.ControlPlaneTemplateName()),
			"{{ .cluster.name }}-control-plane").
		WithWorkerMachineDeploymentClasses(worker).
		WithVariables(clusterv1.ClusterClassVariable{
			Name:     PortVariable,
			Required: ptr.To(true),
			Schema: clusterv1.VariableSchema{OpenAPIV3Schema: clusterv1.JSONSchemaProps{
				Description: "Local port of the workload cluster's fake API server and etcd members (in-memory backend).",
				Type:        "integer",
				Minimum:     ptr.To[int64](1),
				Maximum:     ptr.To[int64](65535),
			}},
		}, clusterv1.ClusterClassVariable{
			Name:     WorkerImageVariable,
			Required: ptr.To(false),
			Schema: clusterv1.VariableSchema{OpenAPIV3Schema: clusterv1.JSONSchemaProps{
				Description: "Image of the worker machines; a new value replaces every worker machine (the in-memory backend records it in annotation " + WorkerImageAnnotation + ").",
				Type:        "string",
				// An image reference's characters only, so that the patch's
				// template can quote the value without escaping.
				Pattern:   `^[a-z0-9][a-z0-9._/:@-]*$`,
				MaxLength: ptr.To[int64](255),
				Default:   &apiextensionsv1.JSON{Raw: []byte(`"` + DefaultWorkerImage + `"`)},
			}},
		}).
		// The in-memory backend listens for a workload cluster on the port
		// of its DevCluster's controlPlaneEndpoint, or on the next port of
		// a counter that does not check whether the port is free. A
		// template cannot name a port per cluster: this inline patch writes
		// the cluster's variable into its DevCluster.
		WithPatches(clusterv1.ClusterClassPatch{
			Name: "control-plane-endpoint",
			Definitions: []clusterv1.PatchDefinition{{
				Selector: clusterv1.PatchSelector{
					APIVersion: infraVersion, Kind: "DevClusterTemplate",
					MatchResources: clusterv1.PatchSelectorMatch{InfrastructureCluster: ptr.To(true)},
				},
				JSONPatches: []clusterv1.JSONPatch{{
					Op: "add", Path: "/spec/template/spec/controlPlaneEndpoint",
					ValueFrom: &clusterv1.JSONPatchValue{
						Template: "host: " + workloadHost + "\nport: {{ ." + PortVariable + " }}",
					},
				}},
			}},
		}, clusterv1.ClusterClassPatch{
			Name: "worker-image",
			Definitions: []clusterv1.PatchDefinition{{
				Selector: clusterv1.PatchSelector{
					APIVersion: infraVersion, Kind: builder.DevMachineTemplateKind,
					MatchResources: clusterv1.PatchSelectorMatch{
						MachineDeploymentClass: &clusterv1.PatchSelectorMatchMachineDeploymentClass{Names: []string{WorkerClass}},
					},
				},
				// The worker template has no machine metadata of its own,
				// so the patch sets the whole of it; a JSON patch cannot
				// add a key below a map that does not exist.
				JSONPatches: []clusterv1.JSONPatch{{
					Op: "add", Path: "/spec/template/metadata",
					ValueFrom: &clusterv1.JSONPatchValue{
						Template: "annotations:\n  " + WorkerImageAnnotation + ": {{ ." + WorkerImageVariable + " | quote }}",
					},
				}},
			}},
		}).
		WithKubernetesVersions(spec.KubernetesVersions).Build()
	class.Spec.Upgrade.External.GenerateUpgradePlanExtension = spec.UpgradePlanExtension
	return []client.Object{
		builder.DevClusterTemplate(ns, spec.ClusterTemplateName()).WithTemplateAnnotations(inMemoryAnnotations()).Build(),
		builder.KubeadmControlPlaneTemplate(ns, spec.ControlPlaneTemplateName()).WithKubeadmConfigSpec(controlPlaneConfig()).Build(),
		machineTemplate(spec.ControlPlaneTemplateName()),
		builder.KubeadmConfigTemplate(ns, spec.WorkerTemplateName()).WithKubeadmConfigSpec(workerConfig()).Build(),
		machineTemplate(spec.WorkerTemplateName()),
		class,
	}
}

// ClassClusterObjects returns the objects to create for a ClusterClass-based
// demo cluster (see ClassClusterSpec): its Cluster only; the topology
// controller creates the rest.
func ClassClusterObjects(spec ClassClusterSpec) ([]client.Object, error) {
	port, err := json.Marshal(spec.Port)
	if err != nil {
		return nil, fmt.Errorf("encoding the port of cluster %s: %w", spec.Name, err)
	}
	cluster := builder.Cluster(spec.Namespace, spec.Name).
		WithClusterNetwork([]string{podCIDR}, []string{serviceCIDR}, serviceDomain).
		WithTopology(spec.Class.Name, spec.KubernetesVersion).
		WithTopologyControlPlaneReplicas(spec.ControlPlaneMachines).
		WithTopologyMachineDeployments(clusterv1.MachineDeploymentTopology{
			Class: WorkerClass, Name: WorkerTopologyName, Replicas: ptr.To(spec.WorkerMachines),
		}).
		WithTopologyVariables(clusterv1.ClusterVariable{Name: PortVariable, Value: apiextensionsv1.JSON{Raw: port}}).
		Build()
	return []client.Object{cluster}, nil
}

// CreateClass creates the objects of a ClusterClass (see ClassSpec) unless
// the class exists already, and waits until Cluster API has reconciled it:
// its Cluster webhook validates a Cluster's topology against the class
// only once the class's variables are reconciled.
func (s *Sandbox) CreateClass(ctx context.Context, spec ClassSpec) error {
	existing := &clusterv1.ClusterClass{}
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: spec.Namespace, Name: spec.Name}, existing)
	switch {
	case err == nil:
	case apierrors.IsNotFound(err):
		for _, obj := range ClassObjects(spec) {
			if err := s.Client.Create(ctx, obj); err != nil {
				return fmt.Errorf("creating ClusterClass %s: %T %s: %w", spec.Name, obj, obj.GetName(), err)
			}
		}
	default:
		return fmt.Errorf("reading ClusterClass %s/%s: %w", spec.Namespace, spec.Name, err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, classReadyTimeout)
	defer cancel()
	return s.WaitClassReconciled(waitCtx, spec.Namespace, spec.Name)
}

// ClassReconciled reports whether Cluster API's ClusterClass controller has
// reconciled the class's latest generation and its variables, as its
// Cluster webhook requires before it validates a Cluster against it.
func ClassReconciled(class *clusterv1.ClusterClass) bool {
	return class.Status.ObservedGeneration == class.Generation &&
		conditions.IsTrue(class, clusterv1.ClusterClassVariablesReadyCondition)
}

// WaitClassReconciled waits until the ClusterClass namespace/name is
// reconciled (see ClassReconciled).
func (s *Sandbox) WaitClassReconciled(ctx context.Context, namespace, name string) error {
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	class := &clusterv1.ClusterClass{}
	for {
		err := s.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, class)
		if err == nil && ClassReconciled(class) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for ClusterClass %s/%s to be reconciled: %w (last error: %v, conditions: %v)",
				namespace, name, ctx.Err(), err, class.Status.Conditions)
		case <-ticker.C:
		}
	}
}

// CreateClassCluster creates the class of a ClusterClass-based demo cluster
// if needed (see CreateClass), then its Cluster, and records it in
// s.ClassClusters; it does not wait for its machines (see
// WaitClusterReady). Unset fields default as DefaultClassCluster's, the
// class's namespace to the cluster's.
func (s *Sandbox) CreateClassCluster(ctx context.Context, spec ClassClusterSpec) (ClassClusterSpec, error) {
	spec = spec.withDefaults()
	if spec.Port == 0 {
		port, err := freeWorkloadPort()
		if err != nil {
			return spec, fmt.Errorf("creating cluster %s: %w", spec.Name, err)
		}
		spec.Port = port
	}
	if err := s.CreateClass(ctx, spec.Class); err != nil {
		return spec, fmt.Errorf("creating cluster %s: %w", spec.Name, err)
	}
	objs, err := ClassClusterObjects(spec)
	if err != nil {
		return spec, err
	}
	for _, obj := range objs {
		if err := s.Client.Create(ctx, obj); err != nil {
			return spec, fmt.Errorf("creating cluster %s: %T %s: %w", spec.Name, obj, obj.GetName(), err)
		}
	}
	s.ClassClusters = append(s.ClassClusters, spec)
	return spec, nil
}

// CreatePlainClassCluster creates a Cluster name at version on PlainClass
// (a class without kubernetesVersions, created if needed), with one
// control-plane and one worker machine, for the case where Cluster API
// upgrades a topology one minor at a time. It does not wait for its
// machines.
func (s *Sandbox) CreatePlainClassCluster(ctx context.Context, namespace, name, version string) (ClassClusterSpec, error) {
	return s.CreateClassCluster(ctx, ClassClusterSpec{
		Name: name, Namespace: namespace, Class: PlainClass(namespace), KubernetesVersion: version,
	})
}

// withDefaults returns spec with every unset field defaulted.
func (spec ClassClusterSpec) withDefaults() ClassClusterSpec {
	def := DefaultClassCluster(spec.Namespace)
	if spec.Name == "" {
		spec.Name = def.Name
	}
	if spec.Namespace == "" {
		spec.Namespace = DefaultNamespace
	}
	if spec.Class.Name == "" {
		spec.Class = DefaultClass(spec.Namespace)
	}
	if spec.Class.Namespace == "" {
		spec.Class.Namespace = spec.Namespace
	}
	if spec.Class.MachineStartup == 0 {
		spec.Class.MachineStartup = DefaultMachineStartup
	}
	if spec.ControlPlaneMachines == 0 {
		spec.ControlPlaneMachines = def.ControlPlaneMachines
	}
	if spec.WorkerMachines == 0 {
		spec.WorkerMachines = def.WorkerMachines
	}
	if spec.KubernetesVersion == "" {
		spec.KubernetesVersion = def.KubernetesVersion
	}
	return spec
}
