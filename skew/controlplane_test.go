package skew

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type cpCase struct {
	name           string
	cluster        bool // a Cluster topology change instead of a KubeadmControlPlane
	old, new       string
	oldTag, newTag string
	running        []string
	hist           History
	workers        []Worker
	plan           *UpgradePlan
	unrolled       bool
	want           []RuleID
	expect
}

func (c cpCase) change() ControlPlaneChange {
	ch := ControlPlaneChange{
		Kind: "KubeadmControlPlane", Name: "demo-control-plane",
		VersionField: "spec.version", EtcdField: etcdField,
		OldVersion: ReadVersion(c.old), NewVersion: ReadVersion(c.new),
		OldEtcdImageTag: ReadEtcdVersion(c.oldTag), NewEtcdImageTag: ReadEtcdVersion(c.newTag),
		RunningVersions: ReadVersions(c.running), History: c.hist, Workers: c.workers,
		Plan: c.plan, PreviousUnrolled: c.unrolled,
	}
	if c.cluster {
		ch.Kind, ch.Name = "Cluster", "demo"
		ch.VersionField = "spec.topology.version"
		ch.EtcdField = "KubeadmControlPlane " + etcdField
	}
	return ch
}

func runCP(t *testing.T, cases []cpCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, EvaluateControlPlane(c.change()), c.want, c.expect)
		})
	}
}

func md(name, version string) Worker {
	return Worker{Kind: "MachineDeployment", Name: name, Version: ReadVersion(version)}
}

const (
	down   = RuleControlPlaneDowngrade
	etcd   = RuleEtcdDowngrade
	skip   = RuleControlPlaneMinorSkip
	bad    = RuleInvalidVersion
	newer  = RuleControlPlaneLeavesWorkerNewer
	tooOld = RuleControlPlaneLeavesWorkerTooOld
)

func TestControlPlaneDowngrade(t *testing.T) {
	runCP(t, []cpCase{
		{name: "same version", old: "v1.35.2", new: "v1.35.2", expect: expect{noWarn: true}},
		{name: "patch up", old: "v1.35.2", new: "v1.35.3", expect: expect{noWarn: true}},
		{name: "patch down", old: "v1.35.3", new: "v1.35.1", expect: expect{noWarn: true}},
		{name: "patch down to .0", old: "v1.34.3", new: "v1.34.0", expect: expect{noWarn: true}},
		{name: "one minor down", old: "v1.35.2", new: "v1.34.1", want: []RuleID{down}, expect: expect{
			field: "spec.version", value: str("v1.34.1"),
			messages: []string{"KubeadmControlPlane demo-control-plane: Kubernetes downgrade from v1.35.2 to v1.34.1 is not supported by kubeadm [rule ControlPlaneDowngrade]; keep spec.version at v1.35.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)"},
		}},
		{name: "two minors down", old: "v1.36.1", new: "v1.34.3", want: []RuleID{down}, expect: expect{messages: []string{"from v1.36.1 to v1.34.3", "keep spec.version at v1.36.x or later"}}},
		{name: "down across etcd 3.6 to 3.5", old: "v1.34.3", new: "v1.33.5", want: []RuleID{down, etcd}},
		{name: "down across etcd 3.7 to 3.6", old: "v1.37.2", new: "v1.36.3", want: []RuleID{down, etcd}},
		{name: "down at the oldest minor", old: "v1.25.0", new: "v1.24.17", want: []RuleID{down}},
		{name: "down from 1.26 to 1.25", old: "v1.26.1", new: "v1.25.16", want: []RuleID{down}},
		{name: "release to its own rc", old: "v1.36.0", new: "v1.36.0-rc.1", expect: expect{noWarn: true}},
		{name: "rc to previous minor", old: "v1.36.0-rc.1", new: "v1.35.4", want: []RuleID{down}, expect: expect{messages: []string{"from v1.36.0-rc.1 to v1.35.4"}}},
		{name: "build metadata change", old: "v1.35.2+vmware.1", new: "v1.35.2+vmware.2", expect: expect{noWarn: true}},
		{name: "build metadata down a minor", old: "v1.35.2+vmware.1", new: "v1.34.4+vmware.1", want: []RuleID{down}, expect: expect{messages: []string{"from v1.35.2+vmware.1 to v1.34.4+vmware.1"}}},
		{name: "no v prefix", old: "1.35.2", new: "1.34.1", want: []RuleID{down}, expect: expect{value: str("1.34.1"), messages: []string{"from v1.35.2 to v1.34.1"}}},
		{name: "history higher than old, change lowers", old: "v1.35.0", new: "v1.34.3",
			hist: History{HighestKubernetes: ReadVersion("v1.36.1"), HighestKubernetesSource: "revision 4"}, want: []RuleID{down},
			expect: expect{messages: []string{"Kubernetes downgrade from v1.36.1 (the highest version it has run, per revision 4) to v1.34.3", "keep spec.version at v1.36.x or later"}}},
		{name: "history higher than old, patch change keeps the gap: refused, the control plane ran v1.35", old: "v1.34.3", new: "v1.34.4",
			hist: History{HighestKubernetes: ReadVersion("v1.35.0"), HighestKubernetesSource: "revision 4"}, want: []RuleID{down},
			expect: expect{messages: []string{"Kubernetes downgrade from v1.35.0 (the highest version it has run, per revision 4) to v1.34.4"}}},
		{name: "history higher than old, change moves up toward it", old: "v1.33.3", new: "v1.34.4",
			hist: History{HighestKubernetes: ReadVersion("v1.35.0"), HighestKubernetesSource: "revision 2"}, expect: expect{warnings: []string{"stays below v1.35.0"}}},
		{name: "history at same minor", old: "v1.35.0", new: "v1.35.1", hist: History{HighestKubernetes: ReadVersion("v1.35.3"), HighestKubernetesSource: "revision 7"}, expect: expect{noWarn: true}},
		{name: "history without source", old: "v1.35.0", new: "v1.34.0", hist: History{HighestKubernetes: ReadVersion("v1.36.0")}, want: []RuleID{down},
			expect: expect{messages: []string{"(the highest version it has run, per its history)"}}},
		{name: "history invalid is ignored with a warning", old: "v1.35.0", new: "v1.35.1", hist: History{HighestKubernetes: ReadVersion("banana"), HighestKubernetesSource: "revision 1"},
			expect: expect{warnings: []string{`"banana"`}}},
		{name: "running higher than the spec", old: "v1.35.2", new: "v1.34.3", running: []string{"v1.35.2", "v1.35.2", "v1.35.2"}, want: []RuleID{down}},
		{name: "aborting an upgrade mid-rollout", old: "v1.35.0", new: "v1.34.3", running: []string{"v1.34.3", "v1.35.0"}, want: []RuleID{down},
			expect: expect{messages: []string{"downgrade from v1.35.0 to v1.34.3"}}},
		{name: "running newer than an already lowered spec, patch change", old: "v1.35.0", new: "v1.35.1", running: []string{"v1.36.0", "v1.35.0"},
			expect: expect{warnings: []string{"stays below v1.36.0 (run by a control-plane machine)"}}},
		{name: "running newer than an already lowered spec, lowered further", old: "v1.35.0", new: "v1.34.1", running: []string{"v1.36.0"},
			want: []RuleID{down}, expect: expect{messages: []string{"from v1.36.0 (run by a control-plane machine) to v1.34.1"}}},
		{name: "old invalid, judged on running", old: "v1.x", new: "v1.30.0", running: []string{"v1.31.0"}, want: []RuleID{down},
			expect: expect{warnings: []string{`the previous spec.version "v1.x" is not a Kubernetes version`}}},
		{name: "create", old: "", new: "v1.30.0", expect: expect{noWarn: true}},
		{name: "create old minor", old: "", new: "v1.24.0", expect: expect{noWarn: true}},
	})
}

func TestControlPlaneMinorSkip(t *testing.T) {
	runCP(t, []cpCase{
		{name: "one minor up", old: "v1.34.3", new: "v1.35.0", expect: expect{noWarn: true}},
		{name: "one minor up at 1.24", old: "v1.24.17", new: "v1.25.0", expect: expect{noWarn: true}},
		{name: "two minors up", old: "v1.34.3", new: "v1.36.0", want: []RuleID{skip}, expect: expect{
			field: "spec.version", value: str("v1.36.0"),
			messages: []string{"KubeadmControlPlane demo-control-plane: upgrade from v1.34.3 to v1.36.0 skips v1.35; kubeadm upgrades one minor at a time [rule ControlPlaneMinorSkip]; set spec.version to a v1.35.x release first and wait until every control-plane machine runs it, then upgrade to v1.36"},
		}},
		{name: "three minors up", old: "v1.33.1", new: "v1.36.0", want: []RuleID{skip}, expect: expect{messages: []string{"skips v1.34 through v1.35", "a v1.34.x release first"}}},
		{name: "two minors up at 1.24", old: "v1.24.0", new: "v1.26.0", want: []RuleID{skip}},
		{name: "two minors up to 1.37", old: "v1.35.4", new: "v1.37.0", want: []RuleID{skip}},
		{name: "to the next rc", old: "v1.36.3", new: "v1.37.0-rc.1", expect: expect{noWarn: true}},
		{name: "skip to an rc", old: "v1.35.4", new: "v1.37.0-rc.1", want: []RuleID{skip}},
		{name: "rc to its release", old: "v1.36.0-rc.1", new: "v1.36.0", expect: expect{noWarn: true}},
		{name: "build metadata one up", old: "v1.34.3+vmware.1", new: "v1.35.1+vmware.1", expect: expect{noWarn: true}},
		{name: "mid-rollout to the next minor", old: "v1.35.0", new: "v1.36.0", running: []string{"v1.34.3", "v1.35.0"}, want: []RuleID{skip},
			expect: expect{messages: []string{"upgrade from v1.34.3 (still run by a control-plane machine) to v1.36.0 skips v1.35"}}},
		{name: "mid-rollout patch change", old: "v1.35.0", new: "v1.35.1", running: []string{"v1.34.3", "v1.35.0"}, expect: expect{noWarn: true}},
		{name: "rollout done", old: "v1.35.0", new: "v1.36.0", running: []string{"v1.35.0", "v1.35.0", "v1.35.0"}, expect: expect{noWarn: true}},
		{name: "running as status.version only", old: "v1.35.0", new: "v1.36.0", running: []string{"v1.34.3"}, want: []RuleID{skip}},
		{name: "old invalid, judged on running", old: "garbage", new: "v1.36.0", running: []string{"v1.34.3"}, want: []RuleID{skip},
			expect: expect{warnings: []string{`"garbage"`}}},
		{name: "invalid running entry ignored", old: "v1.35.0", new: "v1.36.0", running: []string{"v1.35.0", "nonsense"},
			expect: expect{warnings: []string{`ignoring "nonsense"`}}},
		{name: "already skewed, patch change", old: "v1.35.0", new: "v1.35.1", running: []string{"v1.33.9"},
			expect: expect{warnings: []string{"stays more than one minor above v1.33.9"}}},
		{name: "already skewed, widened", old: "v1.35.0", new: "v1.36.0", running: []string{"v1.33.9"}, want: []RuleID{skip}},
		{name: "create with no facts", old: "", new: "v1.37.0", expect: expect{noWarn: true}},
	})
}

func TestEtcdDowngrade(t *testing.T) {
	runCP(t, []cpCase{
		{name: "default 3.5 to 3.6 with the upgrade", old: "v1.33.5", new: "v1.34.3", expect: expect{noWarn: true}},
		{name: "default 3.6 to 3.7 with the upgrade", old: "v1.36.3", new: "v1.37.2", expect: expect{noWarn: true}},
		{name: "pin 3.5 under a 3.6 default", old: "v1.34.3", new: "v1.34.3", newTag: "3.5.24-0", want: []RuleID{etcd}, expect: expect{
			field: etcdField, value: str("3.5.24-0"),
			messages: []string{"KubeadmControlPlane demo-control-plane: etcd downgrade from 3.6.5 (kubeadm's default for v1.34.3) to 3.5.24 (imageTag 3.5.24-0) is not supported; etcd cannot return to an older minor by replacing members [rule EtcdDowngrade]; keep etcd at 3.6: set " + etcdField + " to a 3.6.x tag such as 3.6.5-0, or downgrade etcd with its own procedure (etcdctl downgrade enable) outside Cluster API first"},
		}},
		{name: "pin a lower patch of the same minor", old: "v1.34.3", new: "v1.34.3", newTag: "3.6.4-0", expect: expect{noWarn: true}},
		{name: "pin the same version with a v", old: "v1.34.3", new: "v1.34.3", newTag: "v3.6.5", expect: expect{noWarn: true}},
		{name: "pin a higher minor", old: "v1.35.4", new: "v1.35.4", newTag: "3.7.0-0", expect: expect{noWarn: true}},
		{name: "drop a 3.7 pin", old: "v1.36.1", new: "v1.36.1", oldTag: "3.7.0-0", want: []RuleID{etcd}, expect: expect{
			field: etcdField, value: str(""),
			messages: []string{"from 3.7.0 (imageTag 3.7.0-0) to 3.6.8 (kubeadm's default for v1.36.1)", "keep etcd at 3.7", "3.7.x tag such as 3.7.0-0"},
		}},
		{name: "pin a higher patch", old: "v1.36.1", new: "v1.36.1", oldTag: "3.7.0-0", newTag: "3.7.1-0", expect: expect{noWarn: true}},
		{name: "pin a lower minor", old: "v1.36.1", new: "v1.36.1", oldTag: "3.7.0-0", newTag: "3.6.8-0", want: []RuleID{etcd}},
		{name: "drop a pin equal to the next default", old: "v1.33.5", new: "v1.34.3", oldTag: "3.6.5-0", expect: expect{noWarn: true}},
		{name: "drop a pin above the default", old: "v1.33.5", new: "v1.33.6", oldTag: "3.6.5-0", want: []RuleID{etcd}, expect: expect{field: etcdField, value: str("")}},
		{name: "keep a pin through an upgrade", old: "v1.34.3", new: "v1.35.4", oldTag: "3.5.24-0", newTag: "3.5.24-0", running: []string{"v1.34.3"}, expect: expect{noWarn: true}},
		{name: "history higher, tag lowers", old: "v1.34.3", new: "v1.34.3", newTag: "3.5.24-0", hist: History{HighestEtcd: ReadEtcdVersion("3.6.8-0"), HighestEtcdSource: "revision 4"},
			want: []RuleID{etcd}, expect: expect{messages: []string{"etcd downgrade from 3.6.8 (revision 4) to 3.5.24 (imageTag 3.5.24-0)"}}},
		{name: "history higher than old, not lowered further: refused, etcd ran 3.6", old: "v1.33.5", new: "v1.33.6", hist: History{HighestEtcd: ReadEtcdVersion("3.6.8-0"), HighestEtcdSource: "revision 4"},
			want: []RuleID{etcd}, expect: expect{messages: []string{"etcd downgrade from 3.6.8 (revision 4) to 3.5.24 (kubeadm's default for v1.33.6)"}}},
		{name: "history higher than old, tag moves toward it", old: "v1.34.3", oldTag: "3.4.13-0", new: "v1.34.3", newTag: "3.5.24-0", hist: History{HighestEtcd: ReadEtcdVersion("3.6.8-0"), HighestEtcdSource: "revision 4"},
			expect: expect{warnings: []string{"stays below 3.6.8 (revision 4); allowed"}}},
		{name: "history without source", old: "v1.34.3", new: "v1.34.3", newTag: "3.5.24-0", hist: History{HighestEtcd: ReadEtcdVersion("v3.7.0")},
			want: []RuleID{etcd}, expect: expect{messages: []string{"from 3.7.0 (its history)"}}},
		{name: "history invalid", old: "v1.34.3", new: "v1.34.4", hist: History{HighestEtcd: ReadEtcdVersion("three")}, expect: expect{warnings: []string{`"three"`}}},
		{name: "running default counts", old: "v1.37.0", new: "v1.37.0", newTag: "3.6.8-0", running: []string{"v1.36.3", "v1.37.0"}, want: []RuleID{etcd}},
		{name: "running default counts when old is invalid", old: "1.3four", new: "v1.34.3", newTag: "3.5.24-0", running: []string{"v1.34.3"}, want: []RuleID{etcd},
			expect: expect{messages: []string{"from 3.6.5 (kubeadm's default for v1.34.3)"}}},
		{name: "running default ignored under a pin", old: "v1.34.3", new: "v1.34.4", oldTag: "3.5.24-0", newTag: "3.5.24-0", running: []string{"v1.34.3"}, expect: expect{noWarn: true}},
		{name: "already lowered spec, patch change", old: "v1.36.3", new: "v1.36.4", running: []string{"v1.37.0"},
			expect: expect{warnings: []string{"stays below v1.37.0", "etcd 3.6.8 (kubeadm's default for v1.36.4) stays below 3.7.0 (kubeadm's default for v1.37.0)"}}},
		{name: "no default for the new version", old: "v1.37.2", new: "v1.38.0", expect: expect{warnings: []string{"KubeadmControlPlane demo-control-plane: no kubeadm etcd default known for v1.38.0; etcd downgrade not checked"}}},
		{name: "no default for 1.40", old: "v1.39.0", new: "v1.40.0", expect: expect{warnings: []string{"no kubeadm etcd default known for v1.40.0; etcd downgrade not checked"}}},
		{name: "explicit tag beyond the table", old: "v1.37.2", new: "v1.38.0", newTag: "3.6.0-0", want: []RuleID{etcd}, expect: expect{messages: []string{"from 3.7.0 (kubeadm's default for v1.37.2) to 3.6.0 (imageTag 3.6.0-0)"}}},
		{name: "no default for the old version", old: "v1.23.5", new: "v1.24.0", expect: expect{warnings: []string{"no kubeadm etcd default known for v1.23.5; the etcd of the previous spec is not counted"}}},
		{name: "etcd upgrade skipping a minor warns", old: "v1.36.1", new: "v1.37.0", oldTag: "3.5.24-0",
			expect: expect{warnings: []string{"etcd upgrade from 3.5.24 (imageTag 3.5.24-0) to 3.7.0 (kubeadm's default for v1.37.0) skips 3.6"}}},
		{name: "pre-release etcd pin", old: "v1.36.1", new: "v1.36.1", oldTag: "3.7.0-rc.1", newTag: "3.6.8-0", want: []RuleID{etcd},
			expect: expect{messages: []string{"from 3.7.0-rc.1 (imageTag 3.7.0-rc.1)", "to a 3.7.x tag, or"}}},
		{name: "previous tag invalid", old: "v1.34.3", new: "v1.34.3", oldTag: "latest", expect: expect{warnings: []string{`"latest"`}}},
		{name: "1.34.0 to 1.34.2 moves etcd patch only", old: "v1.34.0", new: "v1.34.2", expect: expect{noWarn: true}},
		{name: "1.28.15 to 1.29.6 lowers etcd patch only", old: "v1.28.15", new: "v1.29.6", expect: expect{noWarn: true}},
	})
}

func TestClusterTopology(t *testing.T) {
	runCP(t, []cpCase{
		{name: "upgrade one minor", cluster: true, old: "v1.35.4", new: "v1.36.1", expect: expect{noWarn: true}},
		{name: "downgrade", cluster: true, old: "v1.34.3", new: "v1.33.5", want: []RuleID{down, etcd}, expect: expect{
			field: "spec.topology.version", value: str("v1.33.5"),
			messages: []string{"Cluster demo: Kubernetes downgrade from v1.34.3 to v1.33.5", "keep spec.topology.version at v1.34.x or later", "Cluster demo: etcd downgrade from 3.6.5 (kubeadm's default for v1.34.3) to 3.5.24 (kubeadm's default for v1.33.5)", "set KubeadmControlPlane " + etcdField + " to a 3.6.x tag"},
		}},
		{name: "skip", cluster: true, old: "v1.33.5", new: "v1.35.0", want: []RuleID{skip}, expect: expect{field: "spec.topology.version", messages: []string{"set spec.topology.version to a v1.34.x release first"}}},
		{name: "pinned etcd kept", cluster: true, old: "v1.35.4", new: "v1.36.1", oldTag: "3.6.8-0", newTag: "3.6.8-0", expect: expect{noWarn: true}},
		{name: "pinned 3.7 etcd kept through a downgrade", cluster: true, old: "v1.37.0", new: "v1.36.1", oldTag: "3.7.0-0", newTag: "3.7.0-0", want: []RuleID{down}},
		{name: "mid-rollout", cluster: true, old: "v1.35.0", new: "v1.36.0", running: []string{"v1.34.3", "v1.35.0"}, want: []RuleID{skip}},
		{name: "leaves a worker too old", cluster: true, old: "v1.35.0", new: "v1.36.0", workers: []Worker{md("md-0", "v1.32.4")}, want: []RuleID{tooOld},
			expect: expect{field: "spec.topology.version", messages: []string{"Cluster demo: MachineDeployment md-0 runs v1.32.4, 4 minors older than v1.36.0"}}},
		{name: "short version", cluster: true, old: "v1.35.0", new: "v1.36", want: []RuleID{bad}, expect: expect{field: "spec.topology.version", value: str("v1.36")}},
		{name: "invalid word", cluster: true, old: "v1.35.0", new: "stable", want: []RuleID{bad}, expect: expect{field: "spec.topology.version", value: str("stable")}},
	})
}

func TestInvalidVersions(t *testing.T) {
	runCP(t, []cpCase{
		{name: "empty new", old: "v1.35.0", new: "", want: []RuleID{bad}, expect: expect{field: "spec.version", value: str(""),
			messages: []string{`KubeadmControlPlane demo-control-plane: spec.version "" is not a valid Kubernetes version [rule InvalidVersion]; write a Kubernetes version such as v1.35.2`}}},
		{name: "typo", old: "v1.35.0", new: "v1.3x.0", want: []RuleID{bad}, expect: expect{value: str("v1.3x.0")}},
		{name: "word", old: "v1.35.0", new: "latest", want: []RuleID{bad}},
		{name: "four parts", old: "v1.35.0", new: "v1.35.0.1", want: []RuleID{bad}},
		{name: "invalid new etcd tag", old: "v1.35.0", new: "v1.35.0", newTag: "latest", want: []RuleID{bad}, expect: expect{field: etcdField, value: str("latest"),
			messages: []string{etcdField + ` "latest" is not a valid etcd version`, "or leave it empty for kubeadm's default"}}},
		{name: "both invalid", old: "v1.35.0", new: "x", newTag: "y", want: []RuleID{bad, bad}},
		{name: "invalid tag with a downgrade", old: "v1.35.2", new: "v1.34.1", newTag: "x", want: []RuleID{bad, down}},
		{name: "invalid new with invalid workers", old: "v1.35.0", new: "nope", workers: []Worker{md("md-0", "nope")}, want: []RuleID{bad}},
		{name: "old invalid warns only", old: "v1.x", new: "v1.35.0", expect: expect{warnings: []string{`previous spec.version "v1.x"`}}},
		{name: "spaces are refused", old: "v1.35.0", new: " v1.35.2 ", want: []RuleID{bad}},
		{name: "short version is refused, not guessed", old: "v1.35.0", new: "1.36", want: []RuleID{bad}, expect: expect{value: str("1.36")}},
		{name: "running all invalid", old: "v1.35.0", new: "v1.36.0", running: []string{"a", "b"}, expect: expect{warnings: []string{`ignoring "a"`, `ignoring "b"`}}},
	})
}

func TestControlPlaneLeavesWorkers(t *testing.T) {
	runCP(t, []cpCase{
		{name: "worker exactly 3 behind after upgrade", old: "v1.35.0", new: "v1.36.0", workers: []Worker{md("md-0", "v1.33.4")}, expect: expect{noWarn: true}},
		{name: "worker 4 behind after upgrade", old: "v1.35.0", new: "v1.36.0", workers: []Worker{md("md-0", "v1.32.4")}, want: []RuleID{tooOld}, expect: expect{
			field: "spec.version", value: str("v1.36.0"),
			messages: []string{"KubeadmControlPlane demo-control-plane: MachineDeployment md-0 runs v1.32.4, 4 minors older than v1.36.0; a kubelet may be at most 3 minors older than the API server [rule ControlPlaneLeavesWorkerTooOld]; upgrade MachineDeployment md-0 to v1.33.x or newer first, then set spec.version to v1.36.0"},
		}},
		{name: "worker same minor", old: "v1.35.0", new: "v1.35.1", workers: []Worker{md("md-0", "v1.35.0")}, expect: expect{noWarn: true}},
		{name: "worker newer patch than a patch downgrade", old: "v1.34.3", new: "v1.34.1", workers: []Worker{md("md-0", "v1.34.3")}, expect: expect{noWarn: true}},
		{name: "downgrade below a worker", old: "v1.35.2", new: "v1.34.1", workers: []Worker{md("md-0", "v1.35.2")}, want: []RuleID{down, newer}, expect: expect{
			messages: []string{"KubeadmControlPlane demo-control-plane: MachineDeployment md-0 runs v1.35.2, newer than v1.34.1; a kubelet must not be newer than the API server [rule ControlPlaneLeavesWorkerNewer]; keep spec.version at v1.35.x or later while MachineDeployment md-0 runs v1.35"},
		}},
		{name: "kubelet 1.24 is 2 behind 1.26", old: "v1.25.5", new: "v1.26.0", workers: []Worker{md("md-0", "v1.24.9")}, expect: expect{noWarn: true}},
		{name: "kubelet 1.24 is 3 behind 1.27", old: "v1.26.0", new: "v1.27.0", workers: []Worker{md("md-0", "v1.24.9")}, want: []RuleID{tooOld},
			expect: expect{messages: []string{"3 minors older than v1.27.0; a kubelet older than v1.25 may be at most 2 minors older", "upgrade MachineDeployment md-0 to v1.25.x or newer first"}}},
		{name: "kubelet 1.25 is 3 behind 1.28", old: "v1.27.0", new: "v1.28.0", workers: []Worker{md("md-0", "v1.25.0")}, expect: expect{noWarn: true}},
		{name: "kubelet 1.25 is 4 behind 1.29", old: "v1.28.0", new: "v1.29.0", workers: []Worker{md("md-0", "v1.25.0")}, want: []RuleID{tooOld}, expect: expect{messages: []string{"to v1.26.x or newer first"}}},
		{name: "kubelet 1.24 already too old, made worse", old: "v1.27.0", new: "v1.28.0", workers: []Worker{md("md-0", "v1.24.0")}, want: []RuleID{tooOld}},
		{name: "already too old, patch change", old: "v1.35.0", new: "v1.35.1", workers: []Worker{md("md-0", "v1.31.0")},
			expect: expect{warnings: []string{"MachineDeployment md-0 runs v1.31.0, 4 minors older than v1.35.1, beyond the kubelet skew; allowed"}}},
		{name: "already newer, patch change", old: "v1.34.0", new: "v1.34.1", workers: []Worker{md("md-0", "v1.35.0")},
			expect: expect{warnings: []string{"MachineDeployment md-0 runs v1.35.0, newer than v1.34.1; allowed"}}},
		{name: "already newer, upgrade closes the gap", old: "v1.34.0", new: "v1.35.0", workers: []Worker{{Kind: "Machine", Name: "m-1", Version: ReadVersion("v1.36.0")}},
			expect: expect{warnings: []string{"Machine m-1 runs v1.36.0, newer than v1.35.0"}}},
		{name: "unknown worker version skipped silently", old: "v1.35.0", new: "v1.36.0", workers: []Worker{md("md-0", "")}, expect: expect{noWarn: true}},
		{name: "invalid worker version warns", old: "v1.35.0", new: "v1.36.0", workers: []Worker{{Kind: "MachinePool", Name: "mp-0", Version: ReadVersion("garbage")}},
			expect: expect{warnings: []string{`KubeadmControlPlane demo-control-plane: MachinePool mp-0: ignoring "garbage"`}}},
		{name: "no old version: worker newer", old: "", new: "v1.34.0", workers: []Worker{md("md-0", "v1.35.0")}, want: []RuleID{newer}},
		{name: "old invalid: worker too old", old: "bogus", new: "v1.36.0", workers: []Worker{md("md-0", "v1.32.0")}, want: []RuleID{tooOld}},
		{name: "two offending workers, one fine", old: "v1.35.0", new: "v1.36.0",
			workers: []Worker{md("md-a", "v1.32.4"), md("md-b", "v1.34.0"), {Kind: "Machine", Name: "m-9", Version: ReadVersion("v1.31.2")}}, want: []RuleID{tooOld, tooOld},
			expect: expect{messages: []string{"MachineDeployment md-a runs v1.32.4", "Machine m-9 runs v1.31.2, 5 minors older"}}},
		{name: "machine pool newer after downgrade", old: "v1.36.0", new: "v1.35.0",
			workers: []Worker{{Kind: "MachinePool", Name: "mp-1", Version: ReadVersion("v1.36.0")}}, want: []RuleID{down, newer}, expect: expect{messages: []string{"MachinePool mp-1 runs v1.36.0"}}},
		{name: "rc worker ahead of a downgrade", old: "v1.37.0", new: "v1.36.2", workers: []Worker{md("md-0", "v1.37.0-rc.0")}, want: []RuleID{down, etcd, newer}},
		{name: "build metadata worker", old: "v1.35.0+vmware.1", new: "v1.36.0+vmware.1", workers: []Worker{md("md-0", "v1.33.0+vmware.2")}, expect: expect{noWarn: true}},
	})
}

// TestSweepControlPlaneTransitions checks every pair of minors 1.24–1.37
// against the rules as stated: downgrade when the minor goes down, skip when
// it goes up by more than one, and etcd downgrade when kubeadm's default etcd
// minor for the new minor is lower (3.5 up to 1.33, 3.6 for 1.34–1.36, 3.7
// for 1.37).
func TestSweepControlPlaneTransitions(t *testing.T) {
	etcdMinor := func(k int) int {
		switch {
		case k >= 37:
			return 7
		case k >= 34:
			return 6
		}
		return 5
	}
	for o := 24; o <= 37; o++ {
		for n := 24; n <= 37; n++ {
			old, new := fmt.Sprintf("v1.%d.3", o), fmt.Sprintf("v1.%d.2", n)
			t.Run(old+"->"+new, func(t *testing.T) {
				var want []RuleID
				if n < o {
					want = append(want, down)
				}
				if n > o+1 {
					want = append(want, skip)
				}
				if etcdMinor(n) < etcdMinor(o) {
					want = append(want, etcd)
				}
				d := EvaluateControlPlane(cpCase{old: old, new: new}.change())
				require.Equal(t, sorted(want...), rules(d), "%v", d.Violations)
				if etcdMinor(n)-etcdMinor(o) > 1 {
					require.Len(t, d.Warnings, 1)
					assert.Contains(t, d.Warnings[0], "skips 3.6; etcd upgrades one minor at a time")
				} else {
					assert.Empty(t, d.Warnings)
				}
			})
		}
	}
}

// TestSweepUpgradeLeavesWorkers checks one-minor upgrades of the control
// plane against workers of every minor around it: refused exactly when the
// worker falls out of the kubelet skew of the new version.
func TestSweepUpgradeLeavesWorkers(t *testing.T) {
	for c := 26; c <= 36; c++ {
		for w := c - 5; w <= c+1; w++ {
			old, new, worker := fmt.Sprintf("v1.%d.1", c), fmt.Sprintf("v1.%d.0", c+1), fmt.Sprintf("v1.%d.4", w)
			t.Run(old+"->"+new+"/worker "+worker, func(t *testing.T) {
				skewAllowed := 3
				if w < 25 {
					skewAllowed = 2
				}
				var want []RuleID
				if c+1-w > skewAllowed {
					want = append(want, tooOld)
				}
				d := EvaluateControlPlane(cpCase{old: old, new: new, workers: []Worker{md("md-0", worker)}}.change())
				require.Equal(t, sorted(want...), rules(d), "%v", d.Violations)
				assert.Empty(t, d.Warnings)
			})
		}
	}
}

// BenchmarkEvaluateControlPlane is the policy alone on a control-plane
// upgrade (benchFacts): its facts read from their texts, as package policy
// reads them from objects, and judged.
func BenchmarkEvaluateControlPlane(b *testing.B) {
	f := newBenchFacts()
	b.ReportAllocs()
	for b.Loop() {
		d := EvaluateControlPlane(f.read())
		if !d.Allowed() {
			b.Fatal(d.Violations)
		}
	}
}

// BenchmarkControlPlaneRules is the rules alone on the change of
// BenchmarkEvaluateControlPlane, its versions read beforehand, as package
// policy hands them over.
func BenchmarkControlPlaneRules(b *testing.B) {
	c := newBenchFacts().read()
	b.ReportAllocs()
	for b.Loop() {
		d := EvaluateControlPlane(c)
		if !d.Allowed() {
			b.Fatal(d.Violations)
		}
	}
}

// benchFacts is a control-plane upgrade with 3 running versions, 10
// workers and a history, every version as written.
type benchFacts struct {
	running []string
	// workers are the MachineDeployments' names, workerVersions their versions.
	workers, workerVersions []string
}

func newBenchFacts() benchFacts {
	f := benchFacts{running: []string{"v1.35.4", "v1.35.4", "v1.36.3"}}
	for i := range 10 {
		f.workers = append(f.workers, fmt.Sprintf("md-%d", i))
		f.workerVersions = append(f.workerVersions, fmt.Sprintf("v1.%d.2", 33+i%3))
	}
	return f
}

// read reads every version of f, as the facts of a change are gathered.
func (f benchFacts) read() ControlPlaneChange {
	c := ControlPlaneChange{
		Kind: "KubeadmControlPlane", Name: "prod-control-plane",
		VersionField: "spec.version", EtcdField: etcdField,
		OldVersion: ReadVersion("v1.35.4"), NewVersion: ReadVersion("v1.36.3"),
		OldEtcdImageTag: ReadEtcdVersion(""), NewEtcdImageTag: ReadEtcdVersion(""),
		RunningVersions: ReadVersions(f.running),
		History:         History{HighestKubernetes: ReadVersion("v1.35.4"), HighestKubernetesSource: "revision 6", HighestEtcd: ReadEtcdVersion("3.6.6-0"), HighestEtcdSource: "revision 6"},
		Workers:         make([]Worker, len(f.workers)),
	}
	for i, name := range f.workers {
		c.Workers[i] = md(name, f.workerVersions[i])
	}
	return c
}

// TestFactsLeftUnset: a version or tag never read (the zero Version
// or EtcdVersion) is judged as one written "": the rules read no text.
func TestFactsLeftUnset(t *testing.T) {
	cases := []struct {
		name   string
		change ControlPlaneChange
		// unset clears, in the change read, the facts the change leaves "".
		unset func(*ControlPlaneChange)
	}{
		{
			name:   "a create",
			change: ControlPlaneChange{Kind: "KubeadmControlPlane", Name: "cp", NewVersion: ReadVersion("v1.36.1")},
			unset: func(p *ControlPlaneChange) {
				p.OldVersion, p.OldEtcdImageTag, p.NewEtcdImageTag = Version{}, EtcdVersion{}, EtcdVersion{}
				p.History.HighestKubernetes, p.History.HighestEtcd = Version{}, EtcdVersion{}
			},
		},
		{
			name: "a downgrade below its history, a worker of unknown version",
			change: ControlPlaneChange{Kind: "KubeadmControlPlane", Name: "cp", OldVersion: ReadVersion("v1.35.2"), NewVersion: ReadVersion("v1.34.3"),
				History: History{HighestKubernetes: ReadVersion("v1.36.1")}, Workers: []Worker{md("md-0", ""), md("md-1", "v1.35.2")}},
			unset: func(p *ControlPlaneChange) {
				p.OldEtcdImageTag, p.NewEtcdImageTag, p.History.HighestEtcd = EtcdVersion{}, EtcdVersion{}, EtcdVersion{}
				p.Workers[0].Version = Version{}
			},
		},
		{
			name:   "no new version",
			change: ControlPlaneChange{Kind: "KubeadmControlPlane", Name: "cp", OldVersion: ReadVersion("v1.35.2")},
			unset:  func(p *ControlPlaneChange) { p.NewVersion = Version{} },
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := readUnset(c.change)
			c.unset(&p)
			assert.Equal(t, EvaluateControlPlane(readUnset(c.change)), EvaluateControlPlane(p))
		})
	}
}

// readUnset gives every fact c leaves unset what reading "" gives, as
// gathering a change from an object's empty fields does.
func readUnset(c ControlPlaneChange) ControlPlaneChange {
	version := func(v Version) Version {
		if v.Text() == "" {
			return ReadVersion("")
		}
		return v
	}
	tag := func(v EtcdVersion) EtcdVersion {
		if v.Text() == "" {
			return ReadEtcdVersion("")
		}
		return v
	}
	c.OldVersion, c.NewVersion = version(c.OldVersion), version(c.NewVersion)
	c.OldEtcdImageTag, c.NewEtcdImageTag = tag(c.OldEtcdImageTag), tag(c.NewEtcdImageTag)
	c.History.HighestKubernetes, c.History.HighestEtcd = version(c.History.HighestKubernetes), tag(c.History.HighestEtcd)
	c.Workers = slices.Clone(c.Workers)
	for i := range c.Workers {
		c.Workers[i].Version = version(c.Workers[i].Version)
	}
	return c
}
