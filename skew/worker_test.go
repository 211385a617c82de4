package skew

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	wNewer = RuleWorkerNewerThanControlPlane
	wOld   = RuleWorkerTooOld
)

type workerCase struct {
	name     string
	old, new string
	cp       *ControlPlaneState // nil: no control plane known
	want     []RuleID
	expect
}

func kcpState(version string, running ...string) *ControlPlaneState {
	return &ControlPlaneState{Kind: "KubeadmControlPlane", Name: "demo-control-plane", Version: ReadVersion(version), RunningVersions: ReadVersions(running)}
}

func runWorker(t *testing.T, cases []workerCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := EvaluateWorker(WorkerChange{
				Kind: "MachineDeployment", Name: "md-0", VersionField: "spec.template.spec.version",
				OldVersion: ReadVersion(c.old), NewVersion: ReadVersion(c.new), ControlPlane: c.cp,
			})
			check(t, d, c.want, c.expect)
		})
	}
}

func TestWorkerNewerThanControlPlane(t *testing.T) {
	runWorker(t, []workerCase{
		{name: "up to the control plane", old: "v1.34.3", new: "v1.35.0", cp: kcpState("v1.35.0"), expect: expect{noWarn: true}},
		{name: "one minor above", old: "v1.35.0", new: "v1.36.0", cp: kcpState("v1.35.0"), want: []RuleID{wNewer}, expect: expect{
			field: "spec.template.spec.version", value: str("v1.36.0"),
			messages: []string{"MachineDeployment md-0: v1.36.0 is newer than v1.35.0, the oldest version of control plane KubeadmControlPlane demo-control-plane (its spec.version); a kubelet must not be newer than the API server [rule WorkerNewerThanControlPlane]; keep spec.template.spec.version at v1.35.x or older until every machine of control plane KubeadmControlPlane demo-control-plane runs v1.36 or newer"},
		}},
		{name: "two minors above", old: "v1.35.0", new: "v1.37.1", cp: kcpState("v1.35.0"), want: []RuleID{wNewer}},
		{name: "create above", new: "v1.36.0", cp: kcpState("v1.35.0"), want: []RuleID{wNewer}},
		{name: "create with a higher patch", new: "v1.35.9", cp: kcpState("v1.35.0"), expect: expect{noWarn: true}},
		{name: "mid-rollout, old machines still run", old: "v1.34.3", new: "v1.35.0", cp: kcpState("v1.35.0", "v1.34.3", "v1.35.0"), want: []RuleID{wNewer},
			expect: expect{messages: []string{"v1.35.0 is newer than v1.34.3, the oldest version of control plane KubeadmControlPlane demo-control-plane (run by one of its machines)", "until every machine of control plane KubeadmControlPlane demo-control-plane runs v1.35 or newer"}}},
		{name: "rollout done", old: "v1.34.3", new: "v1.35.0", cp: kcpState("v1.35.0", "v1.35.0", "v1.35.0"), expect: expect{noWarn: true}},
		{name: "mid-rollout patch change", old: "v1.34.3", new: "v1.34.4", cp: kcpState("v1.35.0", "v1.34.3"), expect: expect{noWarn: true}},
		{name: "spec ahead of running only as status.version", old: "v1.34.3", new: "v1.35.0", cp: kcpState("v1.35.0", "v1.34.3"), want: []RuleID{wNewer}},
		{name: "already newer, lowered but still newer", old: "v1.36.0", new: "v1.35.0", cp: kcpState("v1.34.0"),
			expect: expect{warnings: []string{"MachineDeployment md-0: v1.35.0 stays newer than v1.34.0, the oldest version of control plane KubeadmControlPlane demo-control-plane; allowed"}}},
		{name: "already newer, patch change", old: "v1.35.0", new: "v1.35.2", cp: kcpState("v1.34.0"), expect: expect{warnings: []string{"stays newer"}}},
		{name: "already newer, raised", old: "v1.35.0", new: "v1.36.0", cp: kcpState("v1.34.0"), want: []RuleID{wNewer}},
		{name: "rc above", old: "v1.35.0", new: "v1.36.0-rc.1", cp: kcpState("v1.35.2"), want: []RuleID{wNewer}},
		{name: "rc equal minor", old: "v1.35.0", new: "v1.36.0-rc.1", cp: kcpState("v1.36.0-rc.0"), expect: expect{noWarn: true}},
		{name: "build metadata", old: "v1.35.1+vmware.1", new: "v1.35.2+vmware.1", cp: kcpState("v1.35.2+vmware.1"), expect: expect{noWarn: true}},
		{name: "at 1.37", old: "v1.36.3", new: "v1.37.2", cp: kcpState("v1.37.2"), expect: expect{noWarn: true}},
		{name: "above 1.37", old: "v1.37.2", new: "v1.38.0", cp: kcpState("v1.37.2"), want: []RuleID{wNewer}},
	})
}

func TestWorkerTooOld(t *testing.T) {
	runWorker(t, []workerCase{
		{name: "three behind", old: "v1.33.0", new: "v1.32.0", cp: kcpState("v1.35.0"), expect: expect{noWarn: true}},
		{name: "four behind", old: "v1.33.0", new: "v1.31.0", cp: kcpState("v1.35.0"), want: []RuleID{wOld}, expect: expect{
			field: "spec.template.spec.version", value: str("v1.31.0"),
			messages: []string{"MachineDeployment md-0: v1.31.0 is 4 minors older than v1.35.0, the newest version of control plane KubeadmControlPlane demo-control-plane (its spec.version); a kubelet may be at most 3 minors older than the API server [rule WorkerTooOld]; set spec.template.spec.version to v1.32.x or newer"},
		}},
		{name: "create four behind", new: "v1.31.9", cp: kcpState("v1.35.0"), want: []RuleID{wOld}},
		{name: "create three behind with a patch", new: "v1.32.0", cp: kcpState("v1.35.9"), expect: expect{noWarn: true}},
		{name: "newest is a running machine", new: "v1.31.5", cp: kcpState("v1.34.0", "v1.35.0"), want: []RuleID{wOld},
			expect: expect{messages: []string{"4 minors older than v1.35.0, the newest version of control plane KubeadmControlPlane demo-control-plane (run by one of its machines)"}}},
		{name: "newest is the spec during a rollout", new: "v1.31.5", cp: kcpState("v1.35.0", "v1.34.0"), want: []RuleID{wOld}},
		{name: "three behind the spec during a rollout", new: "v1.32.5", cp: kcpState("v1.35.0", "v1.34.0"), expect: expect{noWarn: true}},
		{name: "kubelet 1.24, API server 1.26", new: "v1.24.0", cp: kcpState("v1.26.3"), expect: expect{noWarn: true}},
		{name: "kubelet 1.24, API server 1.27", new: "v1.24.17", cp: kcpState("v1.27.0"), want: []RuleID{wOld}, expect: expect{
			messages: []string{"v1.24.17 is 3 minors older than v1.27.0", "a kubelet older than v1.25 may be at most 2 minors older than the API server", "set spec.template.spec.version to v1.25.x or newer"},
		}},
		{name: "kubelet 1.25, API server 1.28", new: "v1.25.0", cp: kcpState("v1.28.0"), expect: expect{noWarn: true}},
		{name: "kubelet 1.25, API server 1.29", new: "v1.25.16", cp: kcpState("v1.29.0"), want: []RuleID{wOld}, expect: expect{messages: []string{"set spec.template.spec.version to v1.26.x or newer"}}},
		{name: "kubelet 1.25 rc, API server 1.28", new: "v1.25.0-rc.1", cp: kcpState("v1.28.0"), expect: expect{noWarn: true}},
		{name: "from 1.24 to 1.25 under 1.28", old: "v1.24.0", new: "v1.25.0", cp: kcpState("v1.28.0"), expect: expect{noWarn: true}},
		{name: "from 1.25 to 1.24 under 1.27", old: "v1.25.0", new: "v1.24.0", cp: kcpState("v1.27.0"), want: []RuleID{wOld}},
		{name: "1.24 already too old, patch change", old: "v1.24.0", new: "v1.24.5", cp: kcpState("v1.27.0"), expect: expect{warnings: []string{"v1.24.5 stays 3 minors older than v1.27.0"}}},
		{name: "already too old, raised but still too old", old: "v1.30.0", new: "v1.31.0", cp: kcpState("v1.35.0"),
			expect: expect{warnings: []string{"MachineDeployment md-0: v1.31.0 stays 4 minors older than v1.35.0, the newest version of control plane KubeadmControlPlane demo-control-plane, beyond the kubelet skew; allowed because this change does not lower it"}}},
		{name: "already too old, patch change", old: "v1.30.0", new: "v1.30.5", cp: kcpState("v1.35.0"), expect: expect{warnings: []string{"stays 5 minors older"}}},
		{name: "already too old, patch down", old: "v1.30.5", new: "v1.30.1", cp: kcpState("v1.35.0"), expect: expect{warnings: []string{"stays 5 minors older"}}},
		{name: "already too old, lowered", old: "v1.30.0", new: "v1.29.0", cp: kcpState("v1.35.0"), want: []RuleID{wOld}},
		{name: "already too old, raised into skew", old: "v1.30.0", new: "v1.32.0", cp: kcpState("v1.35.0"), expect: expect{noWarn: true}},
		{name: "both rules at once during a wide skew", new: "v1.31.0", cp: kcpState("v1.35.0", "v1.30.0"), want: []RuleID{wNewer, wOld}},
		{name: "wide skew, lowered toward the oldest", old: "v1.33.0", new: "v1.31.0", cp: kcpState("v1.35.0", "v1.30.0"), want: []RuleID{wOld}, expect: expect{warnings: []string{"stays newer than v1.30.0"}}},
	})
}

func TestWorkerFacts(t *testing.T) {
	runWorker(t, []workerCase{
		{name: "no control plane", old: "v1.30.0", new: "v1.40.0", want: nil, expect: expect{warnings: []string{"MachineDeployment md-0: control plane not known; version skew not checked"}}},
		{name: "no control plane, invalid version", new: "v1.4o.0", want: []RuleID{RuleInvalidVersion}, expect: expect{value: str("v1.4o.0")}},
		{name: "invalid new", old: "v1.35.0", new: "1.35.x", cp: kcpState("v1.35.0"), want: []RuleID{RuleInvalidVersion}, expect: expect{
			field: "spec.template.spec.version", value: str("1.35.x"),
			messages: []string{`MachineDeployment md-0: spec.template.spec.version "1.35.x" is not a valid Kubernetes version [rule InvalidVersion]; write a Kubernetes version such as v1.35.2`},
		}},
		{name: "empty new", old: "v1.35.0", new: "", cp: kcpState("v1.35.0"), want: []RuleID{RuleInvalidVersion}},
		{name: "invalid old is judged as a create", old: "old", new: "v1.36.0", cp: kcpState("v1.35.0"), want: []RuleID{wNewer}, expect: expect{warnings: []string{`previous spec.template.spec.version "old"`}}},
		{name: "invalid control-plane spec, valid running", old: "v1.34.0", new: "v1.35.0", cp: kcpState("v1.3five", "v1.34.2"), want: []RuleID{wNewer},
			expect: expect{warnings: []string{`control plane KubeadmControlPlane demo-control-plane: spec.version: ignoring "v1.3five"`}}},
		{name: "invalid running entry", old: "v1.34.0", new: "v1.35.0", cp: kcpState("v1.35.0", "?", "v1.35.0"), expect: expect{warnings: []string{`ignoring "?"`}}},
		{name: "no valid control-plane version", old: "v1.34.0", new: "v1.38.0", cp: kcpState("", "x"), expect: expect{warnings: []string{"no version of control plane KubeadmControlPlane demo-control-plane known; version skew not checked"}}},
		{name: "empty control plane", old: "v1.34.0", new: "v1.38.0", cp: &ControlPlaneState{}, expect: expect{warnings: []string{"version skew not checked"}}},
		{name: "other control-plane kind", old: "v1.34.0", new: "v1.36.0", cp: &ControlPlaneState{Kind: "AWSManagedControlPlane", Name: "eks", Version: ReadVersion("v1.35.0")}, want: []RuleID{wNewer},
			expect: expect{messages: []string{"control plane AWSManagedControlPlane eks"}}},
	})

	// The default field path.
	d := EvaluateWorker(WorkerChange{Kind: "MachineDeployment", Name: "md-1", NewVersion: ReadVersion("v1.36.0"), ControlPlane: kcpState("v1.35.0")})
	require.Len(t, d.Violations, 1)
	assert.Equal(t, "spec.template.spec.version", d.Violations[0].Field)
}

// TestSweepWorkers checks creating a worker at every minor 1.22–1.37 under a
// control plane at every minor 1.24–1.37 against the version-skew policy.
func TestSweepWorkers(t *testing.T) {
	for c := 24; c <= 37; c++ {
		for w := 22; w <= 37; w++ {
			cp, worker := fmt.Sprintf("v1.%d.3", c), fmt.Sprintf("v1.%d.1", w)
			t.Run("cp "+cp+"/worker "+worker, func(t *testing.T) {
				allowedBehind := 3
				if w < 25 {
					allowedBehind = 2
				}
				var want []RuleID
				if w > c {
					want = append(want, wNewer)
				}
				if c-w > allowedBehind {
					want = append(want, wOld)
				}
				d := EvaluateWorker(WorkerChange{Kind: "MachineDeployment", Name: "md-0", NewVersion: ReadVersion(worker), ControlPlane: kcpState(cp)})
				require.Equal(t, sorted(want...), rules(d), "%v", d.Violations)
				assert.Empty(t, d.Warnings)
			})
		}
	}
}
