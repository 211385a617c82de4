package skew

import "testing"

// classPlan is the plan Cluster API computes from a ClusterClass whose
// spec.kubernetesVersions lists steps.
func classPlan(steps ...string) *UpgradePlan {
	return &UpgradePlan{Source: "ClusterClass demo-class spec.kubernetesVersions", Steps: ReadVersions(steps)}
}

func TestChainedTopologyUpgrade(t *testing.T) {
	extension := &UpgradePlan{Source: "upgrade-plan extension plan.demo", Extension: "plan.demo"}
	runCP(t, []cpCase{
		// Refused without a plan, with the way to do it in one edit.
		{name: "three minors, no plan", cluster: true, old: "v1.33.5", new: "v1.36.1", want: []RuleID{skip}, expect: expect{
			field: "spec.topology.version", value: str("v1.36.1"),
			messages: []string{"Cluster demo: upgrade from v1.33.5 to v1.36.1 skips v1.34 through v1.35; kubeadm upgrades one minor at a time [rule ControlPlaneMinorSkip]; set spec.topology.version to a v1.34.x release first and wait until every control-plane machine runs it, then upgrade to v1.36; or list a release of every minor from v1.34 to v1.36 in the ClusterClass's spec.kubernetesVersions, and Cluster API walks the control plane through them in one edit"},
		}},
		// A plan of one step per minor: allowed, the steps named.
		{name: "three minors through the class's versions", cluster: true, old: "v1.33.5", new: "v1.36.1",
			plan:   classPlan("v1.34.3", "v1.35.2", "v1.36.1"),
			expect: expect{warnings: []string{"Cluster demo: Cluster API upgrades the control plane from v1.33.5 through v1.34.3, v1.35.2, v1.36.1 (steps from ClusterClass demo-class spec.kubernetesVersions)"}}},
		{name: "two minors through the class's versions", cluster: true, old: "v1.34.3", new: "v1.36.1",
			plan: classPlan("v1.35.2", "v1.36.1"), expect: expect{warnings: []string{"through v1.35.2, v1.36.1"}}},
		{name: "one minor with a plan: no step to name", cluster: true, old: "v1.35.2", new: "v1.36.1",
			plan: classPlan("v1.36.1"), expect: expect{noWarn: true}},
		// Its safe neighbours refused: a plan with a hole, a plan that stops short.
		{name: "the class lacks a minor", cluster: true, old: "v1.33.5", new: "v1.36.1",
			plan: classPlan("v1.34.3", "v1.36.1"), want: []RuleID{skip}, expect: expect{
				messages: []string{"Cluster demo: the upgrade to v1.36.1 steps from v1.34.3 to v1.36.1, skipping v1.35 (steps from ClusterClass demo-class spec.kubernetesVersions); kubeadm upgrades one minor at a time [rule ControlPlaneMinorSkip]; add a release of every skipped minor to ClusterClass demo-class spec.kubernetesVersions, or set spec.topology.version to a v1.35.x release first"},
			}},
		{name: "a plan that stops short of the target", cluster: true, old: "v1.33.5", new: "v1.36.1",
			plan: classPlan("v1.34.3"), want: []RuleID{skip}, expect: expect{messages: []string{"steps from v1.34.3 to v1.36.1, skipping v1.35"}}},
		{name: "the first step leaves a machine behind", cluster: true, old: "v1.34.3", new: "v1.36.1", running: []string{"v1.33.5", "v1.34.3"},
			plan: classPlan("v1.35.2", "v1.36.1"), want: []RuleID{skip}, expect: expect{
				messages: []string{"steps from v1.33.5 (still run by a control-plane machine) to v1.35.2, skipping v1.34"},
			}},
		// An extension decides its steps later: only the target is judged.
		{name: "four minors through an extension", cluster: true, old: "v1.32.4", new: "v1.36.1", plan: extension,
			expect: expect{warnings: []string{"Cluster demo: upgrade from v1.32.4 to v1.36.1 crosses 4 minors; the upgrade-plan extension plan.demo decides the steps, so rollout-guard judges only where it ends"}}},
		{name: "an extension does not make a downgrade safe", cluster: true, old: "v1.35.2", new: "v1.33.5", plan: extension, want: []RuleID{down, etcd}},
		// A plan never excuses a downgrade or an etcd downgrade.
		{name: "a plan up toward the history narrows the gap", cluster: true, old: "v1.33.5", new: "v1.35.2",
			hist: History{HighestKubernetes: ReadVersion("v1.36.1"), HighestKubernetesSource: "revision 4"},
			plan: classPlan("v1.34.3", "v1.35.2"), expect: expect{warnings: []string{"v1.35.2 stays below v1.36.1 (the highest version it has run, per revision 4)"}}},
		{name: "a plan keeping a pinned etcd below what ran", cluster: true, old: "v1.33.5", new: "v1.35.2", oldTag: "3.5.24-0", newTag: "3.5.24-0",
			hist: History{HighestEtcd: ReadEtcdVersion("3.6.5"), HighestEtcdSource: "revision 2"},
			plan: classPlan("v1.34.3", "v1.35.2"), want: []RuleID{etcd}, expect: expect{
				messages: []string{"Cluster demo: etcd downgrade from 3.6.5 (revision 2) to 3.5.24 (imageTag 3.5.24-0)"},
			}},
	})
}

func TestRevertOfAnUnrolledBump(t *testing.T) {
	runCP(t, []cpCase{
		// The bump never rolled out: going back is allowed, and said.
		{name: "minor bump reverted", old: "v1.36.1", new: "v1.35.2", unrolled: true, running: []string{"v1.35.2"},
			hist:   History{HighestKubernetes: ReadVersion("v1.35.2"), HighestKubernetesSource: "revision 3", HighestEtcd: ReadEtcdVersion("3.6.6"), HighestEtcdSource: "revision 3"},
			expect: expect{warnings: []string{"KubeadmControlPlane demo-control-plane: spec.version goes back from v1.36.1 to v1.35.2; allowed as a revert only because no control-plane machine was created with v1.36.1 or runs it"}}},
		{name: "topology bump reverted", cluster: true, old: "v1.36.1", new: "v1.35.2", unrolled: true, running: []string{"v1.35.2"},
			expect: expect{warnings: []string{"Cluster demo: spec.topology.version goes back from v1.36.1"}}},
		{name: "etcd tag bump reverted", old: "v1.35.2", new: "v1.35.2", oldTag: "3.7.0-0", newTag: "", unrolled: true, running: []string{"v1.35.2"},
			hist: History{HighestEtcd: ReadEtcdVersion("3.6.6"), HighestEtcdSource: "revision 3"}},
		// Its unsafe neighbours: what ran still counts.
		{name: "the same revert once a machine ran the bump", old: "v1.36.1", new: "v1.35.2", running: []string{"v1.35.2", "v1.36.1"},
			want: []RuleID{down}, expect: expect{messages: []string{"Kubernetes downgrade from v1.36.1 to v1.35.2"}}},
		{name: "reverting below what the machines run", old: "v1.36.1", new: "v1.34.3", unrolled: true, running: []string{"v1.35.2"},
			want: []RuleID{down}, expect: expect{messages: []string{"Kubernetes downgrade from v1.35.2 (run by a control-plane machine) to v1.34.3"}}},
		{name: "reverting below what the history ran", old: "v1.36.1", new: "v1.34.3", unrolled: true,
			hist: History{HighestKubernetes: ReadVersion("v1.35.2"), HighestKubernetesSource: "revision 3"},
			want: []RuleID{down}, expect: expect{messages: []string{"Kubernetes downgrade from v1.35.2 (the highest version it has run, per revision 3) to v1.34.3"}}},
		{name: "etcd tag reverted below the history", old: "v1.35.2", new: "v1.35.2", oldTag: "3.7.0-0", newTag: "3.5.24-0", unrolled: true,
			hist: History{HighestEtcd: ReadEtcdVersion("3.6.6"), HighestEtcdSource: "revision 3"}, want: []RuleID{etcd},
			expect: expect{messages: []string{"etcd downgrade from 3.6.6 (revision 3) to 3.5.24 (imageTag 3.5.24-0)"}}},
	})
}
