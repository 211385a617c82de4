// Package builder builds the Cluster API objects of the tests, of the
// benchmark harnesses under cmd/ and of the sandbox, in the manner of
// Cluster API's util/test/builder: one fluent builder per kind, started
// from a namespace and a name, each With… method setting one thing, Build
// returning a new object.
//
//	md := builder.MachineDeployment(ns, "c1-md-0").
//		WithClusterName("c1").WithReplicas(3).WithVersion("v1.35.2").
//		WithSelector(map[string]string{"pool": "md-0"}).
//		WithBootstrapTemplate("c1-md-0").WithInfrastructureTemplate("c1-md-0").
//		Build()
//
// A builder sets nothing it is not asked to: what a test leaves out stays
// out of the object, as Cluster API's defaulting would find it. The kinds:
// Cluster, KubeadmControlPlane, MachineDeployment, MachineSet, MachinePool,
// Machine, ClusterClass (with MachineDeploymentClass), and the templates
// and infrastructure objects the tests use: KubeadmConfigTemplate,
// KubeadmControlPlaneTemplate, and Cluster API's development provider's
// DevCluster, DevClusterTemplate, DevMachineTemplate and DevMachinePool
// (typed, or as Unstructured for a client whose scheme lacks them).
//
// Nothing here talks to an API server: the test environment's world
// (framework.World) and the sandbox's demo clusters create what these
// builders return.
package builder
