package skew

import (
	"fmt"

	"github.com/blang/semver/v4"
)

// Default field paths, used when a change does not name its own.
const (
	kcpVersionField    = "spec.version"
	kcpEtcdField       = "spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag"
	workerVersionField = "spec.template.spec.version"
	// topologyVersionField is the version of a ClusterClass-based Cluster.
	topologyVersionField = "spec.topology.version"
)

// known is a version together with where it came from.
type known struct {
	v   semver.Version
	src string // "" for the object's own spec before the change
	// recorded marks a bar that comes from recorded history. Such a bar is
	// never relaxed: the control plane really ran that version, whatever the
	// current object says (it may have been taken below it by an override).
	recorded bool
}

// highest returns the newest of vs (the first of equal ones); ok is false
// when vs is empty.
func highest(vs []known) (known, bool) {
	if len(vs) == 0 {
		return known{}, false
	}
	best := vs[0]
	for _, k := range vs[1:] {
		if k.v.GT(best.v) {
			best = k
		}
	}
	return best, true
}

// lowest returns the oldest of vs (the first of equal ones); ok is false when
// vs is empty.
func lowest(vs []known) (known, bool) {
	if len(vs) == 0 {
		return known{}, false
	}
	best := vs[0]
	for _, k := range vs[1:] {
		if k.v.LT(best.v) {
			best = k
		}
	}
	return best, true
}

// object names an object in messages: "KubeadmControlPlane demo".
func object(kind, name string) string {
	switch {
	case kind == "":
		return name
	case name == "":
		return kind
	}
	return kind + " " + name
}

// orDefault returns s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// minors says "1 minor" or "3 minors".
func minors(n int) string {
	if n == 1 {
		return "1 minor"
	}
	return fmt.Sprintf("%d minors", n)
}

// skipped names the minors an upgrade from a to b leaves out, each written
// with prefix: "v1.35", "v1.35 through v1.36", or "at least one minor"
// across majors.
func skipped(prefix string, from, to Minor) string {
	n := to.minorsAfter(from)
	switch {
	case n >= farApart:
		return "at least one minor"
	case n == 2:
		return prefix + from.add(1).String()
	}
	return prefix + from.add(1).String() + " through " + prefix + to.add(-1).String()
}

// kubeletRule explains the kubelet skew that applies to a kubelet of minor k.
func kubeletRule(k Minor) string {
	if kubeletSkew(k) == 2 {
		return "a kubelet older than v1.25 may be at most 2 minors older than the API server"
	}
	return "a kubelet may be at most 3 minors older than the API server"
}

// other reports whether v, a version of another object or of a fact about
// this one that only informs the decision, is a version; one that is not is
// left out with a warning naming what and where it is.
func other(r *verdict, what string, v Version) bool {
	if !v.Valid() {
		r.warn(fmt.Sprintf("%s: ignoring %q, which is not a Kubernetes version; it is not checked", what, v.text))
		return false
	}
	return true
}

// invalid is the violation for a version or tag of the changed object that
// is not one.
func invalid(obj, field, value, kind, example string) Violation {
	return Violation{
		Rule:    RuleInvalidVersion,
		Field:   field,
		Value:   value,
		Message: fmt.Sprintf("%s: %s %q is not a valid %s version", obj, field, value, kind),
		Remedy:  "write " + example,
	}
}
