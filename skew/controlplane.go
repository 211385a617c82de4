package skew

import (
	"fmt"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
)

// History is what a control plane is known to have run, from its recorded
// revisions: the highest Kubernetes and etcd versions, each with where it
// came from.
type History struct {
	// HighestKubernetes is the highest Kubernetes version ever run; unset if
	// unknown.
	HighestKubernetes Version
	// HighestKubernetesSource is what it came from, e.g. "revision 4".
	HighestKubernetesSource string
	// HighestEtcd is the highest etcd version ever run; unset if unknown.
	HighestEtcd EtcdVersion
	// HighestEtcdSource is what HighestEtcd came from, e.g. "revision 4".
	HighestEtcdSource string
}

// Worker is one worker whose kubelet talks to the control plane: a pool
// (MachineDeployment, MachinePool) or a Machine.
type Worker struct {
	// Kind is "MachineDeployment", "MachinePool" or "Machine".
	Kind string
	// Name is the object's name.
	Name string
	// Version is the pool's spec version or the machine's kubelet version;
	// unset means unknown: the worker is skipped with no warning.
	Version Version
	// PoolKind and PoolName name the pool a Machine belongs to
	// ("MachineDeployment" or "MachinePool"); both "" when it belongs to
	// none or its pool is not known. A pool leaves them empty. Refusals
	// name a pool's Machines together with it, in one line per rule.
	PoolKind, PoolName string
}

// UpgradePlan is how Cluster API's topology controller carries out one change
// of spec.topology.version (a chained upgrade, Cluster API v1.12 and later).
type UpgradePlan struct {
	// Source names where the steps come from, for messages, e.g.
	// "ClusterClass demo-class spec.kubernetesVersions".
	Source string
	// Steps are the versions the control plane goes through, in order; the
	// last is the new version. Empty when Extension decides them.
	Steps []Version
	// Extension names the upgrade-plan extension (ClusterClass
	// spec.upgrade.external.generateUpgradePlanExtension) that computes the
	// steps when the upgrade starts; only the target can be judged here.
	Extension string
}

// ControlPlaneChange is the facts of one change to a control plane's
// version or etcd, every version read once (ReadVersion, ReadEtcdVersion)
// where the facts are gathered: a KubeadmControlPlane update, a Cluster
// topology version change, or a change of a control plane read through
// Cluster API's contract. An unset Version or EtcdVersion stands for "".
type ControlPlaneChange struct {
	// Kind and Name name the changed object in messages
	// ("KubeadmControlPlane", "Cluster").
	Kind, Name string
	// VersionField is the field path of the version: "spec.version"
	// (KubeadmControlPlane, the default) or "spec.topology.version" (Cluster).
	VersionField string
	// EtcdField is the field path of the etcd image tag, for messages;
	// default "spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag".
	EtcdField string
	// OldVersion is the version before the change, unset on create.
	OldVersion Version
	// NewVersion is the version after the change.
	NewVersion Version
	// OldEtcdImageTag is the explicit etcd image tag before the change,
	// unset when kubeadm's default applies.
	OldEtcdImageTag EtcdVersion
	// NewEtcdImageTag is the explicit etcd image tag after the change,
	// unset when kubeadm's default applies.
	NewEtcdImageTag EtcdVersion
	// RunningVersions are the versions the control-plane machines run now
	// (KubeadmControlPlane status.versions[].version, status.version); may be empty.
	RunningVersions []Version
	// History is what the control plane is known to have run before.
	History History
	// Workers are the workers whose kubelets talk to this control plane.
	Workers []Worker
	// Plan, when set, is how Cluster API carries out this change of a
	// topology version: the versions the control plane goes through (a
	// chained upgrade), or the upgrade-plan extension that will decide them.
	// nil: the control plane goes straight to NewVersion.
	Plan *UpgradePlan
	// NoEtcd says the control plane runs no etcd the policy knows (a
	// control plane other than kubeadm's, read through Cluster API's
	// contract): rule EtcdDowngrade does not apply.
	NoEtcd bool
	// PreviousUnrolled says the previous spec (OldVersion, OldEtcdImageTag)
	// was never rolled out: no control-plane machine was created with it or
	// runs it. It then does not count as run, so going back from it is a
	// revert judged against RunningVersions and History only; History must
	// then leave out the revision being reverted.
	PreviousUnrolled bool
}

// EvaluateControlPlane judges one change to a control plane's
// Kubernetes version or etcd image tag against rules ControlPlaneDowngrade,
// EtcdDowngrade, ControlPlaneMinorSkip, ControlPlaneLeavesWorkerNewer,
// ControlPlaneLeavesWorkerTooOld and InvalidVersion: a new version or etcd
// image tag that is not one is refused; any other fact that is not a version
// is left out with a warning.
func EvaluateControlPlane(c ControlPlaneChange) Decision {
	var r verdict
	f := controlPlaneFacts{
		c:            c,
		obj:          object(c.Kind, c.Name),
		versionField: orDefault(c.VersionField, kcpVersionField),
		etcdField:    orDefault(c.EtcdField, kcpEtcdField),
		newV:         c.NewVersion,
	}
	if !f.newV.Valid() {
		r.refuse(invalid(f.obj, f.versionField, f.newV.text, "Kubernetes", "a Kubernetes version such as v1.35.2"))
	}
	newTagOK := true
	if c.NewEtcdImageTag.text != "" && !c.NewEtcdImageTag.Valid() {
		newTagOK = false
		r.refuse(invalid(f.obj, f.etcdField, c.NewEtcdImageTag.text, "etcd", "an etcd image tag such as 3.6.5-0, or leave it empty for kubeadm's default"))
	}
	if !f.newV.Valid() {
		return r.d
	}

	// What is known of the control plane before the change.
	if c.OldVersion.text != "" {
		if c.OldVersion.Valid() {
			f.old, f.oldKnown = known{v: c.OldVersion.v}, true
		} else {
			r.warn(fmt.Sprintf("%s: the previous %s %q is not a Kubernetes version; the change is judged against the running versions and history only", f.obj, f.versionField, c.OldVersion.text))
		}
	}
	for _, v := range c.RunningVersions {
		if other(&r, f.obj+": running control-plane version", v) {
			f.running = append(f.running, known{v: v.v, src: "run by a control-plane machine"})
		}
	}
	if h := c.History.HighestKubernetes; h.text != "" {
		if other(&r, f.obj+": highest Kubernetes version in its history", h) {
			f.hist = append(f.hist, known{v: h.v, src: "the highest version it has run, per " + orDefault(c.History.HighestKubernetesSource, "its history"), recorded: true})
		}
	}

	if c.PreviousUnrolled && f.oldKnown && MinorOf(f.newV.v).Less(MinorOf(f.old.v)) {
		r.warn(fmt.Sprintf("%s: %s goes back from %s to %s; allowed as a revert only because no control-plane machine was created with %s or runs it", f.obj, f.versionField, vs(f.old.v), vs(f.newV.v), vs(f.old.v)))
	}
	checkDowngrade(&r, f)
	if newTagOK && !c.NoEtcd {
		checkEtcdAlongPlan(&r, f)
	}
	checkSkip(&r, f)
	var left []leftWorker
	for _, w := range c.Workers {
		if l, ok := checkWorkerLeft(&r, f, w); ok {
			left = append(left, l)
		}
	}
	reportWorkersLeft(&r, f, left)
	if c.NoEtcd {
		withoutKubeadm(&r.d)
	}
	return r.d
}

// controlPlaneFacts is what the rules of a control-plane change judge: the
// change, how messages name it, and what is known of the control plane
// before it, each version that is one read into a known.
type controlPlaneFacts struct {
	c ControlPlaneChange
	// obj names the changed object in messages: "KubeadmControlPlane demo".
	obj string
	// versionField and etcdField are the field paths of its version and of
	// its etcd image tag, defaults applied.
	versionField, etcdField string
	// newV is the new version; the rules see only a valid one.
	newV Version
	// old is the previous spec's version, when oldKnown (the change is an
	// update, and the previous version is one).
	old      known
	oldKnown bool
	// running are the versions the control-plane machines run.
	running []known
	// hist is the highest version of its history, when known.
	hist []known
}

// kubeadmReasons are the reasons the rules give for a kubeadm control plane,
// with what holds for every Kubernetes control plane instead (the version
// skew policy), for a control plane of another provider.
var kubeadmReasons = strings.NewReplacer(
	"is not supported by kubeadm", "is not supported: a Kubernetes control plane cannot be downgraded",
	"kubeadm upgrades one minor at a time", "the API servers of a control plane must stay within one minor of each other",
	"(to go back, restore from an etcd backup)", "(to go back, restore its datastore from a backup)",
)

// withoutKubeadm words d's violations for a control plane other than
// kubeadm's: the rules are Kubernetes', not kubeadm's.
func withoutKubeadm(d *Decision) {
	for i := range d.Violations {
		d.Violations[i].Message = kubeadmReasons.Replace(d.Violations[i].Message)
		d.Violations[i].Remedy = kubeadmReasons.Replace(d.Violations[i].Remedy)
	}
}

// checkDowngrade is rule ControlPlaneDowngrade: the new minor must not be
// below the highest minor the control plane has run. A previous spec that
// never rolled out says nothing of what the control plane has run: only the
// running machines and the history do.
func checkDowngrade(r *verdict, f controlPlaneFacts) {
	obj, field, newVersion := f.obj, f.versionField, f.newV
	newV := newVersion.v
	old, oldKnown := f.old, f.oldKnown && !f.c.PreviousUnrolled
	var all []known
	if oldKnown {
		all = append(all, old)
	}
	all = append(all, f.running...)
	all = append(all, f.hist...)
	top, ok := highest(all)
	if !ok {
		return
	}
	bad := MinorOf(top.v).minorsAfter(MinorOf(newV))
	if bad <= 0 {
		return
	}
	from := vs(top.v)
	if top.src != "" {
		from += " (" + top.src + ")"
	}
	if tolerated(top, bad, oldKnown, MinorOf(top.v).minorsAfter(MinorOf(old.v))) {
		r.warn(fmt.Sprintf("%s: %s %s stays below %s; allowed because this change does not lower it further", obj, field, vs(newV), from))
		return
	}
	r.refuse(Violation{
		Rule:    RuleControlPlaneDowngrade,
		Field:   field,
		Value:   newVersion.text,
		Message: fmt.Sprintf("%s: Kubernetes downgrade from %s to %s is not supported by kubeadm", obj, from, vs(newV)),
		Remedy:  fmt.Sprintf("keep %s at %s.x or later; a control plane cannot be downgraded in place (to go back, restore from an etcd backup)", field, MinorOf(top.v).v()),
	})
}

// checkSkip is rule ControlPlaneMinorSkip: the new minor must be at most one
// above the lowest of the previous spec and the running machines; with an
// upgrade plan, every step of it must be.
func checkSkip(r *verdict, f controlPlaneFacts) {
	obj, field, newVersion := f.obj, f.versionField, f.newV
	newV, old, oldKnown := newVersion.v, f.old, f.oldKnown
	var all []known
	if oldKnown {
		all = append(all, old)
	}
	all = append(all, f.running...)
	base, ok := lowest(all)
	if !ok {
		return
	}
	if f.c.Plan != nil && MinorOf(newV).minorsAfter(MinorOf(base.v)) > 1 {
		checkPlan(r, f, base)
		return
	}
	gap := MinorOf(newV).minorsAfter(MinorOf(base.v))
	bad := gap - 1
	if bad <= 0 {
		return
	}
	from := vs(base.v)
	if base.src != "" {
		from += " (still " + base.src + ")"
	}
	if !worse(bad, oldKnown, MinorOf(old.v).minorsAfter(MinorOf(base.v))-1) {
		r.warn(fmt.Sprintf("%s: %s %s stays more than one minor above %s; allowed because this change does not widen the gap", obj, field, vs(newV), from))
		return
	}
	next := MinorOf(base.v).add(1)
	remedy := fmt.Sprintf("set %s to a %s.x release first and wait until every control-plane machine runs it, then upgrade to %s", field, next.v(), MinorOf(newV).v())
	if field == topologyVersionField {
		remedy += fmt.Sprintf("; or list a release of every minor from %s to %s in the ClusterClass's spec.kubernetesVersions, and Cluster API walks the control plane through them in one edit", next.v(), MinorOf(newV).v())
	}
	r.refuse(Violation{
		Rule:    RuleControlPlaneMinorSkip,
		Field:   field,
		Value:   newVersion.text,
		Message: fmt.Sprintf("%s: upgrade from %s to %s skips %s; kubeadm upgrades one minor at a time", obj, from, vs(newV), skipped("v", MinorOf(base.v), MinorOf(newV))),
		Remedy:  remedy,
	})
}

// checkPlan is rule ControlPlaneMinorSkip for an upgrade Cluster API carries
// out in steps: from base, each step may move one minor at most. An
// upgrade-plan extension decides its steps only when the upgrade starts, and
// Cluster API refuses a plan that skips a minor, so the jump itself is allowed
// with a warning saying so.
func checkPlan(r *verdict, f controlPlaneFacts, base known) {
	plan, obj, field, newVersion := f.c.Plan, f.obj, f.versionField, f.newV
	newV := newVersion.v
	from := vs(base.v)
	if base.src != "" {
		from += " (still " + base.src + ")"
	}
	if plan.Extension != "" {
		r.warn(fmt.Sprintf("%s: upgrade from %s to %s crosses %s; the upgrade-plan extension %s decides the steps, so rollout-guard judges only where it ends", obj, from, vs(newV), minors(MinorOf(newV).minorsAfter(MinorOf(base.v))), plan.Extension))
		return
	}
	prev := base.v
	var through []string
	steps := plan.Steps
	if n := len(steps); n == 0 || steps[n-1].text != newVersion.text {
		// A plan that does not end at the new version is refused by Cluster
		// API; judge the last stretch as one step.
		steps = append(slices.Clone(steps), newVersion)
	}
	for _, s := range steps {
		if !s.Valid() {
			continue // a step that is not a version is refused by Cluster API
		}
		step := s.v
		if MinorOf(step).minorsAfter(MinorOf(prev)) > 1 {
			gapFrom := vs(prev)
			if prev.EQ(base.v) {
				gapFrom = from
			}
			r.refuse(Violation{
				Rule:    RuleControlPlaneMinorSkip,
				Field:   field,
				Value:   newVersion.text,
				Message: fmt.Sprintf("%s: the upgrade to %s steps from %s to %s, skipping %s (steps from %s); kubeadm upgrades one minor at a time", obj, vs(newV), gapFrom, vs(step), skipped("v", MinorOf(prev), MinorOf(step)), plan.Source),
				Remedy:  fmt.Sprintf("add a release of every skipped minor to %s, or set %s to a %s.x release first", plan.Source, field, MinorOf(prev).add(1).v()),
			})
			return
		}
		through = append(through, vs(step))
		prev = step
	}
	if len(through) > 1 {
		r.warn(fmt.Sprintf("%s: Cluster API upgrades the control plane from %s through %s (steps from %s)", obj, from, strings.Join(through, ", "), plan.Source))
	}
}

// checkEtcdAlongPlan is rule EtcdDowngrade for a change that may go through
// steps: the step whose etcd is lowest is judged (the new version itself
// when there are no steps, or when it is that step).
func checkEtcdAlongPlan(r *verdict, f controlPlaneFacts) {
	c := f.c
	newV := f.newV.v
	at := newV
	if c.Plan != nil {
		lowestEtcd, _, lowestErr := EtcdForTag(newV, c.NewEtcdImageTag)
		for _, s := range c.Plan.Steps {
			if !s.Valid() {
				continue // refused by checkPlan
			}
			if e, _, err := EtcdForTag(s.v, c.NewEtcdImageTag); err == nil && (lowestErr != nil || e.LT(lowestEtcd)) {
				at, lowestEtcd, lowestErr = s.v, e, nil
			}
		}
	}
	checkEtcd(r, f, at)
}

// checkEtcd is rule EtcdDowngrade: the etcd minor the control plane would run
// at version at (the new version, or a step on the way to it) must not be
// below the highest etcd minor it has run.
func checkEtcd(r *verdict, f controlPlaneFacts, at semver.Version) {
	c, obj, versionField, etcdField := f.c, f.obj, f.versionField, f.etcdField
	newV, old, oldKnown := f.newV.v, f.old, f.oldKnown
	noDefault := func(err error, what string) { r.warn(fmt.Sprintf("%s: %v; %s", obj, err, what)) }
	newEtcd, newSrc, err := EtcdForTag(at, c.NewEtcdImageTag)
	if err != nil {
		noDefault(err, "etcd downgrade not checked")
		return
	}
	if !at.EQ(newV) {
		newSrc += ", at step " + vs(at) + " of the upgrade to " + vs(newV)
	}

	var seen []known
	var oldEtcd known
	oldEtcdKnown := false
	oldTag := c.OldEtcdImageTag
	switch {
	case oldTag.text != "":
		if oldTag.Valid() {
			oldEtcd, oldEtcdKnown = known{v: oldTag.v, src: "imageTag " + oldTag.text}, true
		} else {
			r.warn(fmt.Sprintf("%s: ignoring the previous %s %q, which is not an etcd version; it is not checked", obj, etcdField, oldTag.text))
		}
	case oldKnown:
		if v, src, err := EtcdForTag(old.v, EtcdVersion{}); err == nil {
			oldEtcd, oldEtcdKnown = known{v: v, src: src}, true
		} else {
			noDefault(err, "the etcd of the previous spec is not counted")
		}
	}
	if oldEtcdKnown && !c.PreviousUnrolled {
		seen = append(seen, oldEtcd)
	}
	if h := c.History.HighestEtcd; h.text != "" {
		if h.Valid() {
			seen = append(seen, known{v: h.v, src: orDefault(c.History.HighestEtcdSource, "its history"), recorded: true})
		} else {
			r.warn(fmt.Sprintf("%s: ignoring the highest etcd version in its history %q, which is not an etcd version; it is not checked", obj, h.text))
		}
	}
	if oldTag.text == "" {
		// Machines run kubeadm's default only when no tag was pinned; with a
		// pinned tag they run that tag, counted above (or, when that tag never
		// rolled out, the one before it, which History holds).
		for _, k := range f.running {
			if v, src, err := EtcdForTag(k.v, EtcdVersion{}); err == nil {
				seen = append(seen, known{v: v, src: src})
			} else {
				noDefault(err, "the etcd of that running machine is not counted")
			}
		}
	}
	top, ok := highest(seen)
	if !ok {
		return
	}
	topMinor, newMinor := MinorOf(top.v), MinorOf(newEtcd)
	if up := newMinor.minorsAfter(topMinor); up > 1 {
		r.warn(fmt.Sprintf("%s: etcd upgrade from %s (%s) to %s (%s) skips %s; etcd upgrades one minor at a time", obj, top.v, top.src, newEtcd, newSrc, skipped("", topMinor, newMinor)))
	}
	bad := topMinor.minorsAfter(newMinor)
	if bad <= 0 {
		return
	}
	if tolerated(top, bad, oldEtcdKnown, topMinor.minorsAfter(MinorOf(oldEtcd.v))) {
		r.warn(fmt.Sprintf("%s: etcd %s (%s) stays below %s (%s); allowed because this change does not lower it further", obj, newEtcd, newSrc, top.v, top.src))
		return
	}
	field, value := etcdField, c.NewEtcdImageTag.text
	if c.NewEtcdImageTag.text == "" && oldTag.text == "" {
		// kubeadm's default moved because the version changed.
		field, value = versionField, c.NewVersion.text
	}
	example := ""
	if len(top.v.Pre) == 0 {
		example = fmt.Sprintf(" such as %d.%d.%d-0", top.v.Major, top.v.Minor, top.v.Patch)
	}
	r.refuse(Violation{
		Rule:    RuleEtcdDowngrade,
		Field:   field,
		Value:   value,
		Message: fmt.Sprintf("%s: etcd downgrade from %s (%s) to %s (%s) is not supported; etcd cannot return to an older minor by replacing members", obj, top.v, top.src, newEtcd, newSrc),
		Remedy:  fmt.Sprintf("keep etcd at %s: set %s to a %s.x tag%s, or downgrade etcd with its own procedure (etcdctl downgrade enable) outside Cluster API first", topMinor, etcdField, topMinor, example),
	})
}

// checkWorkerLeft is rules ControlPlaneLeavesWorkerNewer and
// ControlPlaneLeavesWorkerTooOld for one worker: it returns the rule the
// worker breaks, and whether the change creates or widens the breach
// (refused) or leaves it as it was (a warning). ok is false when the worker
// breaks neither, or its version is unknown or does not parse.
// reportWorkersLeft words the findings, a line per group of workers.
func checkWorkerLeft(r *verdict, f controlPlaneFacts, w Worker) (leftWorker, bool) {
	if w.Version.text == "" || !other(r, f.obj+": "+object(w.Kind, w.Name), w.Version) {
		return leftWorker{}, false
	}
	oldKnown := f.oldKnown
	wv := w.Version.v
	wm, cpNew, cpOld := MinorOf(wv), MinorOf(f.newV.v), MinorOf(f.old.v)

	if bad := wm.minorsAfter(cpNew); bad > 0 {
		return leftWorker{rule: RuleControlPlaneLeavesWorkerNewer, refused: worse(bad, oldKnown, wm.minorsAfter(cpOld)), worker: w, v: wv}, true
	}
	skew := kubeletSkew(wm)
	if bad := cpNew.minorsAfter(wm) - skew; bad > 0 {
		return leftWorker{rule: RuleControlPlaneLeavesWorkerTooOld, refused: worse(bad, oldKnown, cpOld.minorsAfter(wm)-skew), worker: w, v: wv}, true
	}
	return leftWorker{}, false
}
