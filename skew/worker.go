package skew

import (
	"fmt"
)

// ControlPlaneState is what a worker change is judged against, its
// versions read. Any control plane that follows Cluster API's contract
// (spec.version, status.version) fits, not only KubeadmControlPlane.
type ControlPlaneState struct {
	// Kind and Name name the control plane in messages.
	Kind, Name string
	// Version is the control plane's spec.version; unset if not known.
	Version Version
	// RunningVersions are its status.versions / status.version. The lowest of
	// these and Version bounds workers from above (no kubelet newer than the
	// oldest API server); the highest bounds them from below (the kubelet
	// skew counts from the newest API server). May be empty.
	RunningVersions []Version
}

// WorkerChange is the facts of one change (or create) of a worker pool's
// version (a MachineDeployment or a MachinePool), its versions read.
type WorkerChange struct {
	// Kind and Name name the pool in messages ("MachineDeployment",
	// "MachinePool").
	Kind, Name string
	// VersionField is the field path of the version; default
	// "spec.template.spec.version".
	VersionField string
	// OldVersion is the version before the change, unset on create.
	OldVersion Version
	// NewVersion is the version after the change.
	NewVersion Version
	// ControlPlane is the cluster's control plane; nil when unknown, which
	// gives a warning and no violation.
	ControlPlane *ControlPlaneState
}

// EvaluateWorker judges one change (or create) of a worker pool's
// version against rules WorkerNewerThanControlPlane, WorkerTooOld and
// InvalidVersion. A pool that is already out of skew may still be edited as
// long as the edit does not move it further out: that gives a warning, not
// a refusal.
func EvaluateWorker(c WorkerChange) Decision {
	var r verdict
	obj := object(c.Kind, c.Name)
	field := orDefault(c.VersionField, workerVersionField)

	if !c.NewVersion.Valid() {
		r.refuse(invalid(obj, field, c.NewVersion.text, "Kubernetes", "a Kubernetes version such as v1.35.2"))
		return r.d
	}
	newV := c.NewVersion.v
	var old known
	oldKnown := false
	if c.OldVersion.text != "" {
		if c.OldVersion.Valid() {
			old, oldKnown = known{v: c.OldVersion.v}, true
		} else {
			r.warn(fmt.Sprintf("%s: the previous %s %q is not a Kubernetes version; the change is judged as a new version", obj, field, c.OldVersion.text))
		}
	}
	if c.ControlPlane == nil {
		r.warn(fmt.Sprintf("%s: control plane not known; version skew not checked", obj))
		return r.d
	}
	cp := c.ControlPlane
	cpName := "control plane " + object(cp.Kind, cp.Name)
	var cpVersions []known
	if cp.Version.text != "" && other(&r, cpName+": spec.version", cp.Version) {
		cpVersions = append(cpVersions, known{v: cp.Version.v, src: "its spec.version"})
	}
	for _, v := range cp.RunningVersions {
		if other(&r, cpName+": running version", v) {
			cpVersions = append(cpVersions, known{v: v.v, src: "run by one of its machines"})
		}
	}
	low, ok := lowest(cpVersions)
	if !ok {
		r.warn(fmt.Sprintf("%s: no version of %s known; version skew not checked", obj, cpName))
		return r.d
	}
	high, _ := highest(cpVersions)
	wNew, wOld := MinorOf(newV), MinorOf(old.v)

	// Rule WorkerNewerThanControlPlane: not newer than the oldest API server.
	lowM := MinorOf(low.v)
	if bad := wNew.minorsAfter(lowM); bad > 0 {
		if worse(bad, oldKnown, wOld.minorsAfter(lowM)) {
			r.refuse(Violation{
				Rule:    RuleWorkerNewerThanControlPlane,
				Field:   field,
				Value:   c.NewVersion.text,
				Message: fmt.Sprintf("%s: %s is newer than %s, the oldest version of %s (%s); a kubelet must not be newer than the API server", obj, vs(newV), vs(low.v), cpName, low.src),
				Remedy:  fmt.Sprintf("keep %s at %s.x or older until every machine of %s runs %s or newer", field, lowM.v(), cpName, wNew.v()),
			})
		} else {
			r.warn(fmt.Sprintf("%s: %s stays newer than %s, the oldest version of %s; allowed because this change does not widen the gap", obj, vs(newV), vs(low.v), cpName))
		}
	}

	// Rule WorkerTooOld: within the kubelet skew of the newest API server.
	highM := MinorOf(high.v)
	gap := highM.minorsAfter(wNew)
	if bad := gap - kubeletSkew(wNew); bad > 0 {
		if worse(bad, oldKnown, highM.minorsAfter(wOld)-kubeletSkew(wOld)) {
			r.refuse(Violation{
				Rule:    RuleWorkerTooOld,
				Field:   field,
				Value:   c.NewVersion.text,
				Message: fmt.Sprintf("%s: %s is %s older than %s, the newest version of %s (%s); %s", obj, vs(newV), minors(gap), vs(high.v), cpName, high.src, kubeletRule(wNew)),
				Remedy:  fmt.Sprintf("set %s to %s.x or newer", field, oldestKubeletFor(highM).v()),
			})
		} else {
			r.warn(fmt.Sprintf("%s: %s stays %s older than %s, the newest version of %s, beyond the kubelet skew; allowed because this change does not lower it", obj, vs(newV), minors(gap), vs(high.v), cpName))
		}
	}
	return r.d
}
