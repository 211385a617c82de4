package skew

// Violation is one broken rule.
type Violation struct {
	// Rule is the id of the broken rule.
	Rule RuleID
	// Field is the field path of the offending value, e.g. "spec.version",
	// "spec.topology.version", "spec.template.spec.version" or
	// "spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag".
	Field string
	// Value is the offending value as written ("" when the offence is a
	// value removed, e.g. an etcd image tag taken out).
	Value string
	// Message is one sentence naming the versions and objects involved, e.g.
	// "KubeadmControlPlane demo: Kubernetes downgrade from v1.35.2 to v1.34.1
	// is not supported by kubeadm".
	Message string
	// Remedy is the way out, e.g. "keep spec.version at v1.35.x or later; a
	// control plane cannot be downgraded in place (to go back, restore from an
	// etcd backup)".
	Remedy string
}

// String returns the refusal text: "<Message> [rule <Rule>]; <Remedy>".
func (v Violation) String() string {
	s := v.Message + " [rule " + string(v.Rule) + "]"
	if v.Remedy != "" {
		s += "; " + v.Remedy
	}
	return s
}

// Decision is the verdict on one change.
type Decision struct {
	// Violations are the broken rules; any one refuses the change.
	Violations []Violation
	// Warnings are things worth telling the user that do not refuse the
	// change: facts that could not be checked, or a skew that the change
	// leaves as it was.
	Warnings []string
}

// Allowed reports whether the change breaks no rule.
func (d Decision) Allowed() bool { return len(d.Violations) == 0 }

// verdict collects the violations and warnings of one evaluation.
type verdict struct {
	d Decision
}

func (r *verdict) refuse(v Violation) { r.d.Violations = append(r.d.Violations, v) }

func (r *verdict) warn(w string) {
	for _, have := range r.d.Warnings {
		if have == w {
			return
		}
	}
	r.d.Warnings = append(r.d.Warnings, w)
}

// worse reports whether a change whose new state breaks a rule by bad minors
// is to be refused: when the old state is unknown, broke nothing (oldBad <= 0),
// or broke it by fewer minors. A change that leaves an existing breach as it
// was, or lessens it, is allowed with a warning so operators can repair it.
func worse(bad int, oldKnown bool, oldBad int) bool {
	return !oldKnown || bad > oldBad
}

// tolerated reports whether a control plane already below the bar top may
// make this change anyway. A bar from the object's own spec or its running
// machines tolerates any change that does not widen the gap. A bar from
// recorded history is stricter: the control plane really ran that version,
// so only a change that narrows the gap is tolerated; staying as far below
// it is refused.
func tolerated(top known, bad int, oldKnown bool, oldBad int) bool {
	if top.recorded {
		return oldKnown && bad < oldBad
	}
	return !worse(bad, oldKnown, oldBad)
}
