package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rollout-guard/rollout-guard/revisions"
	"github.com/rollout-guard/rollout-guard/skew"
)

// skewPreflightChecks are Cluster API's MachineSet preflight checks of
// version skew, in the order refusals name them: with one of them
// skipped, a MachineSet creates Machines of a version its control plane
// does not allow. The fifth, ControlPlaneIsStable, only waits for a
// control plane that is provisioning or upgrading.
var skewPreflightChecks = []clusterv1.MachineSetPreflightCheck{
	clusterv1.MachineSetPreflightCheckKubernetesVersionSkew,
	clusterv1.MachineSetPreflightCheckKubeadmVersionSkew,
	clusterv1.MachineSetPreflightCheckControlPlaneVersionSkew,
}

// skippedSkewChecks returns the skew checks that the preflight-skip
// annotation value now skips and before did not, as Cluster API reads the
// value (comma-separated names, spaces trimmed, "All" for every check).
func skippedSkewChecks(now, before string) []clusterv1.MachineSetPreflightCheck {
	if now == "" || now == before {
		return nil
	}
	had := skewChecksSkipped(before)
	var out []clusterv1.MachineSetPreflightCheck
	for _, c := range skewChecksSkipped(now) {
		if !slices.Contains(had, c) {
			out = append(out, c)
		}
	}
	return out
}

// skewChecksSkipped returns the skew checks an annotation value skips.
func skewChecksSkipped(value string) []clusterv1.MachineSetPreflightCheck {
	var out []clusterv1.MachineSetPreflightCheck
	for _, name := range strings.Split(value, ",") {
		check := clusterv1.MachineSetPreflightCheck(strings.TrimSpace(name))
		if check == clusterv1.MachineSetPreflightCheckAll {
			return skewPreflightChecks
		}
		if slices.Contains(skewPreflightChecks, check) && !slices.Contains(out, check) {
			out = append(out, check)
		}
	}
	return out
}

// skippedPreflight is the violation of an object newly set to skip the
// skew checks skipped.
func skippedPreflight(obj, value string, skipped []clusterv1.MachineSetPreflightCheck) skew.Violation {
	names := make([]string, len(skipped))
	for i, c := range skipped {
		names[i] = string(c)
	}
	return skew.Violation{
		Rule:  skew.RulePreflightSkewChecksSkipped,
		Field: "metadata.annotations",
		Value: value,
		Message: fmt.Sprintf("%s: annotation %s=%q skips Cluster API's preflight check(s) %s, which keep its MachineSets from creating Machines out of version skew with the control plane",
			obj, clusterv1.MachineSetSkipPreflightChecksAnnotation, value, strings.Join(names, ", ")),
		Remedy: fmt.Sprintf("leave those checks out of the annotation (%s alone skips no skew check), or have a member of an override group set %s with the reason",
			clusterv1.MachineSetPreflightCheckControlPlaneIsStable, revisions.AnnotationOverride),
	}
}

// unsetVersion is the violation of an object of a cluster whose control
// plane cp has a version, set to run no version.
func unsetVersion(obj, field string, cp *skew.ControlPlaneState) skew.Violation {
	return skew.Violation{
		Rule:  skew.RuleWorkerVersionUnset,
		Field: field,
		Value: "",
		Message: fmt.Sprintf("%s: %s is empty, so its kubelets would run whatever version their machine image holds, checked neither against control plane %s %s (spec.version %s) by rollout-guard nor by Cluster API's MachineSet preflight checks",
			obj, field, cp.Kind, cp.Name, cp.Version.Text()),
		Remedy: fmt.Sprintf("set %s to the version the machines run, within the kubelet skew of %s (e.g. %s), or have a member of an override group set %s with the reason",
			field, cp.Version.Text(), cp.Version.Text(), revisions.AnnotationOverride),
	}
}

// unsetOrSkipped reports whether d refuses only for the rules that say a
// version is not checked (RuleWorkerVersionUnset,
// RulePreflightSkewChecksSkipped), not for a version out of skew.
func unsetOrSkipped(d skew.Decision) bool {
	if len(d.Violations) == 0 {
		return false
	}
	for _, v := range d.Violations {
		if v.Rule != skew.RuleWorkerVersionUnset && v.Rule != skew.RulePreflightSkewChecksSkipped {
			return false
		}
	}
	return true
}

// warnUnsetOrSkipped turns d's violations into warnings, each followed by
// why.
func warnUnsetOrSkipped(d skew.Decision, why string) skew.Decision {
	out := skew.Decision{Warnings: append([]string{}, d.Warnings...)}
	for _, v := range d.Violations {
		out.Warnings = append(out.Warnings, "rollout-guard: "+v.Message+" [rule "+string(v.Rule)+"]: "+why)
	}
	return out
}

// clusterPaused reports whether Cluster namespace/name is paused (its
// spec.paused or its paused annotation); a Cluster not found is not.
func (f factReader) clusterPaused(ctx context.Context, namespace, name string) (bool, error) {
	cluster := &clusterv1.Cluster{}
	err := f.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, cluster, f.getOptions()...)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading Cluster %s/%s: %w", namespace, name, err)
	}
	return cannotCreateMachines(cluster), nil
}

// orDefault returns s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
