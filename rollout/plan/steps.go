package plan

import (
	"fmt"
	"slices"

	"github.com/blang/semver/v4"

	"github.com/rollout-guard/rollout-guard/rollout/api/v1alpha1"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/skew"
)

// workersUpgradePlan returns the versions Cluster API's topology controller
// takes the workers through on an upgrade to desired, when neither the
// ClusterClass nor an extension says: the fewest steps that keep every
// kubelet within 3 minors of the control plane, ending at desired (Cluster
// API v1.14 exp/topology/desiredstate DefaultAndValidateUpgradePlans: from
// the oldest worker's minor, a step at every third minor, with the version
// the control plane goes through at that minor). minWorkers is the oldest
// worker pool's version, "" when there is none; cpVersion is the control
// plane's version now and cpPlan the versions it goes through. nil when the
// workers are already at desired or there are none.
func workersUpgradePlan(desired, cpVersion, minWorkers string, cpPlan []string) ([]string, error) {
	if minWorkers == "" {
		return nil, nil
	}
	want, err := skew.ParseVersion(desired)
	if err != nil {
		return nil, fmt.Errorf("desired version: %w", err)
	}
	from, err := skew.ParseVersion(minWorkers)
	if err != nil {
		return nil, fmt.Errorf("oldest worker version: %w", err)
	}
	if from.String() == want.String() {
		return nil, nil
	}
	minors := map[uint64]string{}
	for _, v := range append([]string{cpVersion}, cpPlan...) {
		sv, err := skew.ParseVersion(v)
		if err != nil {
			return nil, fmt.Errorf("control-plane version: %w", err)
		}
		minors[sv.Minor] = v
	}
	var plan []string
	if want.Minor > from.Minor {
		for i := uint64(3); i < want.Minor-from.Minor; i += 3 {
			v, ok := minors[from.Minor+i]
			if !ok {
				return nil, fmt.Errorf("no control-plane version of minor 1.%d for the workers to step through", from.Minor+i)
			}
			plan = append(plan, v)
		}
	}
	if len(plan) == 0 || plan[len(plan)-1] != desired {
		plan = append(plan, desired)
	}
	return plan, nil
}

// upgradeSteps orders the steps of a topology upgrade as Cluster API runs
// them: the workers first where they must catch up with the control
// plane's current version, then each control-plane step, each followed by
// the workers' step at the same version when there is one (the control
// plane does not move on before the workers follow, so kubelets stay
// within the skew). etcdTag is the control plane's pinned etcd image tag,
// "" for kubeadm's default; cpObject and workerObjects name the objects
// each part's steps change, and cpMachines and workerMachines how many
// machines each part's step replaces.
func upgradeSteps(cpVersion string, cpPlan, workersPlan []string, etcdTag, cpObject string, workerObjects []string, cpMachines, workerMachines int) []v1alpha1.PlanStep {
	var steps []v1alpha1.PlanStep
	workers := func(v string) v1alpha1.PlanStep {
		return v1alpha1.PlanStep{Part: core.PartWorkers, Version: v, Objects: slices.Clone(workerObjects), Machines: workerMachines}
	}
	done := map[string]bool{}
	for _, v := range workersPlan {
		if v == cpVersion {
			steps = append(steps, workers(v))
			done[v] = true
		}
	}
	for _, v := range cpPlan {
		st := v1alpha1.PlanStep{Part: core.PartControlPlane, Version: v, Objects: []string{cpObject}, Machines: cpMachines}
		st.Etcd, st.EtcdSource = etcdAt(v, etcdTag)
		steps = append(steps, st)
		if slices.Contains(workersPlan, v) && !done[v] {
			steps = append(steps, workers(v))
			done[v] = true
		}
	}
	for _, v := range workersPlan {
		if !done[v] {
			steps = append(steps, workers(v))
		}
	}
	return steps
}

// etcdAt is the etcd a control plane runs at Kubernetes version v with the
// pinned image tag (kubeadm's default when ""), and where it comes from;
// empty when unknown.
func etcdAt(v, imageTag string) (string, string) {
	k, err := skew.ParseVersion(v)
	if err != nil {
		return "", ""
	}
	e, source, err := skew.EtcdFor(k, imageTag)
	if err != nil {
		return "", ""
	}
	return etcdString(e, imageTag), source
}

// etcdString writes an etcd version as its image tag when pinned, else as
// kubeadm's version.
func etcdString(v semver.Version, imageTag string) string {
	if imageTag != "" {
		return imageTag
	}
	return v.String()
}

// oneMinorPlan is the control-plane plan when the ClusterClass lists no
// versions and names no extension: Cluster API upgrades one minor at a
// time, straight to desired (and refuses a jump of more).
func oneMinorPlan(desired, current string) []string {
	d, err1 := skew.ParseVersion(desired)
	c, err2 := skew.ParseVersion(current)
	if err1 == nil && err2 == nil && d.String() == c.String() {
		return nil
	}
	return []string{desired}
}

// minVersion is the oldest of versions that parse, "" when none does.
func minVersion(versions []string) string {
	best := ""
	var bestV semver.Version
	for _, v := range versions {
		sv, err := skew.ParseVersion(v)
		if err != nil {
			continue
		}
		if best == "" || sv.LT(bestV) {
			best, bestV = v, sv
		}
	}
	return best
}
