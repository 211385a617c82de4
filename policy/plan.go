package policy

import (
	"cmp"
	"fmt"
	"strconv"

	"github.com/blang/semver/v4"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/skew"
)

// ClassUpgradePlan returns the versions Cluster API's topology controller
// takes a control plane through, from its current spec.version to desired,
// when the Cluster's ClusterClass lists classVersions
// (spec.kubernetesVersions): for every minor after the current one up to the
// desired one, the newest listed release of that minor, ending with desired
// (or, within one minor, the newest listed patch up to desired). It follows
// Cluster API v1.14's GetUpgradePlanFromClusterClassVersions
// (exp/topology/desiredstate/upgrade_plan.go); a differential test in the
// test module holds the two equal. A plan that skips a minor (a class listing
// none of it) is returned as computed: package skew refuses it, as Cluster
// API's own plan validation would fail it.
func ClassUpgradePlan(classVersions []string, desired, current string) ([]string, error) {
	plan, err := classUpgradePlan(skew.ReadVersions(classVersions), skew.ReadVersion(desired), skew.ReadVersion(current))
	if err != nil || plan == nil {
		return nil, err
	}
	steps := make([]string, len(plan))
	for i, v := range plan {
		steps[i] = v.Text()
	}
	return steps, nil
}

// classUpgradePlan is ClassUpgradePlan of versions already read: the steps
// are versions of the class's list.
func classUpgradePlan(classVersions []skew.Version, desired, current skew.Version) ([]skew.Version, error) {
	if !desired.Valid() {
		return nil, fmt.Errorf("desired version: %w", desired.Err())
	}
	if !current.Valid() {
		return nil, fmt.Errorf("current control-plane version: %w", current.Err())
	}
	want, from := desired.Semver(), current.Semver()
	if from.String() == want.String() {
		return nil, nil
	}
	var candidates []skew.Version
	for _, v := range classVersions {
		if !v.Valid() {
			return nil, fmt.Errorf("ClusterClass version %q: %w", v.Text(), v.Err())
		}
		sv := v.Semver()
		if sv.Compare(from) <= 0 {
			continue // not an upgrade of the control plane as it is
		}
		if past(sv, want) {
			break
		}
		candidates = append(candidates, v)
		if sv.String() == want.String() {
			break
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	// One release per minor: the last listed of each, as the list is ordered.
	var plan []skew.Version
	minor := from.Minor
	if minor == want.Minor {
		plan = append(plan, candidates[0])
	}
	for _, v := range candidates {
		m := v.Semver().Minor
		if m > minor {
			plan = append(plan, v)
		}
		if m == minor && len(plan) > 0 {
			plan[len(plan)-1] = v
		}
		minor = m
	}
	return plan, nil
}

// past reports whether v comes after want, ordering equal versions by their
// build metadata as Cluster API does (dot-separated identifiers compared in
// turn, numbers below words, the longer list greater when one is a prefix of
// the other); two different words cannot be ordered and are not past.
func past(v, want semver.Version) bool {
	if c := v.Compare(want); c != 0 {
		return c > 0
	}
	a, b := v.Build, want.Build
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := compareBuildIdentifier(a[i], b[i]); c != 0 {
			return c == 1
		}
	}
	return len(a) > len(b)
}

// compareBuildIdentifier orders two build identifiers: -1, 0 or 1, or 2 when
// they are different words that cannot be ordered.
func compareBuildIdentifier(a, b string) int {
	an, aErr := strconv.ParseUint(a, 10, 64)
	bn, bErr := strconv.ParseUint(b, 10, 64)
	aNum, bNum := aErr == nil && isDigits(a), bErr == nil && isDigits(b)
	switch {
	case aNum && bNum:
		return cmp.Compare(an, bn)
	case aNum:
		return -1
	case bNum:
		return 1
	case a == b:
		return 0
	}
	return 2
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// upgradePlanOf says how Cluster API carries out a change of a Cluster's
// topology version under class: through the class's kubernetesVersions, by
// its upgrade-plan extension, or (nil) one minor at a time.
func upgradePlanOf(class *clusterv1.ClusterClass, desired, current skew.Version) (*skew.UpgradePlan, error) {
	if ext := class.Spec.Upgrade.External.GenerateUpgradePlanExtension; ext != "" {
		return &skew.UpgradePlan{Source: "upgrade-plan extension " + ext + " of ClusterClass " + class.Name, Extension: ext}, nil
	}
	if len(class.Spec.KubernetesVersions) == 0 {
		return nil, nil
	}
	steps, err := classUpgradePlan(skew.ReadVersions(class.Spec.KubernetesVersions), desired, current)
	if err != nil {
		return nil, fmt.Errorf("ClusterClass %s/%s: %w", class.Namespace, class.Name, err)
	}
	return &skew.UpgradePlan{Source: "ClusterClass " + class.Name + " spec.kubernetesVersions", Steps: steps}, nil
}
