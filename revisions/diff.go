package revisions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Change is one difference between two snapshots.
type Change struct {
	// Path names the field as users know it from the machine template:
	// "version", "infrastructureRef", "bootstrap.configRef",
	// "metadata.labels.team", "readinessGates[APIServerPodHealthy].polarity",
	// "kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag". It is
	// relative to spec.template.spec for a MachineDeployment and to
	// spec.machineTemplate.spec for a KubeadmControlPlane; template metadata is
	// "metadata...." and KubeadmControlPlane's own fields keep their names
	// ("version", "kubeadmConfigSpec...."). A map key or list key that is not a
	// plain name is written in brackets: "metadata.labels[cluster.x-k8s.io/role]".
	// Lists of objects are keyed by their name, conditionType, path or key
	// field when it is unique, else by index; lists of scalars are one value.
	Path string
	// From is the value before, To the value after: "" when absent; an
	// empty string value reads `""`; a reference reads "Kind/name" (with its
	// API group, "Kind.group/name", when only the group changed); a list of
	// scalars reads as JSON.
	From, To string
}

// Diff returns the differences from one snapshot to another, sorted by Path.
// from may be the zero Snapshot (no previous content: everything is added).
// The two snapshots must be of the same kind.
func Diff(from, to Snapshot) ([]Change, error) {
	out, err := diff(from, to, false)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	return out, nil
}

// RolloutChanges returns the differences from one snapshot to the other
// that make Cluster API replace machines, sorted by Path: the part of Diff
// that IsInPlace does not apply in place (version, infrastructureRef,
// bootstrap, failureDomain of a MachineDeployment; version,
// infrastructureRef and most of kubeadmConfigSpec of a
// KubeadmControlPlane). Empty when the change is in place or there is none.
func RolloutChanges(from, to Snapshot) ([]Change, error) {
	out, err := diff(from, to, true)
	if err != nil {
		return nil, fmt.Errorf("rollout changes: %w", err)
	}
	return out, nil
}

// diff compares two snapshots; rolloutOnly keeps the differences that
// replace machines.
func diff(from, to Snapshot, rolloutOnly bool) ([]Change, error) {
	kind, fl, tl, err := leavesOfPair(from, to)
	if err != nil {
		return nil, err
	}
	return changesOf(kind, fl, tl, rolloutOnly), nil
}

// changesOf compares the leaves of two snapshots of kind; rolloutOnly
// keeps the differences that replace machines.
func changesOf(kind string, fl, tl map[string]leaf, rolloutOnly bool) []Change {
	var out []Change
	for _, k := range unionKeys(fl, tl) {
		f, fok := fl[k]
		t, tok := tl[k]
		if fok && tok && f.cmp == t.cmp {
			continue
		}
		if rolloutOnly {
			raw := f.raw
			if !fok {
				raw = t.raw
			}
			if !rollsOut(kind, raw) {
				continue
			}
		}
		c := Change{}
		if fok {
			c.Path, c.From = f.path, f.value
		}
		if tok {
			c.Path, c.To = t.path, t.value
		}
		if fok && tok && f.ref && c.From == c.To {
			// Only the API group changed: show it.
			c.From, c.To = f.qualified, t.qualified
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// IsInPlace reports whether Cluster API applies the change from one snapshot
// to the other to the existing machines, without a rollout: true when the two
// differ and every difference is in a field Cluster API propagates in place;
// false when any difference rolls machines out, when they do not differ, and
// when from is the zero Snapshot (a creation).
//
// The split follows Cluster API v1.14:
//
//   - MachineDeployment (core/reconcilers/machinedeployment/mdutil
//     MachineTemplateUpToDate): version, bootstrap, infrastructureRef and
//     failureDomain roll out; template labels and annotations,
//     minReadySeconds, readinessGates, deletion.*, taints (and clusterName,
//     providerID, which Cluster API never compares) are in place.
//   - KubeadmControlPlane (controlplane/kubeadm/pkg filters.go UpToDate /
//     matchesMachineSpec / PrepareKubeadmConfigsForDiff): version,
//     infrastructureRef and kubeadmConfigSpec roll out, except
//     kubeadmConfigSpec.clusterConfiguration.dns (CoreDNS is updated in the
//     workload cluster), clusterConfiguration.controlPlaneEndpoint,
//     joinConfiguration.discovery and {init,join}Configuration.timeouts.
//     controlPlaneComponentHealthCheckSeconds, which Cluster API leaves out of
//     the comparison; machineTemplate metadata, readinessGates, deletion.*
//     and taints are in place.
func IsInPlace(from, to Snapshot) (bool, error) {
	if len(from.Data) == 0 && from.Kind == "" {
		if _, err := leavesOf(to); err != nil {
			return false, fmt.Errorf("in-place check: %w", err)
		}
		return false, nil
	}
	kind, fl, tl, err := leavesOfPair(from, to)
	if err != nil {
		return false, fmt.Errorf("in-place check: %w", err)
	}
	return inPlaceOf(kind, fl, tl), nil
}

// inPlaceOf is IsInPlace of the leaves of two snapshots of kind.
func inPlaceOf(kind string, fl, tl map[string]leaf) bool {
	changed := false
	for _, k := range unionKeys(fl, tl) {
		f, fok := fl[k]
		t, tok := tl[k]
		if fok && tok && f.cmp == t.cmp {
			continue
		}
		changed = true
		raw := f.raw
		if !fok {
			raw = t.raw
		}
		if rollsOut(kind, raw) {
			return false
		}
	}
	return changed
}

// rollsOut reports whether a change at data path raw replaces machines.
func rollsOut(kind string, raw []string) bool {
	sh, ok := shapes[kind]
	if !ok {
		return false
	}
	return sh.rollsOut(func(p ...string) bool { return len(raw) >= len(p) && matchPath(raw[:len(p)], p) })
}

// matchPath says whether path a matches pattern p, where a "*" segment
// matches any one segment (a list element, a list of workers).
func matchPath(a, p []string) bool {
	if len(a) != len(p) {
		return false
	}
	for i := range a {
		if p[i] != "*" && a[i] != p[i] {
			return false
		}
	}
	return true
}

// leaf is one compared value of a snapshot.
type leaf struct {
	raw       []string // data path; list elements as "[i]" or "[key]"
	path      string   // display path
	value     string   // display value
	cmp       string   // comparison value
	ref       bool     // a contract reference (apiGroup, kind, name)
	qualified string   // for references: "Kind.group/name"
}

func leavesOfPair(from, to Snapshot) (string, map[string]leaf, map[string]leaf, error) {
	kind := to.Kind
	if from.Kind != "" && to.Kind != "" && from.Kind != to.Kind {
		return "", nil, nil, fmt.Errorf("cannot compare a %s revision with a %s revision", from.Kind, to.Kind)
	}
	if kind == "" {
		kind = from.Kind
	}
	fl, err := leavesOfKind(kind, from)
	if err != nil {
		return "", nil, nil, err
	}
	tl, err := leavesOfKind(kind, to)
	if err != nil {
		return "", nil, nil, err
	}
	return kind, fl, tl, nil
}

func leavesOf(s Snapshot) (map[string]leaf, error) { return leavesOfKind(s.Kind, s) }

func leavesOfKind(kind string, s Snapshot) (map[string]leaf, error) {
	out := map[string]leaf{}
	if len(s.Data) == 0 {
		return out, nil
	}
	if _, ok := shapes[kind]; !ok {
		return nil, fmt.Errorf("kind %q has no revisions", kind)
	}
	v, err := decodeJSON(s.Data)
	if err != nil {
		return nil, fmt.Errorf("%s revision %s: data is not JSON: %w", kind, s.Hash, err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s revision %s: data is not a JSON object", kind, s.Hash)
	}
	w := walker{kind: kind, out: out}
	for k, child := range obj {
		w.walk([]string{k}, displayRoot(kind, k), child)
	}
	return out, nil
}

// displayRoot maps the first segment of a data path to display segments.
func displayRoot(kind, key string) []string {
	switch {
	case isTemplateKind(kind) && key == "spec":
		return nil
	case isControlPlaneKind(kind) && key == "machineTemplate":
		return []string{}
	}
	return []string{key}
}

type walker struct {
	kind string
	out  map[string]leaf
}

func (w walker) isRef(raw []string) bool {
	sh, ok := shapes[w.kind]
	if !ok {
		return false
	}
	for _, ref := range sh.refs {
		if equalPath(raw, ref) {
			return true
		}
	}
	return false
}

func (w walker) walk(raw, disp []string, v any) {
	// KubeadmControlPlane machineTemplate.spec.X displays as X, like a
	// MachineDeployment's template spec.
	if isControlPlaneKind(w.kind) && len(raw) == 2 && raw[0] == "machineTemplate" && raw[1] == "spec" {
		disp = nil
	}
	if m, ok := v.(map[string]any); ok && w.isRef(raw) {
		str := func(k string) string { s, _ := m[k].(string); return s }
		kind, name, group := str("kind"), str("name"), str("apiGroup")
		q := kind
		if group != "" {
			q += "." + group
		}
		l := leaf{raw: raw, path: joinPath(disp), value: kind + "/" + name, ref: true, qualified: q + "/" + name}
		l.cmp = mustJSON(v)
		w.add(l)
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			w.add(leaf{raw: raw, path: joinPath(disp), value: "{}", cmp: "{}"})
			return
		}
		for k, child := range x {
			w.walk(appendPath(raw, k), appendPath(disp, k), child)
		}
	case []any:
		if len(x) == 0 || allScalars(x) {
			s := mustJSON(x)
			w.add(leaf{raw: raw, path: joinPath(disp), value: s, cmp: s})
			return
		}
		keys := listKeys(x)
		for i, child := range x {
			seg := "[" + strconv.Itoa(i) + "]"
			if keys != nil {
				seg = "[" + keys[i] + "]"
			}
			w.walk(appendPath(raw, seg), appendPath(disp, seg), child)
		}
	default:
		s := scalarString(v)
		w.add(leaf{raw: raw, path: joinPath(disp), value: s, cmp: mustJSON(v)})
	}
}

func (w walker) add(l leaf) {
	w.out[strings.Join(l.raw, "\x00")] = l
}

func appendPath(p []string, seg string) []string {
	return append(p[:len(p):len(p)], seg)
}

// listKeys returns the key of each element of a list of objects, from the
// first of name, conditionType, path, key or class (a ClusterClass's
// worker classes) that every element has as a unique non-empty string; nil
// when there is none.
func listKeys(list []any) []string {
	for _, field := range []string{"name", "conditionType", "path", "key", "class"} {
		keys := make([]string, len(list))
		seen := map[string]bool{}
		ok := true
		for i, e := range list {
			m, isMap := e.(map[string]any)
			s, isString := m[field].(string)
			if !isMap || !isString || s == "" || seen[s] {
				ok = false
				break
			}
			seen[s] = true
			keys[i] = s
		}
		if ok {
			return keys
		}
	}
	return nil
}

func allScalars(list []any) bool {
	for _, e := range list {
		switch e.(type) {
		case map[string]any, []any:
			return false
		}
	}
	return true
}

func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		if x == "" {
			return `""`
		}
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

func mustJSON(v any) string {
	// Without HTML escaping: a command such as "echo x > f && sh f" reads
	// as typed, not as "echo x \u003e f \u0026\u0026 sh f".
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// joinPath renders display segments: plain names joined with ".", other keys
// and list keys in brackets.
func joinPath(segs []string) string {
	var b strings.Builder
	for _, s := range segs {
		switch {
		case strings.HasPrefix(s, "["):
			b.WriteString(s)
		case plainName(s):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		default:
			b.WriteString("[" + s + "]")
		}
	}
	return b.String()
}

func plainName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func unionKeys(a, b map[string]leaf) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
